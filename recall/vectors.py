"""Stage B of recall (seed 004 §5.2): vector search over a tenant's nodes — optional, off by default.

Vectors come from an *embedder*, a callable `texts -> float32 matrix` (one L2-normalised row per
text). The seed expects them from an existing external model; none can be downloaded here, so memctl
ships one that needs no model file and plugs any other in by name:

- `hashing` — character 2–4-grams within word boundaries, feature-hashed into 1,024 signed dimensions
  (scikit-learn's `HashingVectorizer`, L2-normalised). Lexical, not semantic: it matches what BM25's
  tokens miss — inflections and typos ("footbal"), compounds, unsegmented Chinese (踢足球 in
  小明在公园里踢足球 whatever jieba made of it) — and costs no training.
- `module:callable` — any importable embedder (e.g. a wrapper around a sentence-transformers model on
  the machine).

$MEMCTL_VECTORS names the embedder when the indexes are built ("" builds none). Each tenant gets
`<index dir>/vectors/<slug>.npz`: its active nodes' ids and vectors, and the embedder's name. Recall
uses them when `RecallConfig.vectors_enabled` and the file was built by the embedder it would embed
the query with; otherwise stage B is skipped and says why in the trace (the degradation matrix of
seed 004 §18: recall answers from A → C). Search is exact (one matrix product, then a partial sort):
~4 ms at 16k nodes × 1,024 dims, linear in the tenant's nodes, so for tenants of 100k nodes and more
an ANN index (HNSW, seed 004 §3.4) is the next step.
"""

from __future__ import annotations

import importlib
import os
import tempfile
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from raw_store.lake import Lake, fsync_dir
from recall.store import FileCache

SPEC_ENV = "MEMCTL_VECTORS"
HASHING = "hashing"
HASHING_DIMS = 1024
STATIC = "static"
DEFAULT_SPEC = STATIC
OFF = ("", "off", "none")
# the node types that get a vector (the rest are reached through BM25 and the graph); see bench/README.md
VECTOR_TYPES: frozenset[str] | None = frozenset({"Episode"})

Embedder = Callable[[Sequence[str]], np.ndarray]


def embedder_spec() -> str:
    """The embedder recall embeds a query with: $MEMCTL_VECTORS, "static" when unset ("" or "off": none)."""
    spec = os.environ.get(SPEC_ENV)
    if spec is None:
        return DEFAULT_SPEC
    spec = spec.strip()
    return "" if spec.lower() in OFF else spec


def build_spec() -> str:
    """The embedder the index build embeds with: $MEMCTL_VECTORS, none when unset. Stage B is off by default
    (it does not pay on LoCoMo), so a build embeds only when asked: embedding every Episode again on each build
    would cost a 100k-message lake ~25 CPU-s per build, a daily append included, for vectors nobody reads."""
    return embedder_spec() if os.environ.get(SPEC_ENV) is not None else ""


def unavailable(spec: str) -> str | None:
    """Why embedder `spec` cannot run here (the static tables missing or refused), None when it can."""
    if spec != STATIC:
        return None
    from recall.static_vectors import table_state

    state = table_state()
    return None if state == "ok" else state


