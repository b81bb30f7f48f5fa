"""What the benchmark scripts report about the machine they ran on."""

from __future__ import annotations

import os


def cpu_busy_seconds() -> float | None:
    """Machine-wide busy CPU-seconds since boot (Linux /proc/stat): over a run, (Δbusy / Δwall) is the number
    of busy cores, which tells a clean run (≈ the run's own processes) from one that shared the machine."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            vals = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
    return (sum(vals[:8]) - idle) / os.sysconf("SC_CLK_TCK")
