"""The lake resource: where $MEMCTL_DATA lives, resolved at run time."""

import os
from datetime import datetime

import dagster as dg

from raw_store.lake import Lake


class LakeResource(dg.ConfigurableResource):
    """Root of the memctl data directory (inbox, raw store, lake, caches); empty = $MEMCTL_DATA or ./data."""

    data_root: str = ""
    as_of: str = ""  # consolidation date (ISO); empty: $MEMCTL_AS_OF, else the newest message time
    full: bool = False  # recompute every lake-wide step from the partitions (no reuse), as $MEMCTL_FULL=1 does
    nlp_workers: int = 0  # annotate processes for a file (r2g.nlp.annotate); 0: $MEMCTL_NLP_WORKERS, else 1

    @property
    def full_rebuild(self) -> bool:
        """Recompute everything lake-wide: this config, or $MEMCTL_FULL=1 (`memctl materialize --full`)."""
        return self.full or os.environ.get("MEMCTL_FULL", "").strip().lower() in ("1", "true", "yes")

    def as_of_datetime(self) -> datetime | None:
        return datetime.fromisoformat(self.as_of) if self.as_of.strip() else None

    def get(self) -> Lake:
        return Lake.at(self.data_root) if self.data_root else Lake.from_env()
