"""Dagster wiring of memctl (assets, checks, sensors, Definitions) and the `memctl` CLI.

Only this package imports dagster; it calls plain library functions and writes
their tables with the shared schemas.

Importing it makes jemalloc Arrow's memory pool, in this process and (through $ARROW_DEFAULT_MEMORY_POOL) in every
process it starts: the workers, `memctl` subprocesses. Arrow's default pool, mimalloc, kept pages the lake-wide steps
had freed: a 2-message append to a 100k-message lake peaked at 2.71 GB with it, 2.19 GB with jemalloc, in the same
time (bench/README.md). A pool the user names in $ARROW_DEFAULT_MEMORY_POOL is kept.
"""

import os

os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")


def _use_pool(name: str) -> None:
    """Make `name` the default pool where pyarrow was imported before the variable was set (a test, a notebook)."""
    import pyarrow as pa

    if name != "jemalloc" or pa.default_memory_pool().backend_name == name:
        return
    try:
        pa.set_memory_pool(pa.jemalloc_memory_pool())
    except NotImplementedError:  # a pyarrow built without jemalloc (Windows wheels): its default pool stays
        pass


_use_pool(os.environ["ARROW_DEFAULT_MEMORY_POOL"])