def embed(spec: str, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(L2-normalised float32 rows, vector space per row) of `texts` by embedder `spec`. Only the static
    embedder has several spaces (recall.static_vectors: one per language table); any other has one, 0."""
    if spec == STATIC:
        from recall.static_vectors import load_static

        m, spaces = load_static().embed(texts)
        return _normalised(m), spaces
    m = _normalised(load_embedder(spec)(list(texts))) if len(texts) else np.zeros((0, 0), np.float32)
    return m, np.zeros(len(texts), dtype=np.int8)


@lru_cache(maxsize=8)
def load_embedder(spec: str) -> Embedder:
    """The embedder named `spec`: "hashing", or "module:callable". ValueError for anything else."""
    if spec == HASHING:
        return hashing_embedder
    if spec == STATIC:
        from recall.static_vectors import static_embedder

        return static_embedder
    module, sep, name = spec.partition(":")
    if not sep or not module or not name:
        raise ValueError(f"{SPEC_ENV}={spec!r}: expected 'hashing' or 'module:callable'")
    fn = getattr(importlib.import_module(module), name, None)
    if not callable(fn):
        raise ValueError(f"{SPEC_ENV}={spec!r}: {module}.{name} is not callable")
    return fn


@lru_cache(maxsize=1)
def _hashing_vectorizer() -> Any:  # sklearn's HashingVectorizer (no types)
    try:
        from sklearn.feature_extraction.text import HashingVectorizer
    except ImportError as exc:  # an optional extra: only this switch needs it
        raise ImportError("the 'hashing' embedder needs scikit-learn: pip install -e '.[vectors]'") from exc
    return HashingVectorizer(
        analyzer="char_wb",
        ngram_range=(2, 4),
        n_features=HASHING_DIMS,
        alternate_sign=True,
        norm="l2",
        lowercase=True,
        dtype=np.float32,
    )


def hashing_embedder(texts: Sequence[str]) -> np.ndarray:
    """Character 2–4-gram feature hashing, L2-normalised float32 rows (deterministic: no fitting)."""
    return _hashing_vectorizer().transform(list(texts)).toarray().astype(np.float32, copy=False)


def vector_path(lake: Lake, slug: str) -> Path:
    return lake.index_dir / "vectors" / f"{slug}.npz"


def node_text(title: str | None, text: str | None, keywords: Sequence[str] | None) -> str:
    """What a node's vector is made of: its title, text and keywords as written (no FTS segmentation)."""
    return " ".join(p for p in (title or "", text or "", " ".join(keywords or ())) if p)


def write_vectors(lake: Lake, slug: str, ids: Sequence[str], texts: Sequence[str], spec: str) -> int:
    """Embed a tenant's node texts and write its vector file (temp + fsync + rename). Returns rows."""
    folder = lake.index_dir / "vectors"
    folder.mkdir(parents=True, exist_ok=True)
    matrix, spaces = embed(spec, texts)
    if matrix.shape[0] != len(ids):
        raise ValueError(f"embedder {spec!r} returned {matrix.shape[0]} vectors for {len(ids)} texts")
    fd, tmp = tempfile.mkstemp(prefix=f".{slug}.", suffix=".npz.tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, ids=np.asarray(ids, dtype=str), vectors=matrix, spaces=spaces, spec=np.asarray(spec))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, vector_path(lake, slug))
    finally:
        Path(tmp).unlink(missing_ok=True)
    fsync_dir(folder)
    return len(ids)


def remove_vectors(lake: Lake, keep: set[str]) -> None:
    """Drop vector files of tenants not in `keep` (slugs): gone tenants, or vectors switched off."""
    folder = lake.index_dir / "vectors"
    for p in folder.glob("*.npz") if folder.is_dir() else ():
        if p.stem not in keep:
            p.unlink(missing_ok=True)


class VectorIndex:
    """One tenant's node vectors, in memory, split by vector space (a query meets only its own space's rows)."""

    def __init__(self, ids: np.ndarray, vectors: np.ndarray, spec: str, spaces: np.ndarray | None = None) -> None:
        self.ids, self.vectors, self.spec = ids, vectors, spec
        spaces = np.zeros(len(ids), np.int8) if spaces is None else spaces
        self._by_space = {
            int(sp): (ids[rows], np.ascontiguousarray(vectors[rows]))
            for sp in np.unique(spaces)
            for rows in [np.flatnonzero(spaces == sp)]
        }

    def search(self, query: np.ndarray, limit: int, space: int = 0) -> list[tuple[str, float]]:
        """(node id, cosine) of the `limit` nearest nodes of `space` with a positive cosine, best first (ties
        by id)."""
        ids, vectors = self._by_space.get(space, (self.ids[:0], self.vectors[:0]))
        if not len(ids) or limit <= 0:
            return []
        sims = vectors @ query
        n = min(limit, len(sims))
        top = np.argpartition(-sims, n - 1)[:n]
        hits = sorted(((str(ids[i]), float(sims[i])) for i in top), key=lambda t: (-t[1], t[0]))
        return [(i, s) for i, s in hits if s > 0]


_LOADED = FileCache()


def _read_vectors(path: Path) -> VectorIndex:
    with np.load(path, allow_pickle=False) as z:
        return VectorIndex(z["ids"], z["vectors"], str(z["spec"]), z["spaces"] if "spaces" in z.files else None)


def load_vectors(lake: Lake, slug: str) -> VectorIndex | None:
    """The tenant's vector index (cached until the file is replaced), None when there is none."""
    return _LOADED.get(vector_path(lake, slug), _read_vectors)


def search(lake: Lake, slug: str, query: str, limit: int, spec: str) -> tuple[list[tuple[str, float]], str]:
    """Stage B: (hits, state). State "ok", or why there are no hits: "no embedder" ($MEMCTL_VECTORS off),
    "missing" (no vector file), "embedder mismatch" (built by another embedder), or the static tables' state
    ("TableMissing: …", "TableError: …")."""
    if not spec:
        return [], "no embedder"
    index = load_vectors(lake, slug)
    if index is None:
        why = unavailable(spec)
        return [], f"missing ({why})" if why else "missing"
    if index.spec != spec:
        return [], f"embedder mismatch: index {index.spec!r}, query {spec!r}"
    why = unavailable(spec)
    if why:
        return [], why
    q, spaces = embed(spec, [query])
    if q.shape[1] != index.vectors.shape[1]:
        return [], "embedder mismatch: dimensions"
    return index.search(q[0], limit, int(spaces[0])), "ok"


def rescaled(hits: list[tuple[str, float]]) -> dict[str, float]:
    """Hits' cosines min-max scaled to (0, 1] over the hits (the best 1, the worst kept 1/len): what separates
    hits of an anisotropic embedder, whose unrelated texts are still at cosine ~0.5, is their order."""
    if not hits:
        return {}
    lo, hi = hits[-1][1], hits[0][1]
    floor = 1 / len(hits)
    return {i: floor + (1 - floor) * ((s - lo) / (hi - lo) if hi > lo else 1.0) for i, s in hits}


def _normalised(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return m / np.where(norms == 0, 1, norms)
