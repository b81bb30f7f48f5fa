"""Dagster wiring of memctl (assets, checks, sensors, Definitions) and the `memctl` CLI.

Only this package imports dagster; it calls plain library functions and writes
their tables with the shared schemas.

Importing it makes jemalloc Arrow's memory pool, in this process and (through $ARROW_DEFAULT_MEMORY_POOL) in every
process it starts: the workers, `memctl` subprocesses. Arrow's default pool, mimalloc, kept pages the lake-wide steps
had freed: a 2-message append to a 100k-message lake peaked at 2.71 GB with it, 2.19 GB with jemalloc, in the same
time (bench/README.md). A pool the user names in $ARROW_DEFAULT_MEMORY_POOL is kept.
"""

import contextlib
import os
import sys

os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")


def _use_jemalloc() -> None:
    """Make jemalloc the default pool where pyarrow was imported before the variable was set (a test, a notebook).
    Where it was not, the variable does it when pyarrow loads: nothing is imported here (`memctl --help` needs none)."""
    pa = sys.modules.get("pyarrow")
    if pa is None or os.environ["ARROW_DEFAULT_MEMORY_POOL"] != "jemalloc":
        return
    if pa.default_memory_pool().backend_name != "jemalloc":
        # a pyarrow built without jemalloc (Windows wheels) raises NotImplementedError: its default pool stays
        with contextlib.suppress(NotImplementedError):
            pa.set_memory_pool(pa.jemalloc_memory_pool())


_use_jemalloc()
