"""Concept topic dictionary: everyday chat topics (soccer, hiking, 足球, 爬山, …) matched on a message's tokens.

SPEC §5: a Concept node is built at once when a message hits the topic dictionary
(R2G-2), and ABOUT edges attach facts/episodes to it (R2G-7).

The dictionary is `r2g/data/concepts.tsv` (format in its header: one row per term,
``concept_key  label_en  label_zh  lang  term  [broader]``), extended by user TSV files
in the same format:

- ``load_concepts(["my_topics.tsv"])`` — the shipped file plus these, in order;
- ``MEMCTL_CONCEPTS=/a/topics.tsv:/b/more.tsv`` (``os.pathsep``-separated) — read by
  ``load_concepts()`` / ``match_concepts`` when no paths are given.

An extension row adds a term to a concept (a shipped one or a new one; non-empty
labels override earlier ones), ``-term`` removes a term, and a ``broader`` column adds
broader concepts. `ConceptDict.version` is a sha256 prefix of every source's bytes,
so a changed dictionary is detectable (put it next to a rule's provenance).

Matching (`ConceptDict.match`) is one left-to-right pass, leftmost-longest, with no
overlapping term spans; hot loops should hold one ConceptDict:

- English: a term is a sequence of lower-case words; word k must equal token k's
  lower-cased lemma or surface form ("playing soccer" hits ``play soccer``,
  "support groups" hits ``support group``). Terms are indexed by first word.
- Chinese: a term hits a jieba token, or consecutive tokens whose concatenation is
  the term (踢 足球 hits 踢足球); failing both, a term of two or more characters
  inside one compound token (足球场 hits 足球). Terms are indexed by their prefixes,
  so a walk stops as soon as the concatenation is no term's prefix. A Latin-script
  token of a Chinese message is looked up among the one-word English terms (去gym了).

A term shared by several concepts yields one hit per concept on the same span.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

ENV_VAR = "MEMCTL_CONCEPTS"
E_CONCEPT_ROW = "E_CONCEPT_ROW"  # a dictionary row that is not `key, label_en, label_zh, lang, term[, broader]`
LANGS = ("en", "zh")
_KEY = re.compile(r"[a-z0-9_]+")
# the word split of an English term, close to spaCy's: "self-care" → self - care, "valentine's day" → valentine 's day
_EN_WORDS = re.compile(r"'s\b|n't\b|\w+\+*|[^\w\s]")


@dataclass(frozen=True)
class Concept:
    """One topic: its key, titles, terms per language (file order) and broader concept keys."""

    key: str
    label_en: str
    label_zh: str
    terms: dict[str, tuple[str, ...]] = field(default_factory=dict)
    broader: tuple[str, ...] = ()

    def label(self, lang: str) -> str:
        """The title in the message's language (zh → label_zh, else label_en), falling back to the other."""
        return (self.label_zh or self.label_en) if lang == "zh" else (self.label_en or self.label_zh)

    def keywords(self, lang: str | None = None) -> list[str]:
        """A Concept node's keywords: its label words then its terms (one language, or both), lower-case, deduplicated."""
        out: list[str] = []
        labels = [self.label_en, self.label_zh] if lang is None else [self.label(lang)]
        for lab in labels:
            out.extend(w for w in re.split(r"[\s&/,]+", lab.lower()) if w)
        for lg in LANGS if lang is None else ("zh" if lang == "zh" else "en",):
            out.extend(self.terms.get(lg, ()))
        return list(dict.fromkeys(out))


@dataclass(frozen=True)
class ConceptHit:
    """A dictionary term found in a message: concept, its title in the message language, term and token span [start, end)."""

    key: str
    label: str
    label_en: str
    label_zh: str
    term: str
    tok_start: int
    tok_end: int


