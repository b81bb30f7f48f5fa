"""`memctl materialize`: push the inbox through the Dagster assets, only what changed.

Each stale inbox file (new, or its bytes changed) runs the per-file assets in its own
dynamic partition; a file whose bytes are unchanged but whose parts were built by an
older NLP pipeline or older R2G rules re-runs only from that stage (a rule change
rebuilds the graph from the stored annotations, without NLP); then, if any partition changed (or the lake was never built), one
run rebuilds the lake-wide tables and the indexes. Runs are recorded in the Dagster
instance at $DAGSTER_HOME (default $MEMCTL_DATA/dagster_home), so the UI shows them.

Where the runs execute is configuration ($MEMCTL_EXECUTOR), not code:
- `auto` (default): two or more file runs go to a dask LocalCluster of one worker process per core
  ($MEMCTL_WORKERS, default the machine's cores), so every core annotates its own file; a single file
  run, and the lake-wide run, execute in this process (no cluster to start for a one-file append).
- `in_process`: one run after the other in this process.
- `dask`: on a dask.distributed cluster — a LocalCluster of $MEMCTL_WORKERS worker
  processes (default 2) on loopback, or the scheduler at $MEMCTL_DASK_SCHEDULER. Every
  file's run is one dask task, all submitted at once, so files run in parallel on
  different workers; the lake-wide run follows as one run on the dagster-dask executor
  (each of its steps a dask task). docs/scaling.md describes a multi-machine setup.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from raw_store.lake import (
    Lake,
    index_is_current,
    lake_fingerprint,
    lake_is_current,
    outdated_stages,
    read_lake_state,
    scan_inbox,
    stale_partitions,
)

if TYPE_CHECKING:  # Dagster and dask load only when a materialization runs
    from dagster import DagsterInstance, ExecuteInProcessResult, JobDefinition, JobExecutionResult
    from dagster._core.instance.ref import InstanceRef
    from distributed import Client, Worker, WorkerPlugin

QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
_TEMPLATE = Path(__file__).resolve().parent.parent / "data" / "dagster_home" / "dagster.yaml"
EXECUTORS = ("auto", "in_process", "dask")
IN_PROCESS = "in-process"  # FileOutcome.worker of a run executed by this process
WORKER_TAG = "memctl/worker"  # Dagster run tag of a file run on dask: "<worker address> pid=<pid>"


@dataclass(frozen=True)
class ExecutorConfig:
    """Where `materialize` runs: $MEMCTL_EXECUTOR, $MEMCTL_WORKERS, $MEMCTL_DASK_SCHEDULER."""

    kind: str = "auto"
    workers: int = field(default_factory=lambda: os.cpu_count() or 1)  # LocalCluster workers (not with a scheduler)
    scheduler: str = ""  # tcp://host:port of a running dask scheduler; empty: start a LocalCluster

    @classmethod
    def from_env(cls) -> ExecutorConfig:
        kind = os.environ.get("MEMCTL_EXECUTOR", "").strip().lower().replace("-", "_") or "auto"
        if kind not in EXECUTORS:
            raise ValueError(f"MEMCTL_EXECUTOR={kind!r}: expected one of {', '.join(EXECUTORS)}")
        raw = os.environ.get("MEMCTL_WORKERS", "").strip() or str(os.cpu_count() or 1)
        if not raw.isdigit() or int(raw) < 1:
            raise ValueError(f"MEMCTL_WORKERS={raw!r}: expected a whole number ≥ 1")
        return cls(kind=kind, workers=int(raw), scheduler=os.environ.get("MEMCTL_DASK_SCHEDULER", "").strip())


@dataclass(frozen=True)
class FileRun:
    """One partition's run: all per-file assets, or only `stages` (re-derivation after a code change)."""

    key: str
    tags: dict[str, str]
    stages: tuple[str, ...] | None = None
    size: int = 0  # bytes of the inbox file (how much work the run is, for the `auto` executor)


@dataclass(frozen=True)
class FileOutcome:
    key: str
    ok: bool
    message: str  # the failure's last line; "" on success
    worker: str  # dask worker address and pid, or IN_PROCESS
    started: float  # wall clock (time.time()) on the executing machine
    finished: float


@dataclass
class MaterializeSummary:
    files: int = 0
    ran: list[str] = field(default_factory=list)
    rederived: list[str] = field(default_factory=list)  # rebuilt because the NLP/R2G code changed
    failed: dict[str, str] = field(default_factory=dict)
    lake_rebuilt: bool = False
    lake_failed: str | None = None
    executor: str = "auto"
    placements: dict[str, FileOutcome] = field(default_factory=dict)  # partition → where and when it ran

    @property
    def ok(self) -> bool:
        return not self.failed and self.lake_failed is None


