"""Architecture rules that must never regress: library folders never import dagster, imports run one way down
the layers (raw_store <- r2g <- recall <- jobs <- assets, SPEC §2), and no module of a library folder imports
itself back through a circle of module-level imports, and no library module grows past MAX_MODULE_LINES."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIBRARIES = ("raw_store", "r2g", "recall", "jobs")
CYCLE_FREE = LIBRARIES + ("assets",)
# Modules a reader can hold in mind (issue 18): no module of a library folder or of assets/ over this many lines (as
# `ruff format` lays them out once it is enforced), unless it is one table of data.
MAX_MODULE_LINES = 600
# SPEC §2, lowest first: a module may import its own layer and the ones before it, never one after it.
LAYERS = ("raw_store", "r2g", "recall", "jobs", "assets")


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text("utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", LIBRARIES)
def test_library_sources_do_not_import_dagster(package: str) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"{package}/ has no Python files"
    offenders = [str(f.relative_to(ROOT)) for f in files if {"dagster", "dagster_webserver"} & _imported_modules(f)]
    assert offenders == []


def test_library_modules_stay_small() -> None:
    sizes = {
        p.relative_to(ROOT).as_posix(): len(p.read_text("utf-8").splitlines())
        for pkg in CYCLE_FREE
        for p in (ROOT / pkg).rglob("*.py")
    }
    assert sizes
    assert {p: n for p, n in sizes.items() if n > MAX_MODULE_LINES} == {}


def test_importing_every_library_module_loads_no_dagster_and_no_module_loads_the_nlp_stack() -> None:
    # spaCy, thinc and jieba (~1 s of a process's start) load with the first pipeline, so a run that annotates
    # nothing — an up-to-date `memctl materialize`, a forget re-run from cached annotations — never imports them;
    # igraph (which imports matplotlib where that is installed, ~1 s) loads with the first graph algorithm
    modules = sorted(
        ".".join(p.relative_to(ROOT).with_suffix("").parts)
        for pkg in LIBRARIES
        for p in (ROOT / pkg).rglob("*.py")
        if p.name != "__init__.py"
    )
    code = (
        "import importlib, sys\n"
        "loaded = lambda *tops: sorted(m for m in sys.modules if m.split('.')[0] in tops)\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "print(loaded('dagster'))\n"
        "import assets.definitions, assets.cli\n"
        "print(loaded('spacy', 'thinc', 'jieba', 'igraph', 'matplotlib'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["[]", "[]"], out.stdout


def test_this_check_detects_a_dagster_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from dagster import asset\n", "utf-8")
    assert "dagster" in _imported_modules(bad)


# -- import circles --------------------------------------------------------------------------------


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top_level_imports(path: Path, module: str, known: set[str]) -> set[str]:
    """The modules of `known` that `module` imports when it is loaded: module-level statements only (an import
    inside a function, or under `if TYPE_CHECKING:`, runs later or never). `from pkg import name` counts as
    pkg.name when that is a module, else as pkg."""
    tree = ast.parse(path.read_text("utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()

    def visit(stmts: list[ast.stmt]) -> None:
        for node in stmts:
            if isinstance(node, ast.If):
                test = node.test
                if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
                    isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
                ):
                    visit(node.orelse)
                    continue
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, (ast.Try, ast.With)):
                for block in (
                    node.body,
                    *(h.body for h in getattr(node, "handlers", [])),
                    getattr(node, "orelse", []),
                    getattr(node, "finalbody", []),
                ):
                    visit(block)
            elif isinstance(node, ast.Import):
                out.update(a.name for a in node.names if a.name in known)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                for a in node.names:
                    if f"{base}.{a.name}" in known:
                        out.add(f"{base}.{a.name}")
                    elif base in known:
                        out.add(base)

    visit(tree.body)
    out.discard(module)
    return out


def import_graph(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    files = {_module_name(p, root): p for pkg in packages for p in sorted((root / pkg).rglob("*.py"))}
    known = set(files)
    return {m: _top_level_imports(p, m, known) for m, p in files.items()}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The circles of the graph (Tarjan's strongly connected components with more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return cycles


def test_library_modules_import_no_circle() -> None:
    graph = import_graph(ROOT, CYCLE_FREE)
    assert "raw_store.readers" in graph and "raw_store.lake" in graph
    assert import_cycles(graph) == []


def test_readers_never_import_the_lake() -> None:
    """Routing a file to a tenant is the lake's business; readers get bytes, a tenant and a source_file."""
    graph = import_graph(ROOT, CYCLE_FREE)
    readers = [m for m in graph if m == "raw_store.readers" or m.startswith("raw_store.formats")]
    assert readers and all("raw_store.lake" not in graph[m] for m in readers)
    # and the lake imports no reader, not even inside a function (it used to, for tenant_for)
    lake = ast.parse((ROOT / "raw_store" / "lake.py").read_text("utf-8"))
    imported = {n.module for n in ast.walk(lake) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(lake) if isinstance(n, ast.Import) for a in n.names
    }
    assert not {m for m in imported if m and (m == "raw_store.readers" or m.startswith("raw_store.formats"))}


