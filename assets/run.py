"""`memctl materialize`: push the inbox through the Dagster assets, only what changed.

Each stale inbox file (new, or its bytes changed) runs the per-file assets in its own
dynamic partition; a file whose bytes are unchanged but whose parts were built by an
older NLP pipeline or older R2G rules re-runs only from that stage (a rule change
rebuilds the graph from the stored annotations, without NLP); then, if any partition changed (or the lake was never built), one
run rebuilds the lake-wide tables and the indexes. Runs are recorded in the Dagster
instance at $DAGSTER_HOME (default $MEMCTL_DATA/dagster_home), so the UI shows them.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from raw_store.lake import Lake, lake_is_current, outdated_stages, scan_inbox, stale_partitions

QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
_TEMPLATE = Path(__file__).resolve().parent.parent / "data" / "dagster_home" / "dagster.yaml"


@dataclass
class MaterializeSummary:
    files: int = 0
    ran: list[str] = field(default_factory=list)
    rederived: list[str] = field(default_factory=list)   # rebuilt because the NLP/R2G code changed
    failed: dict[str, str] = field(default_factory=dict)
    lake_rebuilt: bool = False
    lake_failed: str | None = None

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


def materialize(lake: Lake, progress: bool = True) -> MaterializeSummary:
    """Run the per-file assets for every stale inbox file, then the lake-wide assets if anything changed."""
    import dagster as dg
    from tqdm import tqdm

    from assets.definitions import FILE_ASSETS, LAKE_ASSETS
    from assets.ingest import inbox_files
    from assets.resources import LakeResource
    from jobs.forget import forget_version, load_requests
    from r2g.nlp import PIPELINE_VERSION
    from r2g.pipeline import graph_version

    prepare_dagster_home(lake)
    files = scan_inbox(lake.inbox)  # hashes every file once; the rest works from this
    summary = MaterializeSummary(files=len(files))
    resources = {"lake": LakeResource(data_root=str(lake.root))}
    with dg.DagsterInstance.get() as instance:
        new = sorted(set(files) - set(instance.get_dynamic_partitions(inbox_files.name)))
        if new:
            instance.add_dynamic_partitions(inbox_files.name, new)
        stale = stale_partitions(lake, files, forget_version(load_requests(lake)))
        for key in tqdm(sorted(stale), desc="files", unit="file", disable=not progress or not stale):
            result = dg.materialize(FILE_ASSETS, partition_key=key, instance=instance, resources=resources,
                                    run_config=QUIET, raise_on_error=False,
                                    tags={"memctl/source_sha256": stale[key]})
            if result.success:
                summary.ran.append(key)
            else:
                summary.failed[key] = _failure_message(result)
        # bytes unchanged but NLP or R2G code changed: re-run only the stages that code touches
        outdated = outdated_stages(lake, {k: f for k, f in files.items() if k not in stale},
                                   PIPELINE_VERSION, graph_version())
        for key in tqdm(sorted(outdated), desc="re-derive", unit="file", disable=not progress or not outdated):
            stages = ["file_annotations", "file_graph"] if outdated[key] == "annotations" else ["file_graph"]
            result = dg.materialize(FILE_ASSETS, selection=stages, partition_key=key, instance=instance,
                                    resources=resources, run_config=QUIET, raise_on_error=False,
                                    tags={"memctl/rederive": outdated[key]})
            if result.success:
                summary.rederived.append(key)
            else:
                summary.failed[key] = _failure_message(result)
        if summary.ran or summary.rederived or not lake_is_current(lake):
            result = dg.materialize([*FILE_ASSETS, *LAKE_ASSETS],
                                    selection=dg.AssetSelection.groups("lake", "consolidation", "indexes"),
                                    instance=instance, resources=resources, run_config=QUIET, raise_on_error=False)
            if result.success:
                summary.lake_rebuilt = True
            else:
                summary.lake_failed = _failure_message(result)
    return summary


def _failure_message(result) -> str:
    for event in result.all_events:
        if event.is_failure and event.event_specific_data is not None:
            err = getattr(event.event_specific_data, "error", None)
            if err is not None:
                return err.message.strip().splitlines()[-1] if err.message else str(err)
    return "run failed"