class ConceptDict:
    """The compiled dictionary: concepts by key, plus the match indexes built once."""

    def __init__(self, concepts: dict[str, Concept], version: str) -> None:
        self.concepts = concepts
        self.version = version
        # English: first word → [(words, term, concept keys)], longest first
        en: dict[str, list[tuple[tuple[str, ...], str, tuple[str, ...]]]] = {}
        # Chinese: term → concept keys; every proper prefix of a term, for the token walk
        zh: dict[str, tuple[str, ...]] = {}
        for lang, term, keys in self._term_keys():
            if lang == "en":
                words = tuple(_EN_WORDS.findall(term))
                en.setdefault(words[0], []).append((words, term, keys))
            else:
                zh[term] = keys
        for cands in en.values():
            cands.sort(key=lambda c: -len(c[0]))
        self._en = en
        self._zh = zh
        self._zh_prefixes = frozenset(t[:i] for t in zh for i in range(1, len(t)))
        self._zh_max = max((len(t) for t in zh), default=0)

    def _term_keys(self) -> Iterable[tuple[str, str, tuple[str, ...]]]:
        by_term: dict[tuple[str, str], list[str]] = {}
        for c in self.concepts.values():
            for lang, terms in c.terms.items():
                for t in terms:
                    by_term.setdefault((lang, t), []).append(c.key)
        return ((lang, t, tuple(keys)) for (lang, t), keys in by_term.items())

    # ------------------------------------------------------------ lookup

    def __len__(self) -> int:
        return len(self.concepts)

    def __contains__(self, key: object) -> bool:
        return key in self.concepts

    def __getitem__(self, key: str) -> Concept:
        return self.concepts[key]

    @property
    def n_terms(self) -> int:
        """Number of (concept, language, term) entries."""
        return sum(len(ts) for c in self.concepts.values() for ts in c.terms.values())

    def keywords(self, key: str, lang: str | None = None) -> list[str]:
        """`Concept.keywords` of concept `key`."""
        return self.concepts[key].keywords(lang)

    def ancestors(self, key: str) -> list[str]:
        """The broader concepts of `key`, nearest first, transitively (soccer → ball_games, sports); unknown keys skipped."""
        out: list[str] = []
        todo = list(self.concepts[key].broader) if key in self.concepts else []
        while todo:
            k = todo.pop(0)
            if k in self.concepts and k not in out and k != key:
                out.append(k)
                todo.extend(self.concepts[k].broader)
        return out

    # ------------------------------------------------------------ matching

    def match(self, tokens: Sequence[str], lemmas: Sequence[str], lang: str) -> list[ConceptHit]:
        """Concept hits of one message's tokens (lemmas aligned with tokens; for zh only tokens are used), in token order."""
        spans = self._match_zh(tokens) if lang == "zh" else self._match_en(tokens, lemmas)
        out = []
        for s, e, term, keys in spans:
            for k in keys:
                c = self.concepts[k]
                out.append(ConceptHit(k, c.label(lang), c.label_en, c.label_zh, term, s, e))
        return out

    def _match_en(self, tokens: Sequence[str], lemmas: Sequence[str]) -> list[tuple[int, int, str, tuple[str, ...]]]:
        toks = [t.lower() for t in tokens]
        lems = [lm.lower() for lm in lemmas] if len(lemmas) == len(tokens) else toks
        n, i, out = len(toks), 0, []
        index = self._en
        while i < n:
            best: tuple[tuple[str, ...], str, tuple[str, ...]] | None = None
            for first in (lems[i],) if lems[i] == toks[i] else (lems[i], toks[i]):
                for cand in index.get(first, ()):
                    words = cand[0]
                    k = len(words)
                    if best is not None and k <= len(best[0]):
                        break  # candidates are longest first
                    if i + k <= n and all(w == lems[i + j] or w == toks[i + j] for j, w in enumerate(words)):
                        best = cand
                        break
            if best is None:
                i += 1
                continue
            k = len(best[0])
            out.append((i, i + k, best[1], best[2]))
            i += k
        return out

    def _match_zh(self, tokens: Sequence[str]) -> list[tuple[int, int, str, tuple[str, ...]]]:
        toks = [t.lower() for t in tokens]
        n, i, out = len(toks), 0, []
        terms, prefixes = self._zh, self._zh_prefixes
        while i < n:
            s, j, best = toks[i], i, None
            while True:  # extend over following tokens while the concatenation can still become a term
                if s in terms:
                    best = (j + 1, s)
                if s not in prefixes or j + 1 >= n:
                    break
                j += 1
                s += toks[j]
            if best is not None:
                out.append((i, best[0], best[1], terms[best[1]]))
                i = best[0]
                continue
            tok = toks[i]
            if tok.isascii():  # an English word in a Chinese message: 我今天去gym了
                one = [c for c in self._en.get(tok, ()) if len(c[0]) == 1]
                if one:
                    out.append((i, i + 1, one[0][1], one[0][2]))
            else:
                inner = self._inside(tok)
                if inner is not None:
                    out.append((i, i + 1, inner, terms[inner]))
            i += 1
        return out

    def _inside(self, tok: str) -> str | None:
        """The longest (then leftmost) term of 2+ characters inside a compound token, e.g. 足球 in 足球场."""
        n = len(tok)
        for size in range(min(n - 1, self._zh_max), 1, -1):
            for a in range(n - size + 1):
                if tok[a : a + size] in self._zh:
                    return tok[a : a + size]
        return None


