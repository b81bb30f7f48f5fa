"""Inbox sensor (a partition + run per new or changed file) and the lake rebuild sensor."""

import dagster as dg

from assets.ingest import inbox_files
from raw_store.lake import Lake, lake_fingerprint, lake_is_current, read_manifest, scan_inbox

INGEST_JOB = "ingest_file"
LAKE_JOB = "build_lake"


def stale_files(lake: Lake) -> dict[str, str]:
    """{partition key: sha256} of inbox files whose graph part is missing or built from other bytes."""
    return {key: f.sha256 for key, f in scan_inbox(lake.inbox).items()
            if read_manifest(lake.part_dir(key)).get("graph_sha256") != f.sha256}


@dg.sensor(job_name=INGEST_JOB, minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING)
def inbox_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    """New or changed inbox files → dynamic partitions + one run each (content hash in the run key)."""
    lake = Lake.from_env()
    files = scan_inbox(lake.inbox)
    known = set(context.instance.get_dynamic_partitions(inbox_files.name))
    stale = stale_files(lake)
    return dg.SensorResult(
        run_requests=[dg.RunRequest(partition_key=k, run_key=f"{k}@{sha}") for k, sha in sorted(stale.items())],
        dynamic_partitions_requests=[inbox_files.build_add_request(sorted(set(files) - known))] if set(files) - known else [],
    )


@dg.sensor(job_name=LAKE_JOB, minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING)
def lake_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
    """Rebuild lake-wide tables and indexes once the set of completed file partitions changes."""
    lake = Lake.from_env()
    if stale_files(lake):
        return dg.SkipReason("file partitions still pending")
    if lake_is_current(lake):
        return dg.SkipReason("lake is up to date")
    fingerprint = lake_fingerprint(lake)
    return dg.SensorResult(run_requests=[dg.RunRequest(run_key=f"lake@{fingerprint}")])
