"""Inbox sensor (a partition + run per new or changed file) and the lake rebuild sensor."""

import dagster as dg

from assets.ingest import INBOX_FILES, inbox_files
from jobs.forget import forget_version, load_requests
from raw_store.lake import Lake, lake_fingerprint, lake_is_current, scan_inbox, stale_partitions

INGEST_JOB = "ingest_file"
LAKE_JOB = "build_lake"


@dg.sensor(job_name=INGEST_JOB, minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING)
def inbox_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    """New or changed inbox files → dynamic partitions + one run each (content hash in the run key)."""
    lake = Lake.from_env()
    files = scan_inbox(lake.inbox)
    new = sorted(set(files) - set(context.instance.get_dynamic_partitions(INBOX_FILES)))
    version = forget_version(load_requests(lake))
    stale = stale_partitions(lake, files, version)
    # a new forget request re-runs every file once: its version is part of the run key
    suffix = f"@{version}" if version else ""
    return dg.SensorResult(
        run_requests=[dg.RunRequest(partition_key=k, run_key=f"{k}@{sha}{suffix}") for k, sha in sorted(stale.items())],
        dynamic_partitions_requests=[inbox_files.build_add_request(new)] if new else [],
    )


@dg.sensor(job_name=LAKE_JOB, minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING)
def lake_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
    """Rebuild lake-wide tables and indexes once the set of completed file partitions (or a setting) changes.

    Recall hits logged since the last build are no reason: a rebuild per `memctl recall` would be a full lake
    run for a weight change; they are folded in by the next `memctl materialize` or the daily consolidation."""
    lake = Lake.from_env()
    if stale_partitions(lake, scan_inbox(lake.inbox), forget_version(load_requests(lake))):
        return dg.SkipReason("file partitions still pending")
    if lake_is_current(lake, hits=False):
        return dg.SkipReason("lake is up to date")
    fingerprint = lake_fingerprint(lake)
    return dg.SensorResult(run_requests=[dg.RunRequest(run_key=f"lake@{fingerprint}")])
