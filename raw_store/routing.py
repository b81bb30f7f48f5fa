"""Which tenant an inbox file belongs to, and the name it is filed under: the inbox layout.

Below both the lake (`raw_store.lake`, which re-exports these names) and the readers
(`raw_store.readers`), which get bytes, a tenant and a source_file and never route a file
themselves. Nothing here imports another raw_store module.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePath, PurePosixPath
from typing import Any

DEFAULT_TENANT = "default"


def default_tenant() -> str:
    """The tenant of files directly in the inbox (not in an inbox/<tenant>/ folder): $MEMCTL_TENANT, else "default"."""
    return os.environ.get("MEMCTL_TENANT", "").strip() or DEFAULT_TENANT


def is_remote(path: Any) -> bool:
    """True for a location on object storage (a UPath of a non-local file system)."""
    return not isinstance(path, PurePath)


def as_path(path: Any) -> Any:
    """`path` as a path object: remote locations stay UPaths, anything else becomes a `Path`."""
    return path if is_remote(path) else Path(path)


def tenant_for(path: Path, inbox: Path) -> str:
    """The first folder under the inbox (inbox/<tenant>/...), else the configured default tenant
    ($MEMCTL_TENANT, else "default"). A canonical JSONL record may still name its own tenant."""
    rel = _relative(path, inbox)
    parts = rel.parts if rel is not None else ()
    return parts[0] if len(parts) >= 2 else default_tenant()


def source_file_for(path: Path, inbox: Path) -> str:
    """The file's posix path relative to the inbox (its bare name when outside the inbox)."""
    rel = _relative(path, inbox)
    return rel.as_posix() if rel is not None else as_path(path).name


def _relative(path: Path, inbox: Path) -> PurePosixPath | None:
    if is_remote(path) or is_remote(inbox):
        try:
            return PurePosixPath(path.relative_to(inbox).as_posix())
        except (ValueError, TypeError, AttributeError):
            return None
    for p, base in ((Path(path), Path(inbox)), (Path(path).resolve(), Path(inbox).resolve())):
        try:
            return PurePosixPath(p.relative_to(base).as_posix())
        except ValueError:
            continue
    return None
