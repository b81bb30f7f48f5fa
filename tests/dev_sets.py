"""The shared dev sets' texts (../shared/eval, beside the repository): what several tests run real text through."""

from __future__ import annotations

import json
from pathlib import Path

EVAL = Path(__file__).resolve().parents[2] / "shared" / "eval"


def dev_texts(name: str, samples: int | None = None, questions: bool = False) -> list[str]:
    """The turns of the first `samples` conversations of the dev set `name` (all by default), after their questions
    when `questions`; none when the set is not beside the repository."""
    path = EVAL / name
    if not path.exists():
        return []
    out: list[str] = []
    for sample in json.loads(path.read_text("utf-8"))[:samples]:
        if questions:
            out += [str(qa["question"]) for qa in sample["qa"]]
        out += [
            str(t["text"])
            for key, turns in sample["conversation"].items()
            if key.startswith("session_") and isinstance(turns, list)
            for t in turns
        ]
    return out