def test_the_cycle_check_finds_a_circle(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("", "utf-8")
    (pkg / "a.py").write_text("from pkg.b import x\n", "utf-8")
    (pkg / "b.py").write_text("from pkg import c\n", "utf-8")
    (pkg / "c.py").write_text(
        "import pkg.a\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.d\n", "utf-8"
    )
    (pkg / "d.py").write_text("def f():\n    from pkg import c\nfrom . import b\n", "utf-8")
    graph = import_graph(tmp_path, ("pkg",))
    assert graph["pkg.c"] == {"pkg.a"} and graph["pkg.d"] == {"pkg.b"}
    assert import_cycles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]


# -- import direction ------------------------------------------------------------------------------


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _all_imports(path: Path, module: str) -> list[tuple[int, str]]:
    """(line, module name) of every import of `path`: at module level and inside functions and classes alike
    (an import that runs late still ties the layers), but not under `if TYPE_CHECKING:`, which never runs.
    Relative imports are resolved against `module`."""
    tree = ast.parse(path.read_text("utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: list[tuple[int, str]] = []

    class Imports(ast.NodeVisitor):
        def visit_If(self, node: ast.If) -> None:
            if _is_type_checking(node.test):
                for stmt in node.orelse:
                    self.visit(stmt)
            else:
                self.generic_visit(node)

        def visit_Import(self, node: ast.Import) -> None:
            out.extend((node.lineno, a.name) for a in node.names)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            out.append((node.lineno, base))

    Imports().visit(tree)
    return out


def upward_imports(root: Path, layers: tuple[str, ...]) -> list[str]:
    """ "path:line: module imports name" for every import of a module of `layers` that names a later layer."""
    rank = {pkg: i for i, pkg in enumerate(layers)}
    found = []
    for pkg in layers:
        for path in sorted((root / pkg).rglob("*.py")):
            module = _module_name(path, root)
            for line, name in _all_imports(path, module):
                if rank.get(name.split(".")[0], -1) > rank[pkg]:
                    found.append(f"{path.relative_to(root).as_posix()}:{line}: {module} imports {name}")
    return found


def test_imports_run_one_way_down_the_layers() -> None:
    """raw_store knows bytes, r2g language and rules, recall indexes, jobs maintenance, assets wiring: a layer
    may use the ones below it, never one above (a table schema two layers read lives in the lower one)."""
    assert all((ROOT / pkg).is_dir() for pkg in LAYERS)
    assert upward_imports(ROOT, LAYERS) == []


def test_the_direction_check_finds_an_upward_import(tmp_path: Path) -> None:
    for pkg, files in {
        "low": {
            "a.py": "import os\nfrom high import x\n",
            "b.py": "def f():\n    import high.y\n    return high.y\n",
            "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from high import z\n"
            "else:\n    from high.w import v\n",
            "d.py": "from . import a\nfrom .a import x\n",
        },
        "high": {"e.py": "from low import a\nfrom low.b import f\n"},
    }.items():
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("", "utf-8")
        for name, text in files.items():
            (tmp_path / pkg / name).write_text(text, "utf-8")
    assert upward_imports(tmp_path, ("low", "high")) == [
        "low/a.py:2: low.a imports high",
        "low/b.py:2: low.b imports high.y",
        "low/c.py:5: low.c imports high.w",
    ]
