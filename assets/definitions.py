"""The one Definitions object of memctl: assets, checks, jobs, sensors, resources."""

import dagster as dg

from assets.consolidation import consolidation, daily_consolidation
from assets.indexes import indexes
from assets.ingest import file_annotations, file_chunks, file_graph
from assets.lake import forgetting, graph_tables, messages, raw_chunks, rejects
from assets.resources import LakeResource
from assets.sensors import INGEST_JOB, LAKE_JOB, inbox_sensor, lake_sensor

FILE_ASSETS = [file_chunks, file_annotations, file_graph]
LAKE_ASSETS = [raw_chunks, messages, rejects, graph_tables, consolidation, forgetting, indexes]

ingest_file_job = dg.define_asset_job(
    INGEST_JOB,
    selection=dg.AssetSelection.assets(*FILE_ASSETS),
    description="Chunk, annotate and graph one inbox file (one dynamic partition).",
)
build_lake_job = dg.define_asset_job(
    LAKE_JOB,
    selection=dg.AssetSelection.groups("lake", "consolidation", "indexes"),
    description="Merge all file partitions into the lake-wide tables, consolidate, and rebuild the recall indexes.",
)

defs = dg.Definitions(
    assets=[*FILE_ASSETS, *LAKE_ASSETS],
    jobs=[ingest_file_job, build_lake_job],
    sensors=[inbox_sensor, lake_sensor],
    schedules=[daily_consolidation],
    resources={"lake": LakeResource()},
)
