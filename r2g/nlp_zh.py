"""The Chinese side of r2g.nlp: the shipped predicate lexicon and a jieba-backed spaCy pipeline.

`chinese()` is spaCy's blank zh with `JiebaTokenizer` (jieba.posseg words with memctl's corrections,
`zh_segment`), a rule sentencizer and an entity component (jieba POS plus r2g.time_norm's time spans).
A change to what it produces changes r2g.nlp.PIPELINE_VERSION (the lexicon's hash is part of it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, cast

from r2g.time_norm import find_times
from r2g.tokens import jieba_tokenizer

if TYPE_CHECKING:  # spaCy and jieba load with the pipeline (chinese()) or the first segmentation, not on import
    from spacy.language import Language
    from spacy.tokens import Doc
    from spacy.vocab import Vocab

# ---------------------------------------------------------------- lexicon


@dataclass(frozen=True)
class ZhLexEntry:
    norm: str  # predicate_norm, e.g. play_soccer
    kind: str  # vo | verb | state


def lexicon_text() -> str:
    """The lexicon file's text (r2g.nlp.PIPELINE_VERSION hashes it)."""
    return resources.files("r2g").joinpath("data/zh_predicates.tsv").read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def zh_lexicon() -> dict[str, ZhLexEntry]:
    """The shipped Chinese predicate lexicon: surface → (predicate_norm, kind)."""
    out: dict[str, ZhLexEntry] = {}
    for line in lexicon_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        surface, norm, kind = line.split("\t")
        out[surface] = ZhLexEntry(norm, kind)
    return out


# ---------------------------------------------------------------- pipeline

# Single-character verbs that jieba glues to their object (踢足球, 喝咖啡 come out as one noun token).
ZH_SPLIT_VERBS = frozenset("踢打玩吃喝看听唱跳骑开写读买做学弹拉下爬游钓滑跑养拍画坐去回找送")
# A conjunction/preposition jieba glues to a following name (和小李 comes out as one nr token).
_ZH_NAME_PREFIXES = frozenset("和跟与同")

_ZH_UPOS = {
    "n": "NOUN",
    "ng": "NOUN",
    "nr": "PROPN",
    "nrfg": "PROPN",
    "nrt": "PROPN",
    "ns": "PROPN",
    "nt": "PROPN",
    "nz": "PROPN",
    "vn": "NOUN",
    "an": "NOUN",
    "v": "VERB",
    "vd": "VERB",
    "vg": "VERB",
    "vi": "VERB",
    "vq": "VERB",
    "a": "ADJ",
    "ad": "ADJ",
    "ag": "ADJ",
    "b": "ADJ",
    "z": "ADJ",
    "d": "ADV",
    "dg": "ADV",
    "p": "ADP",
    "c": "CCONJ",
    "u": "PART",
    "ud": "PART",
    "ug": "PART",
    "uj": "PART",
    "ul": "PART",
    "uv": "PART",
    "uz": "PART",
    "y": "PART",
    "r": "PRON",
    "rr": "PRON",
    "rz": "PRON",
    "m": "NUM",
    "mq": "NUM",
    "q": "NOUN",
    "t": "NOUN",
    "tg": "NOUN",
    "f": "ADP",
    "s": "NOUN",
    "e": "INTJ",
    "o": "INTJ",
    "eng": "X",
    "x": "PUNCT",
    "k": "PART",
    "h": "PART",
    "i": "X",
    "j": "PROPN",
    "l": "X",
    "g": "X",
}
_ZH_ENT = {"nr": "PERSON", "nrfg": "PERSON", "nrt": "PERSON", "ns": "LOC", "nt": "ORG", "nz": "MISC", "t": "TIME"}
_ZH_SENT_END = frozenset("。！？!?；;\n")


def zh_upos(flag: str) -> str:
    """UPOS for a jieba flag (unknown flags → X, punctuation → PUNCT)."""
    if flag in _ZH_UPOS:
        return _ZH_UPOS[flag]
    return _ZH_UPOS.get(flag[:1], "X")


def _jieba_pos() -> ModuleType:
    import jieba
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


def _pos_tokenizer(pseg: ModuleType) -> Any:  # a jieba.posseg.POSTokenizer
    """jieba.posseg's tokenizer over r2g.tokens.jieba_tokenizer(): its own (over jieba's whole dictionary) when that
    is jieba's, else one over the lazy dictionary (a process that segments a few texts never loads the whole one).
    The same words and flags either way: the flags are the module's own table, which it reads on import."""
    tokenizer = jieba_tokenizer()
    return pseg.dt if tokenizer is pseg.dt.tokenizer else _lazy_pos_tokenizer(pseg, tokenizer)


@lru_cache(maxsize=1)
def _lazy_pos_tokenizer(pseg: ModuleType, tokenizer: Any) -> Any:
    pos = pseg.POSTokenizer.__new__(pseg.POSTokenizer)  # its __init__ would read dict.txt's flags a second time
    pos.tokenizer = tokenizer
    pos.word_tag_tab = pseg.dt.word_tag_tab
    return pos


def zh_segment(text: str) -> list[tuple[str, str]]:
    """jieba.posseg words of `text` with memctl's corrections: verb-object compounds split, lexicon re-tags.

    The concatenation of the returned words is exactly `text`.
    """
    pseg = _jieba_pos()
    tags = pseg.dt.word_tag_tab
    lex = zh_lexicon()
    out: list[tuple[str, str]] = []
    for pair in _pos_tokenizer(pseg).cut(text):
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
        from spacy.tokens import Doc

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
        return Doc(self.vocab, words=words, spaces=spaces, tags=flags, pos=[zh_upos(f) for f in flags], lemmas=words)

    def to_bytes(self, **kwargs: Any) -> bytes:
        return b""

    def from_bytes(self, data: bytes, **kwargs: Any) -> JiebaTokenizer:
        return self


def zh_sentencizer(doc: Doc) -> Doc:
    """Sentence starts after 。！？!?；; and newlines (a ，comma only separates clauses, not sentences)."""
    for i, tok in enumerate(doc):
        if i == 0:
            tok.is_sent_start = True
        else:
            prev = doc[i - 1].text
            tok.is_sent_start = (
                bool(prev) and (prev[-1] in _ZH_SENT_END) and not (tok.text and tok.text[0] in _ZH_SENT_END)
            )
    return doc


def zh_entities(doc: Doc) -> Doc:
    """doc.ents from jieba POS (nr→PERSON, ns→LOC, nt→ORG, nz→MISC, t→TIME) plus rule-found time expressions.

    Adjacent tokens of one label merge (昨天 晚上 → one TIME); a regex time span
    (5月7号, 3天前) wins over the POS entities it overlaps.
    """
    from spacy.tokens import Span

    spans = []
    taken = [False] * len(doc)
    for tm in find_times(doc.text, "zh", None):
        sp = doc.char_span(tm.start, tm.end, label="TIME", alignment_mode="expand")
        if sp is None or any(taken[sp.start : sp.end]):
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
    import spacy
    from spacy.language import Language

    for name, component in (("memctl_zh_sentencizer", zh_sentencizer), ("memctl_zh_entities", zh_entities)):
        if not Language.has_factory(name):
            Language.component(name, func=component)
    nlp = spacy.blank("zh")
    nlp.tokenizer = JiebaTokenizer(nlp.vocab)
    nlp.add_pipe("memctl_zh_sentencizer")
    nlp.add_pipe("memctl_zh_entities")
    return nlp
