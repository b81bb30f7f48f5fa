"""Dagster wiring of memctl (assets, checks, sensors, Definitions) and the `memctl` CLI.

Only this package imports dagster; it calls plain library functions and writes
their tables with the shared schemas.
"""
