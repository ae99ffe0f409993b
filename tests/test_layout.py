"""The tree as a newcomer reads it: modules and functions of a readable size, layers that import only downwards, and
packages whose neighbours use their public face (`__init__`), never their `_private` modules."""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PACKAGE = SRC / "edinbox"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80


def _modules() -> list[Path]:
    """Every module of the package."""
    return sorted(PACKAGE.rglob("*.py"))


MEASURED = ("src", "tests", "bench", "scripts")
"""The folders whose modules the size limits hold: the package, its tests, its benchmarks and its scripts."""

KEPT = ("bench/experiments",)
"""Folders left out of the size limits: abandoned experiments kept for the record, not read as the tree."""


def _measured() -> list[Path]:
    """Every module the size limits hold: those of `MEASURED`, but for those under `KEPT`."""
    kept = [ROOT / folder for folder in KEPT]
    return sorted(
        path
        for folder in MEASURED
        for path in (ROOT / folder).rglob("*.py")
        if not any(path.is_relative_to(k) for k in kept)
    )


def _name(path: Path) -> str:
    """The dotted name of the module at `path` (a package's `__init__` is the package)."""
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _written(path: Path) -> Path:
    """The module written by hand that `path` stands for: a generated `_sync_x.py` is measured on its `_async_x.py`."""
    if path.name.startswith("_sync_"):
        source = path.with_name("_async_" + path.name.removeprefix("_sync_"))
        if source.exists():
            return source
    return path


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    """Every module `path` imports, as (line, dotted name), with `from package import module` resolved to the module
    when it names one (relative imports resolved too)."""
    here = _name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *([base] if base else [])])
            yield node.lineno, base
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                if (SRC / candidate.replace(".", "/")).with_suffix(".py").exists() or (
                    SRC / candidate.replace(".", "/") / "__init__.py"
                ).exists():
                    yield node.lineno, candidate


def _private_part(name: str) -> str | None:
    """The first `_private` component of a dotted module name (None when every part is public)."""
    return next((part for part in name.split(".") if part.startswith("_") and not part.startswith("__")), None)


def _long_modules(paths: list[Path]) -> dict[str, int]:
    """The modules among `paths` (each measured on the module written by hand) over the line limit, with their
    lines."""
    return {
        str(path): lines
        for path in sorted({_written(p) for p in paths})
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }


def _long_functions(paths: list[Path]) -> dict[str, int]:
    """The functions and methods of `paths` (each measured on the module written by hand) over the line limit,
    docstrings included, with their lines."""
    over = {}
    for path in sorted({_written(p) for p in paths}):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    over[f"{path}:{node.lineno} {node.name}"] = lines
    return over


LONG_MODULES: set[str] = set()
"""The modules still over the limit: none; kept so that a module over it names itself in the failure."""

LONG_FUNCTIONS: set[str] = set()
"""The functions still over the limit: none; kept so that a function over it names itself in the failure."""


def _relative(found: dict[str, int]) -> set[str]:
    """The offenders found, named from the project's root (`src/edinbox/x.py`, or `src/edinbox/x.py name` for a
    function)."""
    names = set()
    for where in found:
        path, _, function = where.partition(" ")
        relative = str(Path(path.rpartition(":")[0] if function else path).relative_to(ROOT))
        names.add(f"{relative} {function}" if function else relative)
    return names


def test_no_module_over_500_lines() -> None:
    """Every module written by hand, of the package, its tests, its benchmarks and its scripts, holds at most 500
    lines (a generated `_sync_*` twin is held to it through its async source), but for those `LONG_MODULES` names,
    each of which is still over: a split takes it off the list."""
    assert _relative(_long_modules(_measured())) == LONG_MODULES


def test_no_function_over_80_lines() -> None:
    """Every function or method written by hand, of the package, its tests, its benchmarks and its scripts, spans at
    most 80 lines, its docstring included, but for those `LONG_FUNCTIONS` names, each of which is still over: a split
    takes it off the list."""
    assert _relative(_long_functions(_measured())) == LONG_FUNCTIONS


def test_the_limits_hold_the_tests_benchmarks_and_scripts() -> None:
    """The size limits measure the tests, the benchmarks and the scripts besides the package, and leave out the
    experiments kept for the record."""
    measured = {path.relative_to(ROOT).parts[0] for path in _measured()}
    assert measured == set(MEASURED)
    assert ROOT / "tests" / "test_layout.py" in _measured()
    assert not [path for path in _measured() if path.is_relative_to(ROOT / "bench" / "experiments")]


def test_the_limits_count_lines_as_they_claim(tmp_path: Path) -> None:
    """The measures above flag a 501-line module and an 81-line function, not 500 and 80 lines, and measure a
    generated `_sync_*` module on its `_async_*` source."""

    def module(lines: int, function: int) -> str:
        body = "".join(f"    x{i} = {i}\n" for i in range(function - 2))
        text = f"async def f() -> None:\n{body}    return None\n"
        return text + "\n" * (lines - function)

    (tmp_path / "_async_big.py").write_text(module(MAX_MODULE_LINES + 1, MAX_FUNCTION_LINES + 1))
    (tmp_path / "_sync_big.py").write_text(module(10, 5))
    (tmp_path / "_sync_small.py").write_text(module(MAX_MODULE_LINES + 1, MAX_FUNCTION_LINES + 1))
    (tmp_path / "_async_small.py").write_text(module(MAX_MODULE_LINES, MAX_FUNCTION_LINES))
    assert _long_modules([tmp_path / "_sync_big.py"]) == {str(tmp_path / "_async_big.py"): MAX_MODULE_LINES + 1}
    assert _long_functions([tmp_path / "_sync_big.py"]) == {f"{tmp_path / '_async_big.py'}:1 f": MAX_FUNCTION_LINES + 1}
    assert not _long_modules([tmp_path / "_sync_small.py", tmp_path / "_async_small.py"])
    assert not _long_functions([tmp_path / "_sync_small.py", tmp_path / "_async_small.py"])