# ---------------------------------------------------------------- loading


def _shipped_text() -> str:
    return resources.files("r2g").joinpath("data/concepts.tsv").read_text(encoding="utf-8")


def parse_rows(text: str, source: str = "<text>") -> Iterable[tuple[str, str, str, str, str, tuple[str, ...]]]:
    """(key, label_en, label_zh, lang, term, broader) per data row; '#' lines and blank lines skipped.

    Raises ValueError starting with E_CONCEPT_ROW and naming source:line for a malformed row.
    """
    for no, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        cols = [c.strip() for c in line.split("\t")]
        if len(cols) not in (5, 6):
            raise ValueError(f"{E_CONCEPT_ROW} {source}:{no}: expected 5 or 6 tab-separated columns, got {len(cols)}")
        key, label_en, label_zh, lang, term = cols[:5]
        broader = tuple(b.strip() for b in cols[5].split(",") if b.strip()) if len(cols) == 6 else ()
        if not _KEY.fullmatch(key) or lang not in LANGS or not term.lstrip("-").strip():
            raise ValueError(f"{E_CONCEPT_ROW} {source}:{no}: bad key {key!r}, lang {lang!r} or term {term!r}")
        yield key, label_en, label_zh, lang, " ".join(term.lower().split()), broader


def build(sources: Sequence[tuple[str, str]]) -> ConceptDict:
    """A ConceptDict from (source name, TSV text) pairs applied in order; version = sha256 of all texts."""
    labels: dict[str, list[str]] = {}
    terms: dict[str, dict[str, dict[str, None]]] = {}
    broader: dict[str, dict[str, None]] = {}
    h = hashlib.sha256()
    for name, text in sources:
        h.update(text.encode("utf-8"))
        h.update(b"\0")
        for key, label_en, label_zh, lang, term, up in parse_rows(text, name):
            lab = labels.setdefault(key, ["", ""])
            lab[0], lab[1] = label_en or lab[0], label_zh or lab[1]
            bucket = terms.setdefault(key, {}).setdefault(lang, {})
            if term.startswith("-"):
                bucket.pop(term[1:].strip(), None)
            else:
                bucket[term] = None
            broader.setdefault(key, {}).update(dict.fromkeys(up))
    concepts = {
        k: Concept(
            k,
            lab[0] or k,
            lab[1] or lab[0] or k,
            {lg: tuple(ts) for lg, ts in terms[k].items() if ts},
            tuple(broader[k]),
        )
        for k, lab in labels.items()
    }
    return ConceptDict(concepts, h.hexdigest()[:12])


def _env_paths() -> list[str]:
    return [p for p in os.environ.get(ENV_VAR, "").split(os.pathsep) if p.strip()]


def load_concepts(extra: Sequence[str | os.PathLike[str]] | None = None) -> ConceptDict:
    """The shipped dictionary plus `extra` TSV files (None → the MEMCTL_CONCEPTS paths), built once per file state.

    Cached by (path, mtime, size) of each extra file, so an edited file is re-read on
    the next call. Raises FileNotFoundError for a missing extra file, ValueError
    (E_CONCEPT_ROW) for a malformed row.
    """
    paths = _env_paths() if extra is None else [os.fspath(p) for p in extra]
    stamps = []
    for p in paths:
        st = Path(p).stat()
        stamps.append((str(Path(p).resolve()), st.st_mtime_ns, st.st_size))
    return _load(tuple(stamps))


@lru_cache(maxsize=8)
def _load(stamps: tuple[tuple[str, int, int], ...]) -> ConceptDict:
    sources = [("r2g/data/concepts.tsv", _shipped_text())]
    sources += [(p, Path(p).read_text(encoding="utf-8")) for p, _, _ in stamps]
    return build(sources)


def match_concepts(
    tokens: list[str], lemmas: list[str], lang: str, concepts: ConceptDict | None = None
) -> list[ConceptHit]:
    """Concept hits of one message (see `ConceptDict.match`); `concepts` defaults to `load_concepts()`."""
    return (concepts if concepts is not None else load_concepts()).match(tokens, lemmas, lang)
