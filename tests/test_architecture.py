"""Architecture rules that must never regress: library folders never import dagster."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIBRARIES = ("raw_store", "r2g", "recall", "jobs")


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


def test_importing_every_library_module_loads_no_dagster() -> None:
    modules = sorted(
        ".".join(p.relative_to(ROOT).with_suffix("").parts)
        for pkg in LIBRARIES for p in (ROOT / pkg).rglob("*.py") if p.name != "__init__.py"
    )
    code = ("import importlib, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'dagster'))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_this_check_detects_a_dagster_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from dagster import asset\n", "utf-8")
    assert "dagster" in _imported_modules(bad)
