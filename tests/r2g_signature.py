"""A graph's readable signature for golden tests: one sorted line per node and per non-structural edge.

Lines (titles, not ids, so a person can check them):
  Entity <subtype> <title>
  Fact <predicate_norm>[ not][ mod=<modality>][ x<frequency>] | <ROLE>=<title> … (roles sorted)
  Preference <subtype> | Task <subtype> | Concept <title> | Episode <subtype>
  <EDGE> <src title> -> <dst title>   for CAUSES, CAUSED_BY, SAME_AS, SUPPORTS, CONTRADICTS, ABOUT
MENTIONS / DERIVED_FROM / TEMPORAL_NEXT are structural and checked elsewhere.
"""

from __future__ import annotations

import hashlib
from datetime import datetime

import pyarrow as pa

from r2g.schema import ROLE_EDGES
from raw_store.schema import MESSAGES
from raw_store.text import detect_lang

LINK_EDGES = ("CAUSES", "CAUSED_BY", "SAME_AS", "SUPPORTS", "CONTRADICTS", "ABOUT")


def make_turns(
    turns: list[tuple[str, str, datetime | None]], conv_id: str = "c1", tenant: str = "t1", raw_id: str | None = None
) -> pa.Table:
    """MESSAGES rows for (speaker, text, ts) turns, each message the whole of its own chunk
    (`raw_{i}`, or the one name `raw_id` for every chunk)."""
    rows = []
    for i, (speaker, text, ts) in enumerate(turns):
        n = len(text.encode("utf-8"))
        rid = raw_id or f"raw_{i}"
        rows.append(
            dict(
                tenant=tenant,
                conv_id=conv_id,
                msg_id=f"m{i}",
                seq=i,
                speaker=speaker,
                role="user",
                ts=ts,
                lang=detect_lang(text),
                text=text,
                caption=None,
                text_sha=hashlib.sha256(text.encode("utf-8")).hexdigest(),
                raw_id=rid,
                offset=0,
                length=n,
                raw_refs=[dict(raw_id=rid, offset=0, length=n)],
                source_file="in.jsonl",
                line=i + 1,
                format="jsonl",
            )
        )
    return pa.Table.from_pylist(rows, schema=MESSAGES)


def _label(n: dict) -> str:
    if n["type"] == "Fact":
        return f"[{n['predicate_norm']}]"
    if n["type"] == "Episode":
        return f"Episode({n['msg_id']})"
    if n["type"] in ("Preference", "Task"):
        return f"{n['type']}({n['subtype']})"
    return f"{n['type']}({n['title']})"


def signature(nodes: pa.Table, edges: pa.Table) -> list[str]:
    by_id = {n["id"]: n for n in nodes.to_pylist()}
    out_edges: dict[str, list[dict]] = {}
    lines = []
    for e in edges.to_pylist():
        out_edges.setdefault(e["src"], []).append(e)
        if e["type"] in LINK_EDGES and e["src"] in by_id and e["dst"] in by_id:
            src = by_id[e["src"]]
            lines.append(f"{e['type']} {_label(src)} -> {_label(by_id[e['dst']])}")
    for n in by_id.values():
        t = n["type"]
        if t == "Entity":
            lines.append(f"Entity {n['subtype']} {n['title']}")
        elif t == "Fact":
            head = (
                n["predicate_norm"]
                + (" not" if n["negation"] else "")
                + (f" mod={n['modality']}" if n["modality"] else "")
                + (f" x{n['frequency']}" if n["frequency"] > 1 else "")
            )
            roles = sorted(
                f"{e['type']}={by_id[e['dst']]['title']}"
                for e in out_edges.get(n["id"], [])
                if e["type"] in ROLE_EDGES and e["dst"] in by_id
            )
            lines.append(" | ".join(["Fact " + head] + roles))
        elif t in ("Preference", "Task"):
            lines.append(f"{t} {n['subtype']}: {n['text']}")
        elif t == "Concept":
            lines.append(f"Concept {n['title']}")
        elif t == "Episode":
            lines.append(f"Episode {n['subtype']}")
    return sorted(lines)