def prepare_dagster_home(lake: Lake) -> Path:
    """Point DAGSTER_HOME at the lake's instance folder (unless set) and give it a dagster.yaml."""
    home = Path(os.environ.get("DAGSTER_HOME") or lake.dagster_home).resolve()
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists():
        if _TEMPLATE.exists():
            shutil.copyfile(_TEMPLATE, home / "dagster.yaml")
        else:
            (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", "utf-8")
    os.environ["DAGSTER_HOME"] = str(home)
    return home


def materialize(
    lake: Lake, progress: bool = True, executor: ExecutorConfig | None = None, full: bool = False
) -> MaterializeSummary:
    """Run the per-file assets for every stale inbox file, then the lake-wide assets if anything changed.

    `executor`: where the runs execute (default: ExecutorConfig.from_env()); the tables are the same bytes either way.
    `full` (or $MEMCTL_FULL=1): run the lake-wide assets even when nothing changed, recomputing every step from the
    partitions instead of reusing the last build's results where their inputs are unchanged, and compacting the
    indexes — the same tables an incremental build gives (tests/test_incremental.py), from scratch.
    """
    import dagster as dg
    from tqdm import tqdm

    from assets.ingest import INBOX_FILES
    from jobs.forget import forget_version, load_requests
    from r2g.nlp import PIPELINE_VERSION
    from r2g.pipeline import graph_version
    from recall.index import ensure_index

    executor = executor or ExecutorConfig.from_env()
    full = full or os.environ.get("MEMCTL_FULL", "").strip().lower() in ("1", "true", "yes")
    prepare_dagster_home(lake)
    files = scan_inbox(lake.inbox)  # hashes every file once; the rest works from this
    summary = MaterializeSummary(files=len(files), executor=executor.kind)
    with dg.DagsterInstance.get() as instance:
        new = sorted(set(files) - set(instance.get_dynamic_partitions(INBOX_FILES)))
        if new:
            instance.add_dynamic_partitions(INBOX_FILES, new)
        stale = stale_partitions(lake, files, forget_version(load_requests(lake)))
        # bytes unchanged but NLP or R2G code changed: re-run only the stages that code touches
        outdated = outdated_stages(
            lake, {k: f for k, f in files.items() if k not in stale}, PIPELINE_VERSION, graph_version()
        )
        runs = [FileRun(k, {"memctl/source_sha256": stale[k]}, size=files[k].size) for k in sorted(stale)]
        runs += [
            FileRun(
                k,
                {"memctl/rederive": outdated[k]},
                ("file_annotations", "file_graph") if outdated[k] == "annotations" else ("file_graph",),
                size=files[k].size,
            )
            for k in sorted(outdated)
        ]
        if not runs and not full:
            state = read_lake_state(lake)
            if state is not None and state == lake_fingerprint(lake):  # the tables are current
                if index_is_current(lake, state):
                    return summary  # nothing to do: no cluster started
                if lake.remote:
                    ensure_index(lake)  # another machine built the tables: only this machine's index cache
                    return summary
        with _engine(executor, lake, instance) as engine:
            for outcome in tqdm(
                engine.files(runs), total=len(runs), desc="files", unit="file", disable=not progress or not runs
            ):
                summary.placements[outcome.key] = outcome
                if not outcome.ok:
                    summary.failed[outcome.key] = outcome.message
            summary.ran = [r.key for r in runs if r.stages is None and r.key not in summary.failed]
            summary.rederived = [r.key for r in runs if r.stages is not None and r.key not in summary.failed]
            if summary.ran or summary.rederived or full or not lake_is_current(lake):
                summary.lake_failed = engine.lake(full)
                summary.lake_rebuilt = summary.lake_failed is None
    return summary


# ------------------------------------------------------------------ in-process


@contextmanager
def sigterm_kept() -> Iterator[None]:
    """SIGTERM as it was before a Dagster run in this thread. Dagster's in-process execution, restoring SIGINT's
    handler at the end of a run, sets SIGTERM to that handler too: where SIGINT is ignored (`memctl materialize &`
    in a script, a pytest-xdist worker) SIGTERM ends up ignored, in this process and in every process it starts
    next. Dagster's compute-log `tail` processes then outlive each later run by its 30 s wait for them, and
    dask's worker processes inherit it."""
    before = signal.getsignal(signal.SIGTERM) if threading.current_thread() is threading.main_thread() else None
    try:
        yield
    finally:
        if before is not None:
            signal.signal(signal.SIGTERM, before)


def run_file(instance: DagsterInstance, lake_root: str, run: FileRun, nlp_workers: int = 0) -> FileOutcome:
    """Materialize one partition's per-file assets with Dagster's in-process executor (here or in a dask worker);
    `nlp_workers`: the file's annotate processes (0: $MEMCTL_NLP_WORKERS, else 1, as a dask worker has)."""
    import dagster as dg

    from assets.definitions import FILE_ASSETS
    from assets.resources import LakeResource

    started = time.time()
    with sigterm_kept():
        result = dg.materialize(
            FILE_ASSETS,
            selection=list(run.stages) if run.stages else None,
            partition_key=run.key,
            instance=instance,
            resources={"lake": LakeResource(data_root=lake_root, nlp_workers=nlp_workers)},
            run_config=QUIET,
            raise_on_error=False,
            tags=run.tags,
        )
    return FileOutcome(
        run.key, result.success, "" if result.success else _failure_message(result), IN_PROCESS, started, time.time()
    )


class _InProcess:
    """Every run in this process, one after the other."""

    def __init__(self, lake: Lake, instance: DagsterInstance) -> None:
        self.lake_root, self.instance = str(lake.root), instance

    def files(self, runs: list[FileRun]) -> Iterator[FileOutcome]:
        from r2g.nlp import file_run_workers

        # one file at a time here, so a file's NLP may take every core (a pool of annotate processes: assets.ingest)
        workers = file_run_workers()
        for run in runs:
            yield run_file(self.instance, self.lake_root, run, nlp_workers=workers)

    def lake(self, full: bool = False) -> str | None:
        import dagster as dg

        from assets.definitions import FILE_ASSETS, LAKE_ASSETS
        from assets.resources import LakeResource

        with sigterm_kept():
            result = dg.materialize(
                [*FILE_ASSETS, *LAKE_ASSETS],
                selection=dg.AssetSelection.groups("lake", "consolidation", "indexes"),
                instance=self.instance,
                resources={"lake": LakeResource(data_root=self.lake_root, full=full)},
                run_config=QUIET,
                raise_on_error=False,
            )
        return None if result.success else _failure_message(result)


# ------------------------------------------------------------------ dask


@cache
def dask_job(name: str) -> JobDefinition:
    """Job `name` of memctl's one Definitions with dagster-dask as executor (the reconstructor every worker calls)."""
    import dagster as dg
    from dagster_dask import dask_executor

    from assets.definitions import defs

    return dg.Definitions.merge(defs, dg.Definitions(executor=dask_executor)).resolve_job_def(name)


def _worker_environ(lake: Lake) -> dict[str, str]:
    """The MEMCTL_* settings a worker must share with this process, so it builds the same bytes."""
    env = {k: v for k, v in os.environ.items() if k.startswith("MEMCTL_")}
    # one process per worker: annotate in the worker itself (a daemonic worker may not fork a pool anyway)
    return {**env, "MEMCTL_DATA": str(lake.root), "MEMCTL_NLP_WORKERS": "1"}


def _environ_plugin(env: dict[str, str]) -> WorkerPlugin:
    from distributed import WorkerPlugin

    class MemctlEnviron(WorkerPlugin):
        """Sets this materialization's MEMCTL_* environment in every worker (and drops stale ones)."""

        name = "memctl-environ"

        def setup(self, worker: Worker) -> None:
            for k in [k for k in os.environ if k.startswith("MEMCTL_") and k not in env]:
                del os.environ[k]
            os.environ.update(env)

    return MemctlEnviron()


def _file_task(instance_ref: InstanceRef, lake_root: str, run: FileRun) -> FileOutcome:
    """A dask task: one partition's run, executed in the worker, recorded in the shared Dagster instance."""
    import dagster as dg
    from distributed import get_worker

    worker = f"{get_worker().address} pid={os.getpid()}"
    with dg.DagsterInstance.from_ref(instance_ref) as instance:  # the run's tags say where it ran (UI, audits)
        outcome = run_file(instance, lake_root, replace(run, tags={**run.tags, WORKER_TAG: worker}))
    return replace(outcome, worker=worker)


class _OnDask:
    """File runs as concurrent dask tasks; the lake run on the dagster-dask executor, steps as dask tasks."""

    def __init__(self, client: Client, address: str, lake: Lake, instance: DagsterInstance) -> None:
        self.client, self.address, self.lake_root, self.instance = client, address, str(lake.root), instance

    def files(self, runs: list[FileRun]) -> Iterator[FileOutcome]:
        from distributed import as_completed

        ref = self.instance.get_ref()
        # a unique key per run: dask treats equal keys as one computation, even across clients
        futures = {
            self.client.submit(
                _file_task, ref, self.lake_root, run, key=f"memctl-file-{uuid.uuid4().hex}", pure=False, retries=0
            ): run
            for run in runs
        }
        for future in as_completed(futures):
            run = futures[future]
            try:
                yield future.result()
            except Exception as e:  # the worker died or the task could not run: that file failed, the rest go on
                yield FileOutcome(run.key, False, f"dask task failed: {type(e).__name__}: {e}", "", 0.0, 0.0)

    def lake(self, full: bool = False) -> str | None:
        import dagster as dg

        from assets.sensors import LAKE_JOB

        run_config = {
            **QUIET,
            "execution": {"config": {"cluster": {"existing": {"address": self.address}}}},
            "resources": {"lake": {"config": {"data_root": self.lake_root, "full": full}}},
        }
        job = dg.build_reconstructable_job("assets.run", "dask_job", reconstructable_args=(LAKE_JOB,))
        result = dg.execute_job(job, self.instance, run_config=run_config)
        return None if result.success else _failure_message(result)


# Below this much stale input the `auto` executor stays in-process: starting a cluster and loading the NLP models in
# every worker (~5 s of wall time, 10 s of CPU) costs more than a second core saves (~5,000 messages of NLP).
AUTO_PARALLEL_BYTES = 1 << 20
# One file holding this share of the stale input or more runs here, its NLP on every core, and the others after it
LONE_FILE_SHARE = 0.7


def fans_out(sizes: Sequence[int], workers: int, annotated: Sequence[bool] | None = None) -> bool:
    """Whether the `auto` executor runs files of these byte sizes on a LocalCluster of `workers` processes: two or
    more of each, AUTO_PARALLEL_BYTES of input, and no file to annotate (`annotated`, default all) holding
    LONE_FILE_SHARE of it. Such a file takes most of the build either way; on a cluster its NLP has one worker's one
    core (the other idles once the small files are done), in this process it has every core
    (r2g.nlp.file_run_workers). Per message on the project machine: NLP 3.5 ms on one core, 1.9 ms on two, the
    graph step 1.6 ms on one; so a cluster takes max(5.1 n_big, 2.55 n) ms for n messages, this process 3.5 n ms,
    and this process is faster once the big file holds 0.69 of them. A file whose graph step alone is redone (a
    rule change) gains nothing here, so it is no reason to stay."""
    total = sum(sizes)
    if min(workers, len(sizes)) < 2 or total < AUTO_PARALLEL_BYTES:
        return False
    flags = [True] * len(sizes) if annotated is None else annotated
    return max((n for n, a in zip(sizes, flags) if a), default=0) < LONE_FILE_SHARE * total


class _Auto:
    """File runs on a LocalCluster of `workers` processes where fans_out says so; otherwise, and for the lake-wide
    run, in this process (the lake run's steps are sequential: a cluster would only ship tables between
    processes)."""

    def __init__(self, config: ExecutorConfig, lake: Lake, instance: DagsterInstance) -> None:
        self.config, self.local, self.lake_ = config, _InProcess(lake, instance), lake

    def files(self, runs: list[FileRun]) -> Iterator[FileOutcome]:
        workers = min(self.config.workers, len(runs))
        annotated = [r.stages is None or "file_annotations" in r.stages for r in runs]
        if not fans_out([r.size for r in runs], workers, annotated):
            yield from self.local.files(runs)
            return
        with _engine(replace(self.config, kind="dask", workers=workers), self.lake_, self.local.instance) as dask:
            yield from dask.files(runs)

    def lake(self, full: bool = False) -> str | None:
        return self.local.lake(full)


@contextmanager
def _engine(config: ExecutorConfig, lake: Lake, instance: DagsterInstance) -> Iterator[_InProcess | _OnDask | _Auto]:
    """The runner for `config`; with dask, a client on the configured scheduler or on a LocalCluster it owns."""
    if config.kind == "in_process":
        yield _InProcess(lake, instance)
        return
    if config.kind == "auto":
        yield _Auto(config, lake, instance)
        return
    import dask
    from distributed import Client, LocalCluster

    cluster = None
    address = config.scheduler
    if not address:
        # processes, one thread each (Dagster steps are not thread-safe), loopback only; no dashboard, and the
        # scheduler's health/metrics endpoint on a free port (its default 8787 may be taken). The workers'
        # statistical profiler samples every 10 ms: it cost ~20 % of the CPU of an NLP-bound file run.
        with dask.config.set({"distributed.worker.profile.enabled": False}):
            cluster = LocalCluster(
                n_workers=config.workers,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=None,
                scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                silence_logs=logging.ERROR,
            )
        address = cluster.scheduler_address
    try:
        with Client(address) as client:
            client.register_plugin(_environ_plugin(_worker_environ(lake)))
            yield _OnDask(client, address, lake, instance)
    finally:
        if cluster is not None:
            cluster.close()


def _failure_message(result: ExecuteInProcessResult | JobExecutionResult) -> str:
    for event in result.all_events:
        if event.is_failure and event.event_specific_data is not None:
            err = getattr(event.event_specific_data, "error", None)
            if err is not None:
                return err.message.strip().splitlines()[-1] if err.message else str(err)
    return "run failed"
