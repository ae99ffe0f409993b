"""The README's inbox example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_inbox_example_runs() -> None:
    """The python block under "The inbox in ten lines" executes without error (its asserts included)."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## The inbox in ten lines", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None
    code = match.group(1)
    assert "inbox.process" in code
    namespace: dict[str, object] = {}
    exec(compile(code, str(README), "exec"), namespace)  # noqa: S102 - the README example is our own code
    assert namespace["delivery"] is not None
