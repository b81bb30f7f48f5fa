"""The lake resource: where $MEMCTL_DATA lives, resolved at run time."""

from datetime import datetime

import dagster as dg

from raw_store.lake import Lake


class LakeResource(dg.ConfigurableResource):
    """Root of the memctl data directory (inbox, raw store, lake, caches); empty = $MEMCTL_DATA or ./data."""

    data_root: str = ""
    as_of: str = ""   # consolidation date (ISO); empty: $MEMCTL_AS_OF, else the newest message time

    def as_of_datetime(self) -> datetime | None:
        return datetime.fromisoformat(self.as_of) if self.as_of.strip() else None

    def get(self) -> Lake:
        return Lake.at(self.data_root) if self.data_root else Lake.from_env()
