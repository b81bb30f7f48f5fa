"""The package declares what it imports: every third-party module the library folders import (at any depth, lazily
too) is a distribution pyproject.toml lists, as a dependency or in an extra, so a fresh `pip install -e .` (CI, a
user's machine) does not depend on another package happening to bring it."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = ("raw_store", "r2g", "recall", "jobs", "assets")
OURS = {*LIBRARY, "bench", "tests"}


def _name(requirement: str) -> str:
    """A requirement's distribution name, normalized as PEP 503 does."""
    match = re.match(r"[A-Za-z0-9_.\-]+", requirement)
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group()).lower()


def _imported(folder: Path) -> dict[str, set[str]]:
    """{top-level module: files importing it} over every module of `folder`, stdlib and our own packages left out."""
    out: dict[str, set[str]] = {}
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in OURS and top != "__future__":
                    out.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return out


def test_every_third_party_import_of_the_library_is_declared() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = {_name(r) for r in project["dependencies"]}
    declared |= {_name(r) for extra in project["optional-dependencies"].values() for r in extra}
    distributions = packages_distributions()
    imported: dict[str, set[str]] = {}
    for folder in LIBRARY:
        for module, files in _imported(ROOT / folder).items():
            imported.setdefault(module, set()).update(files)
    assert {"numpy", "polars", "pyarrow", "dagster"} <= imported.keys()  # the walk sees the imports at all
    undeclared = {
        module: sorted(files)
        for module, files in imported.items()
        if not {_name(d) for d in distributions.get(module, [module])} & declared
    }
    assert not undeclared, f"imported but not in pyproject.toml: {undeclared}"
