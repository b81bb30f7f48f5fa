"""The NLP cache: an sqlite table of annotations keyed by (r2g.nlp.PIPELINE_VERSION, text sha256), so a re-run never
re-annotates an unchanged message. It is one `AnnotationCache` r2g.nlp.annotate reads and fills."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path

from r2g.nlp import PIPELINE_VERSION, Annotation

_CREATE_ANNOTATIONS = (
    "CREATE TABLE IF NOT EXISTS annotations ("
    " version TEXT NOT NULL, sha TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (version, sha))"
)


class NlpCache:
    """sqlite annotation cache keyed by (PIPELINE_VERSION, text sha256); WAL + busy_timeout so two processes can share it."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        con = self._connect()
        try:
            con.execute("PRAGMA journal_mode=WAL")
            if _annotations_sql(con) is None or _is_without_rowid(con):
                _create_or_upgrade(con)
        finally:
            con.close()

    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.path, timeout=60.0)
        con.execute("PRAGMA busy_timeout=60000")
        return con

    def get_many(self, shas: Sequence[str]) -> dict[str, Annotation]:
        """Cached annotations for the given text shas under the current PIPELINE_VERSION (missing ones are absent)."""
        out: dict[str, Annotation] = {}
        uniq = list(dict.fromkeys(shas))
        if not uniq:
            return out
        con = self._connect()
        try:
            for k in range(0, len(uniq), 500):  # stay under sqlite's bound-parameter limit
                part = uniq[k : k + 500]
                q = f"SELECT sha, body FROM annotations WHERE version = ? AND sha IN ({','.join('?' * len(part))})"
                for sha, body in con.execute(q, [PIPELINE_VERSION, *part]):
                    out[sha] = Annotation.from_json(body)
        finally:
            con.close()
        return out

    def put_many(self, items: Mapping[str, Annotation]) -> None:
        """Store annotations by text sha under the current PIPELINE_VERSION (idempotent)."""
        if not items:
            return
        # in key order: neighbouring inserts touch neighbouring index pages
        rows = [(PIPELINE_VERSION, sha, items[sha].to_json()) for sha in sorted(items)]
        con = self._connect()
        try:
            with con:
                con.executemany("INSERT OR REPLACE INTO annotations (version, sha, body) VALUES (?, ?, ?)", rows)
        finally:
            con.close()


def _annotations_sql(con: sqlite3.Connection) -> str | None:
    row = con.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'annotations'").fetchone()
    return row[0] if row else None


def _is_without_rowid(con: sqlite3.Connection) -> bool:
    return "WITHOUT ROWID" in (_annotations_sql(con) or "").upper()


def _create_or_upgrade(con: sqlite3.Connection) -> None:
    """Create the annotations table, or move a WITHOUT ROWID one (caches made before 2026-11) to a rowid table.

    ~1 KB JSON bodies are what SQLite advises against storing WITHOUT ROWID: filling
    that table took 2.3x longer (115 vs 49 µs per annotation, JSON included). Only rows of the current
    PIPELINE_VERSION are carried over; older ones can never be read again. One
    IMMEDIATE transaction, so two processes opening the cache at once upgrade it once.
    """
    con.isolation_level = None
    con.execute("BEGIN IMMEDIATE")
    try:
        if _is_without_rowid(con):
            con.execute("ALTER TABLE annotations RENAME TO annotations_without_rowid")
            con.execute(_CREATE_ANNOTATIONS)
            con.execute(
                "INSERT INTO annotations (version, sha, body) SELECT version, sha, body"
                " FROM annotations_without_rowid WHERE version = ?",
                (PIPELINE_VERSION,),
            )
            con.execute("DROP TABLE annotations_without_rowid")
        else:
            con.execute(_CREATE_ANNOTATIONS)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
