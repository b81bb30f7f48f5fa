"""Frozen pre-vectorisation implementations of the consolidation steps (reference for golden/differential tests)."""
