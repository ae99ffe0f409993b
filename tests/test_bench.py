"""The benchmarks stay runnable: every module in bench/ imports against the package as it is now."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODULES = sorted(p.stem for p in (ROOT / "bench").glob("*.py") if not p.stem.startswith("_"))


@pytest.mark.parametrize("module", MODULES)
def test_a_benchmark_imports(module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`bench.<module>` imports and has a `main`: a name moved or renamed in the package breaks it here, not in a
    benchmark run weeks later."""
    monkeypatch.syspath_prepend(str(ROOT))
    loaded = importlib.import_module(f"bench.{module}")
    assert callable(getattr(loaded, "main", None)), f"bench.{module} has no main()"
    assert sys.modules[f"bench.{module}"] is loaded
    assert loaded.__file__ is not None
    assert Path(loaded.__file__).parent == ROOT / "bench"  # this checkout's bench/, not another on the path