def test_no_importlib_for_our_own_modules() -> None:
    """Our modules import each other with import statements the reader and the type checker follow: `importlib` is
    used only by `edinbox._extras`, which probes the optional extras' third-party drivers, and for package data
    (`importlib.resources`, `importlib.metadata`)."""
    for path in _modules():
        if _name(path) == "edinbox._extras":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names if alias.name == "importlib"]
            elif isinstance(node, ast.ImportFrom) and node.module == "importlib":
                names = [f"importlib.{a.name}" for a in node.names if a.name not in ("resources", "metadata")]
            else:
                continue
            assert not names, f"{path.relative_to(SRC)}:{node.lineno} imports {names}"


# The layers, top down: a module may import its own layer and those below it, never one above.
LAYERS = [
    ("edinbox.cli", "edinbox._script", "edinbox.__main__"),
    ("edinbox.console",),
    ("edinbox.hub",),
    ("edinbox.integrations", "edinbox.testing"),
    ("edinbox.loop",),
    ("edinbox.sources", "edinbox.metrics"),
    ("edinbox.edi",),
]
"""Everything else of `edinbox` (the inbox API, its journal, the stores, the core) is the bottom layer; the package's
own face, `edinbox`, exports the loop's `consume` and stands at the loop's layer."""


def _layer(name: str) -> int:
    """The layer of a module of edinbox (0 is the top), the bottom layer when no prefix names it."""
    if name == "edinbox":
        return LAYERS.index(("edinbox.loop",))
    for number, prefixes in enumerate(LAYERS):
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            return number
    return len(LAYERS)


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_run_down_the_layers(path: Path) -> None:
    """cli -> console -> hub -> (testing, integrations) -> loop -> (sources, metrics) -> edi -> the inbox library:
    no module imports a layer above its own (the library knows no EDI, the parser no broker, the hub no console)."""
    here = _layer(_name(path))
    for line, name in _imports(path):
        if name == "edinbox" or not name.startswith("edinbox."):
            continue
        assert _layer(name) >= here, f"{path.relative_to(SRC)}:{line} imports {name}, a layer above its own"


def _unit(name: str) -> str:
    """The package a module belongs to for privacy: a hub subpackage (`edinbox.hub.ops`), or the first package
    under edinbox (`edinbox.stores`), or the module itself at the top (`edinbox._core`)."""
    parts = name.split(".")
    if parts[:2] == ["edinbox", "hub"] and len(parts) > 2:
        return ".".join(parts[:3])
    return ".".join(parts[:2])


def _library(name: str) -> bool:
    """Whether `name` is one of the inbox library's own modules (`edinbox._async_inbox`, its journal, ...): the
    stores' one caller, which may reach their base classes and factory."""
    return name.count(".") == 1 and name.split(".")[1].startswith("_")


_PACKAGES = ("edinbox.stores", "edinbox.sources", "edinbox.loop", "edinbox.edi", "edinbox.console", "edinbox.cli")
"""Packages whose `_private` modules only their own modules import (plus the hub's subpackages)."""


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_neighbours_use_a_package_face(path: Path) -> None:
    """A module outside a package (a hub subpackage, the stores, the sources, the loop, the parser, the console, the
    command line) imports what that package's `__init__` exports, never one of its `_private` modules."""
    here = _name(path)
    for line, name in _imports(path):
        unit = _unit(name)
        guarded = unit.startswith("edinbox.hub.") or unit in _PACKAGES
        if not guarded or _unit(here) == unit or name == unit:
            continue
        if unit == "edinbox.stores" and _library(here):
            continue
        assert not _private_part(name[len(unit) :]), f"{path.relative_to(SRC)}:{line} imports {name}, private to {unit}"


def test_the_hub_packages_form_no_cycle() -> None:
    """The hub's subpackages import each other in one direction only: their faces can be loaded in an order."""
    edges: dict[str, set[str]] = defaultdict(set)
    for path in (PACKAGE / "hub").rglob("*.py"):
        here = _unit(_name(path))
        for _, name in _imports(path):
            there = _unit(name)
            if name.startswith("edinbox.hub.") and here not in (there, "edinbox.hub"):
                edges[here].add(there)
    done: set[str] = set()

    def visit(node: str, trail: tuple[str, ...]) -> None:
        assert node not in trail, f"a cycle: {' -> '.join((*trail, node))}"
        if node in done:
            return
        for there in sorted(edges[node]):
            visit(there, (*trail, node))
        done.add(node)

    for node in sorted(edges):
        visit(node, ())
    assert len(edges) >= 8  # every subpackage with a neighbour was seen
