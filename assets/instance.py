"""The Dagster instance class that data/dagster_home/dagster.yaml names: Dagster's SQLite storage, same files and
tables, with an event log and run storage that keep their SQLAlchemy engines.

Dagster's SqliteEventLogStorage builds a new SQLAlchemy engine for every connection it opens — one per event
stored, a few more for each asset event it mirrors into the index shard — and SqliteRunStorage one per query:
about 1,850 engines in a small `memctl materialize`, a fifth of its wall time. Here each shard (one SQLite file)
keeps one engine and its pooled connection, and the connections run with `synchronous=NORMAL`: in WAL mode (the
mode Dagster creates these files in) a commit still survives a killed process, only not a power cut.

Every run's events go to a new SQLite file (a shard), which Dagster creates through alembic: the tables, then a
version stamp, ~0.2 s a run. A process makes that file once, the same way, and copies its bytes for each new shard
(SqliteEventLog._place_blank_shard). A new instance folder's three SQLite files (runs, event index, schedules; with
their data migrations marked, ~0.5 s) are copied the same way from a blank folder made once per process, from the
second new folder on (a process that makes one lets Dagster make it in place).

Everything else is Dagster's: the schema, the locking (each storage serialises its own connections; SQLite's file
locks and busy timeout order the processes of a dask cluster, as before), the folders under $DAGSTER_HOME. A
`storage:` block in dagster.yaml (PostgreSQL, docs/scaling.md) overrides this default as it would Dagster's.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import sqlalchemy as db
from dagster import DagsterInstance
from dagster._core.instance.ref import InstanceRef
from dagster._core.storage.event_log.sqlite.sqlite_event_log import INDEX_SHARD_NAME, SqliteEventLogStorage
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
from dagster._core.storage.sql import create_engine
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
from dagster._core.storage.sqlite_storage import (
    DagsterSqliteStorage,
    SqliteStorageConfig,
    _event_logs_directory,
    _runs_directory,
)
from dagster._serdes import ConfigurableClassData
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import NullPool

OPEN_SHARDS = 8  # run shards whose engine stays open (the index shard's always does); a UI reads many runs
_BLANK_SHARD: list[bytes] = []  # this process's blank run shard (SqliteEventLog._blank_shard)
_BLANK_HOME: dict[str, bytes] = {}  # this process's blank instance files by path under base_dir (_blank_home)
_NEW_HOMES = 0  # new instance folders this process has made (_blank_home)
_BLANK_LOCK = threading.Lock()
_HOME_FILES = (
    os.path.join("history", "runs.db"),
    os.path.join("history", "runs", "index.db"),
    os.path.join("schedules", "schedules.db"),
)


def _normal_sync(dbapi_conn: Any, _record: Any) -> None:
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _engine(conn_string: str) -> Engine:
    """One SQLite file's engine: pooled connections (SQLAlchemy's QueuePool for a file), synchronous=NORMAL. No cap
    on connections open at once (max_overflow=-1): threads never wait for one, as with Dagster's NullPool."""
    engine = create_engine(conn_string, max_overflow=-1, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS})
    db.event.listen(engine, "connect", _normal_sync)
    return engine


def _place(path: str, blank: Callable[[], bytes]) -> bool:
    """Create the file at `path` with the bytes `blank()` gives; False when it exists, or when the file system
    makes no hard links (Dagster then creates the file itself). Written to a temp file, synced, then linked into
    place: a reader or another process never sees a part of it, and a file another process made first is kept."""
    if os.path.exists(path):
        return False
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = os.path.join(os.path.dirname(path), f".blank-{uuid.uuid4().hex}.db")
    # mode 0666 less the umask, as SQLite creates its files (mkstemp's would be 0600)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blank())
            f.flush()
            os.fsync(f.fileno())
        os.link(tmp, path)
    except OSError:  # FileExistsError: another process made it first
        return False
    finally:
        os.unlink(tmp)
    return True


