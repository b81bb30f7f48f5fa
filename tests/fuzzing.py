"""Hypothesis settings for the fuzz and property tests, scaled for soaks.

`MEMCTL_FUZZ_SCALE=20 .venv/bin/python -m pytest tests/test_readers.py …` runs every fuzzer
with 20x its examples (the default suite keeps them small to stay in the CI budget).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings


def fuzz_settings(max_examples: int) -> settings:
    scale = float(os.environ.get("MEMCTL_FUZZ_SCALE") or 1)
    return settings(
        max_examples=max(1, round(max_examples * scale)), deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )
