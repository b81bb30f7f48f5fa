"""Suite-wide hooks.

The default run (pyproject addopts) spreads the modules over two pytest-xdist workers with `--dist loadfile`: a
module runs whole on one worker, so its module-scoped lake is built once and its tests keep their order. A worker
takes the next module when it is free, in collection order; the modules that take longest are collected first so
that none of them starts last and runs alone at the end (`--no-loadscope-reorder` keeps this order instead of
xdist's most-tests-first). The order within a module never changes.
"""
from __future__ import annotations

import pytest

# Longest first (seconds of `pytest --durations=0`, summed per module, on a quiet 2-core machine). A module not
# listed runs after these, in its usual order.
LONGEST_FIRST = (
    "test_object_store.py",
    "test_reliability.py",
    "test_postgres_storage.py",
    "test_dirty_lake.py",
    "test_incremental.py",
    "test_ui.py",
    "test_scale.py",
    "test_forget.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))   # stable: each module's own order is kept
