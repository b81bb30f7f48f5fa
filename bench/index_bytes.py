"""Recall's index on disk, file by file: bytes and bytes per message of a lake's current versions.

    python bench/index_bytes.py DATA_DIR [--rebuild]

--rebuild first compacts every tenant's recall index into a new base with this checkout's code, from the
lake's consolidated tables, as `memctl materialize --full` does (recall.index.build_indexes' recall part
only: the DuckDB file is left as it is). Prints one line per file name (summed over the tenant folders'
current segments), the totals, and the rebuild's seconds (wall and CPU).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import defaultdict
from pathlib import Path

import polars as pl

from raw_store.lake import Lake


def rebuild(lake: Lake) -> dict:
    from r2g.lake_graph import read_graph_tables, read_lake_table
    from raw_store.frames import as_frame
    from recall.index import NodeDocs, RawDocs, _active, _write_recall_indexes

    node_table, edge_table = read_graph_tables(lake, "consolidated")
    nodes = as_frame(
        node_table.select(
            ["tenant", "id", "type", "status", "title", "text", "keywords", "first_seen", "time_start", "last_seen"]
        )
    ).filter(_active(pl.col("status")))
    docs = NodeDocs(lake, nodes)
    tables = {
        "nodes": node_table,
        "edges": edge_table,
        "raw_chunks": read_lake_table(lake, "raw_chunks"),
        "messages": read_lake_table(lake, "messages"),
    }
    raw = RawDocs(lake, as_frame(tables["raw_chunks"].select(["tenant", "id", "text", "mime"])))
    return _write_recall_indexes(lake, tables, True, docs, raw)


def sizes(lake: Lake) -> tuple[dict[str, int], int]:
    """{file name: bytes} over every tenant's current segments, and the lake's message count."""
    out: dict[str, int] = defaultdict(int)
    root = lake.index_dir / "recall"
    for tenant in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        manifest = json.loads((tenant / (tenant / "CURRENT").read_text().strip()).read_text())
        for seg in manifest["segments"]:
            for f in (tenant / seg).iterdir():
                out[f.name] += f.stat().st_size
    from r2g.lake_graph import read_lake_table

    return dict(out), read_lake_table(lake, "messages").num_rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--rebuild", action="store_true")
    a = ap.parse_args()
    lake = Lake(Path(a.data))
    if a.rebuild:
        t0, c0 = time.perf_counter(), os.times()
        stats = rebuild(lake)
        c1 = os.times()
        print(
            f"rebuild: wall {time.perf_counter() - t0:.1f} s, cpu {c1.user + c1.system - c0.user - c0.system:.1f} s,"
            f" {json.dumps(stats)}"
        )
    files, n = sizes(lake)
    for name, size in sorted(files.items(), key=lambda kv: -kv[1]):
        print(f"{name:24s} {size / 1e6:9.2f} MB {size / n:8.1f} B/msg")
    total = sum(files.values())
    print(f"{'total':24s} {total / 1e6:9.2f} MB {total / n:8.1f} B/msg  ({n} messages)")


if __name__ == "__main__":
    main()