class SqliteEventLog(SqliteEventLogStorage):
    """SqliteEventLogStorage whose shards keep their engine (the last OPEN_SHARDS run shards, and the index)."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None) -> None:
        self._engines: OrderedDict[str, Engine] = OrderedDict()
        self._present: set[str] = set()  # index tables and asset-key columns seen to exist
        super().__init__(base_dir, inst_data)

    # Dagster asks whether a table or column of the index shard exists before it writes most events (on a new
    # engine each time: ~5 % of a small run's CPU). Migrations only ever add them, so a yes is kept; a no is asked
    # again (another process may migrate meanwhile).
    def has_table(self, table_name: str) -> bool:
        if table_name not in self._present and super().has_table(table_name):
            self._present.add(table_name)
        return table_name in self._present

    def _has_asset_key_col_on_connection(self, conn: Connection, column_name: str) -> bool:
        key = f"asset_keys.{column_name}"
        if key not in self._present and super()._has_asset_key_col_on_connection(conn, column_name):
            self._present.add(key)
        return key in self._present

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        with self._db_lock:  # as Dagster's: one connection of this storage at a time
            engine = self._engines.pop(shard, None)
            if engine is None:
                new = shard not in self._initialized_dbs and self._place_blank_shard(shard)
                engine = _engine(self.conn_string_for_shard(shard))
                if shard not in self._initialized_dbs:
                    if not new:  # a shard already on disk: Dagster's check (and upgrade) as before
                        self._initdb(engine)
                    self._initialized_dbs.add(shard)
            self._engines[shard] = engine  # most recently used last
            run_shards = [s for s in self._engines if s != "index"]
            for old in run_shards[: max(0, len(run_shards) - OPEN_SHARDS)]:
                self._engines.pop(old).dispose()
            with engine.connect() as conn, conn.begin():
                yield conn

    def _place_blank_shard(self, shard: str) -> bool:
        """Create a run shard's file from the blank one; False when it exists (or is the index shard)."""
        return shard != INDEX_SHARD_NAME and _place(self.path_for_shard(shard), self._blank_shard)

    def _blank_shard(self) -> bytes:
        """A run shard as Dagster's own _initdb makes it (tables, WAL mode, alembic stamp), once per process."""
        with _BLANK_LOCK:
            if not _BLANK_SHARD:
                with tempfile.TemporaryDirectory() as folder:
                    path = os.path.join(folder, "blank.db")
                    engine = create_engine(f"sqlite:///{path}", poolclass=NullPool)
                    try:
                        self._initdb(engine)
                    finally:
                        engine.dispose()  # the last connection closed: the WAL is checkpointed into the file
                    with open(path, "rb") as f:
                        _BLANK_SHARD.append(f.read())
            return _BLANK_SHARD[0]

    def _dispose_engines(self) -> None:
        with self._db_lock:
            while self._engines:
                self._engines.popitem()[1].dispose()

    def wipe(self) -> None:
        self._dispose_engines()  # the run shards' files are deleted
        super().wipe()

    def dispose(self) -> None:
        super().dispose()
        self._dispose_engines()


class SqliteRuns(SqliteRunStorage):
    """SqliteRunStorage with one engine for its life instead of one per query."""

    def __init__(self, conn_string: str, inst_data: ConfigurableClassData | None = None) -> None:
        self._kept: Engine | None = None
        super().__init__(conn_string, inst_data)

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        if self._kept is None:
            self._kept = _engine(self._conn_string)
        with self._kept.connect() as conn, conn.begin():
            yield conn

    def dispose(self) -> None:
        super().dispose()
        if self._kept is not None:
            self._kept.dispose()
            self._kept = None


class SqliteStorage(DagsterSqliteStorage):
    """DagsterSqliteStorage (same folders under base_dir) with SqliteEventLog and SqliteRuns."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None, *, blank: bool = True) -> None:
        if blank and not any(os.path.exists(os.path.join(base_dir, f)) for f in _HOME_FILES):  # a new folder
            files = _blank_home()
            if files is not None:
                for name in _HOME_FILES:
                    _place(os.path.join(base_dir, name), functools.partial(files.__getitem__, name))
        super().__init__(base_dir, inst_data)
        self._run_storage = SqliteRuns.from_local(_runs_directory(base_dir))
        self._event_log_storage = SqliteEventLog(_event_logs_directory(base_dir))

    @classmethod
    def from_config_value(  # type: ignore[override]
        cls, inst_data: ConfigurableClassData, config_value: SqliteStorageConfig
    ) -> SqliteStorage:
        return cls.from_local(inst_data=inst_data, **config_value)


def _blank_home() -> dict[str, bytes] | None:
    """The SQLite files of a new instance folder as Dagster (and SqliteStorage) make them, once per process; None
    for the first new folder a process makes. Most processes make one at most (a user's first `memctl
    materialize`): Dagster makes it in place, where making a blank to copy would cost that once more."""
    global _NEW_HOMES
    with _BLANK_LOCK:
        _NEW_HOMES += 1
        if _NEW_HOMES == 1:
            return None
        if not _BLANK_HOME:
            with tempfile.TemporaryDirectory() as folder:
                # its engines disposed, each file's WAL is checkpointed into it
                SqliteStorage(folder, blank=False).dispose()
                for name in _HOME_FILES:
                    with open(os.path.join(folder, name), "rb") as f:
                        _BLANK_HOME[name] = f.read()
        return _BLANK_HOME


class MemctlInstance(DagsterInstance):
    """A DagsterInstance whose default storage (no `storage:` block) is SqliteStorage under the instance's folder."""

    @classmethod
    def config_schema(cls) -> Mapping[str, Any]:
        return {}

    @staticmethod
    def config_defaults(base_dir: str) -> Mapping[str, ConfigurableClassData | None]:
        config = f"base_dir: {json.dumps(base_dir)}\n"  # YAML (a JSON string is a YAML scalar)
        storage = ConfigurableClassData(__name__, SqliteStorage.__name__, config)
        return {**InstanceRef.config_defaults(base_dir), "storage": storage}
