"""Small hand-built lakes for the recall tests: real CAS blobs, hand-written nodes and edges."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa

from r2g.schema import EDGES, NODES
from raw_store.cas import RawStore
from raw_store.lake import Lake
from raw_store.schema import MESSAGES, RAW_CHUNKS
from raw_store.tables import write_import
from recall.index import build_indexes


@dataclass
class LakeBuilder:
    root: Path
    chunks: list[dict] = field(default_factory=list)
    messages: list[dict] = field(default_factory=list)
    nodes: list[dict] = field(default_factory=list)
    edges: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.lake = Lake(self.root)
        self.store = RawStore(self.root)

    def conversation(
        self,
        tenant: str,
        conv_id: str,
        turns: list[tuple[str, str, str]],
        start: datetime = datetime(2023, 5, 1, 10, 0),
    ) -> dict[str, dict]:
        """Store the turns (msg_id, speaker, text) as one RawChunk; returns msg_id → raw_ref."""
        parts, refs, offset = [], {}, 0
        for msg_id, _speaker, text in turns:
            b = text.encode("utf-8")
            refs[msg_id] = {"raw_id": None, "offset": offset, "length": len(b)}
            parts.append(b)
            offset += len(b) + 1
        data = b"\n".join(parts)
        blob = self.store.put(tenant, data, start.date())
        for r in refs.values():
            r["raw_id"] = blob.raw_id
        self.chunks.append(
            {
                "id": blob.raw_id,
                "sha256": blob.sha256,
                "tenant": tenant,
                "conv_id": conv_id,
                "seq": 0,
                "path": blob.path,
                "len_bytes": blob.len_bytes,
                "ts": start,
                "created_at": start,
                "text": data.decode("utf-8"),
                "n_messages": len(turns),
            }
        )
        for seq, (msg_id, speaker, text) in enumerate(turns):
            ref = refs[msg_id]
            self.messages.append(
                {
                    "tenant": tenant,
                    "conv_id": conv_id,
                    "msg_id": msg_id,
                    "seq": seq,
                    "speaker": speaker,
                    "role": "user",
                    "ts": start + timedelta(minutes=seq),
                    "text": text,
                    "raw_id": ref["raw_id"],
                    "offset": ref["offset"],
                    "length": ref["length"],
                    "raw_refs": [ref],
                }
            )
        return refs

    def node(
        self,
        tenant: str,
        node_id: str,
        type: str,
        title: str,
        text: str = "",
        keywords: tuple = (),
        refs: tuple = (),
        time: datetime | None = None,
        **extra,
    ) -> str:
        self.nodes.append(
            {
                "id": node_id,
                "tenant": tenant,
                "type": type,
                "title": title,
                "text": text,
                "keywords": list(keywords),
                "raw_refs": list(refs),
                "time_start": time,
                "status": "active",
                **extra,
            }
        )
        return node_id

    def edge(self, tenant: str, src: str, dst: str, type: str, weight: float = 1.0) -> None:
        self.edges.append(
            {"id": f"e_{src}_{type}_{dst}", "tenant": tenant, "src": src, "dst": dst, "type": type, "weight": weight}
        )

    def write(self, index: bool = True) -> Lake:
        write_import(
            self.lake,
            {
                name: (pa.Table.from_pylist(rows, schema=_loose(schema, rows)), schema)
                for name, rows, schema in (
                    ("raw_chunks", self.chunks, RAW_CHUNKS),
                    ("messages", self.messages, MESSAGES),
                    ("nodes", self.nodes, NODES),
                    ("edges", self.edges, EDGES),
                )
            },
        )
        if index:
            build_indexes(self.lake)
        return self.lake


def _loose(schema: pa.Schema, rows: list[dict]) -> pa.Schema:
    """The schema restricted to the columns the rows use (write_table fills the rest with nulls)."""
    used = {k for r in rows for k in r}
    return pa.schema([f for f in schema if f.name in used])


MAY = datetime(2023, 5, 8, 10, 0)
JULY = datetime(2023, 7, 20, 10, 0)


def puppy_lake(root) -> Lake:
    """Tenant "t": Ann's puppy Biscuit — two May turns (an Episode and a Fact of the same line), one July turn."""
    b = LakeBuilder(root)
    may = b.conversation(
        "t",
        "c-may",
        [
            ("m1", "Ann", "I adopted a puppy named Biscuit at the shelter."),
            ("m2", "Ann", "Biscuit chewed my hiking boots today."),
        ],
        start=MAY,
    )
    july = b.conversation(
        "t",
        "c-july",
        [
            ("j1", "Ann", "Biscuit won the puppy agility contest at the park."),
        ],
        start=JULY,
    )
    b.node(
        "t",
        "ep_m1",
        "Episode",
        "Ann: adopted a puppy",
        "adopted a puppy named Biscuit at the shelter",
        ("adopt", "puppy", "biscuit", "shelter"),
        (may["m1"],),
        MAY,
        first_seen=MAY,
        last_seen=MAY,
    )
    # the same line as ep_m1, read as a Fact: overlapping bytes
    b.node(
        "t",
        "f_m1",
        "Fact",
        "Ann adopt puppy",
        "adopted a puppy named Biscuit",
        ("adopt", "puppy", "biscuit"),
        ({**may["m1"], "length": 28},),
        MAY,
        first_seen=MAY,
        last_seen=MAY,
    )
    b.node(
        "t",
        "ep_m2",
        "Episode",
        "Ann: Biscuit chewed boots",
        "Biscuit chewed my hiking boots",
        ("biscuit", "chew", "boots", "puppy"),
        (may["m2"],),
        MAY + timedelta(minutes=1),
        first_seen=MAY + timedelta(minutes=1),
        last_seen=MAY + timedelta(minutes=1),
    )
    b.node(
        "t",
        "ep_j1",
        "Episode",
        "Ann: Biscuit won agility",
        "Biscuit won the puppy agility contest",
        ("biscuit", "puppy", "agility", "contest"),
        (july["j1"],),
        JULY,
        first_seen=JULY,
        last_seen=JULY,
    )
    b.node(
        "t", "ent_biscuit", "Entity", "Biscuit", subtype="PERSON", first_seen=MAY, last_seen=JULY, raw_refs=[may["m1"]]
    )
    b.node(
        "t",
        "ent_contest",
        "Entity",
        "agility contest",
        subtype="MISC",
        first_seen=JULY,
        last_seen=JULY,
        raw_refs=[july["j1"]],
    )
    b.edge("t", "ep_m1", "ent_biscuit", "MENTIONS", 0.95)
    b.edge("t", "ep_j1", "ent_biscuit", "MENTIONS", 0.95)
    b.edge("t", "ep_j1", "ent_contest", "MENTIONS", 0.95)
    b.edge("t", "f_m1", "ep_m1", "DERIVED_FROM", 1.0)
    return b.write()
