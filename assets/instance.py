"""The Dagster instance class that data/dagster_home/dagster.yaml names: Dagster's SQLite storage, same files and
tables, with an event log and run storage that keep their SQLAlchemy engines.

Dagster's SqliteEventLogStorage builds a new SQLAlchemy engine for every connection it opens — one per event
stored, a few more for each asset event it mirrors into the index shard — and SqliteRunStorage one per query:
about 1,850 engines in a small `memctl materialize`, a fifth of its wall time. Here each shard (one SQLite file)
keeps one engine and its pooled connection, and the connections run with `synchronous=NORMAL`: in WAL mode (the
mode Dagster creates these files in) a commit still survives a killed process, only not a power cut.

Everything else is Dagster's: the schema, the locking (each storage serialises its own connections; SQLite's file
locks and busy timeout order the processes of a dask cluster, as before), the folders under $DAGSTER_HOME. A
`storage:` block in dagster.yaml (PostgreSQL, docs/scaling.md) overrides this default as it would Dagster's.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import sqlalchemy as db
from dagster import DagsterInstance
from dagster._core.instance.ref import InstanceRef
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
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

OPEN_SHARDS = 8  # run shards whose engine stays open (the index shard's always does); a UI reads many runs


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


class SqliteEventLog(SqliteEventLogStorage):
    """SqliteEventLogStorage whose shards keep their engine (the last OPEN_SHARDS run shards, and the index)."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None) -> None:
        self._engines: OrderedDict[str, Engine] = OrderedDict()
        super().__init__(base_dir, inst_data)

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        with self._db_lock:  # as Dagster's: one connection of this storage at a time
            engine = self._engines.pop(shard, None)
            if engine is None:
                engine = _engine(self.conn_string_for_shard(shard))
                if shard not in self._initialized_dbs:
                    self._initdb(engine)
                    self._initialized_dbs.add(shard)
            self._engines[shard] = engine  # most recently used last
            run_shards = [s for s in self._engines if s != "index"]
            for old in run_shards[: max(0, len(run_shards) - OPEN_SHARDS)]:
                self._engines.pop(old).dispose()
            with engine.connect() as conn, conn.begin():
                yield conn

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

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None) -> None:
        super().__init__(base_dir, inst_data)
        self._run_storage = SqliteRuns.from_local(_runs_directory(base_dir))
        self._event_log_storage = SqliteEventLog(_event_logs_directory(base_dir))

    @classmethod
    def from_config_value(  # type: ignore[override]
        cls, inst_data: ConfigurableClassData, config_value: SqliteStorageConfig
    ) -> SqliteStorage:
        return cls.from_local(inst_data=inst_data, **config_value)


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
