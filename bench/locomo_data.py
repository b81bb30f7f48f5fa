"""The LoCoMo layout's turns and evidence labels (`../shared/eval/*.json`), shared by the recall benches.

Standard library only: bench/embedders.py's measuring worker processes import it without loading memctl.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

DIA_ID_RE = re.compile(r"^D(\d+):(\d+)$")
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


def session_numbers(conv: dict) -> list[int]:
    nums = [int(m.group(1)) for key in conv if (m := re.fullmatch(r"session_(\d+)", key))]
    return sorted(n for n in nums if isinstance(conv[f"session_{n}"], list))


def turn_documents(sample: dict) -> tuple[list[str], list[str]]:
    """(dia_ids, `speaker: text [+ image: caption]`) for every turn, in conversation order."""
    conv = sample["conversation"]
    ids, texts = [], []
    for n in session_numbers(conv):
        for turn in conv[f"session_{n}"]:
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [image: {turn['blip_caption']}]"
            ids.append(turn["dia_id"])
            texts.append(text)
    return ids, texts


def normalise_evidence(raw: list, known: set[str]) -> list[str]:
    """Evidence ids repaired as the baseline script does ("D8:6; D9:17", "D:11:26", "D30:05"); unknown dropped."""
    valid = []
    for item in raw:
        for piece in re.split(r"[;,\s]+", str(item).strip()):
            cand = piece.replace("D:", "D")
            m = DIA_ID_RE.match(cand)
            if m:
                cand = f"D{int(m.group(1))}:{int(m.group(2))}"
            if cand in known and cand not in valid:
                valid.append(cand)
    return valid


def scored_questions(sample: dict, known: set[str]) -> Iterator[tuple[dict, int, list[str]]]:
    """(qa, category, evidence turns) of each question of `sample` the benches score: categories 1-4 (5 is
    adversarial, with no evidence to find) whose evidence names at least one of the `known` turns."""
    for qa in sample["qa"]:
        cat = qa.get("category")
        if cat not in CATEGORY_NAMES or not qa.get("evidence"):
            continue
        gold = normalise_evidence(qa["evidence"], known)
        if gold:
            yield qa, cat, gold
