"""A library-only install: the base dependencies carry no command-line or settings package, the library imports none,
and the `edinbox` command without its extra says in one line what to install."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_base_install_has_no_cli_or_settings_dependency() -> None:
    """click and pydantic-settings are the `cli` extra's (which `all` includes), not the base install's."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = " ".join(project["dependencies"])
    assert "click" not in base
    assert "pydantic" not in base
    assert project["optional-dependencies"]["cli"] == ["click>=8.1", "pydantic-settings>=2.6"]
    assert "cli" in project["optional-dependencies"]["all"][0]


def test_the_library_imports_neither_click_nor_pydantic() -> None:
    """`import edinbox` and the consumer loop load no module of click or pydantic (a user without the extra)."""
    code = (
        "import sys, edinbox, edinbox.loop, edinbox.sources; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'click', 'pydantic', 'pydantic_settings'}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_command_without_its_extra_names_it() -> None:
    """With click missing, `python -m edinbox` exits 2 with one line naming the `cli` extra, no traceback."""
    code = "import sys; sys.modules['click'] = None; import runpy; runpy.run_module('edinbox', run_name='__main__')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert done.stderr == "edinbox: the command needs click: pip install 'edinbox[cli]'\n"
