"""Query analysis (seed 004 §5.1): keywords, entity names, time constraints and intent of a question.

No LLM: stop-words and jieba give the keywords; R2G's own time rules resolve "last
week", "in May 2023", 上周, 去年五月 against the tenant's newest memory (so a question
about "last week" means the last week of the conversation, whatever today is); a few
interrogative patterns per language give the intent.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from r2g.time_norm import find_times
from r2g.time_values import TimeValue
from r2g.tokens import has_han
from recall.query_tokens import search_tokens  # r2g's tokens, without loading jieba's whole dictionary

# English function words: they only dilute a query (DuckDB's FTS drops them from documents too).
EN_STOPWORDS = frozenset(
    """
a about above after again against all am an and any are as at be because been before being below between
both but by can could did do does doing down during each few for from further had has have having he her
here hers herself him himself his how i if in into is it its itself just me more most my myself no nor not
now of off on once only or other our ours ourselves out over own same she should so some such than that the
their theirs them themselves then there these they this those through to too under until up very was we
were what when where which while who whom why will with would you your yours yourself yourselves also ever
s t d ll m re ve y don didn doesn isn wasn weren haven hasn hadn won wouldn shouldn couldn
""".split()
)

# Query tokens that are better found verbatim in raw text than in extracted nodes (seed 004 W5).
_CODE_TOKEN = re.compile(
    r"0x[0-9a-fA-F]+|\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
    r"|https?://\S+|[A-Za-z]:\\\S*|(?:^|\s)/\w[\w./-]*|\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b|\b\w+\.(?:sys|dll|exe|py|js|log)\b"
    r"|\b\d{5,}\b"
)

# Intent by interrogative, first match wins (a "when" question about a preference is still "when").
_INTENTS = (
    (
        "when",
        re.compile(
            r"\bwhen\b|\bwhat (?:time|day|date|year|month)\b|\bhow long ago\b|什么时候|何时|哪天|哪一天|几号|"
            r"几点|哪年|哪个月",
            re.I,
        ),
    ),
    ("who", re.compile(r"\bwho(?:m|se)?\b|谁", re.I)),
    ("where", re.compile(r"\bwhere\b|\bwhich (?:city|country|place)\b|哪里|哪儿|在哪", re.I)),
    ("why", re.compile(r"\bwhy\b|\bwhat (?:made|caused)\b|\bhow come\b|为什么|为何|怎么会|原因", re.I)),
    (
        "preference",
        re.compile(
            r"\b(?:like|likes|love|loves|enjoy|enjoys|prefer|prefers|favou?rite|hate|hates)\b|"
            r"喜欢|爱好|偏好|最爱|讨厌|不喜欢",
            re.I,
        ),
    ),
)

# A capitalised word that is not sentence-initial, or any run of capitalised words: a name candidate.
_NAME = re.compile(r"\b[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*")
_POSSESSIVE = re.compile(r"['’]s$")


@dataclass(frozen=True)
class QueryAnalysis:
    keywords: tuple[str, ...]
    code_like: bool
    intent: str | None  # when | who | where | why | preference
    times: tuple[TimeValue, ...]  # time constraints the question states, resolved
    names: tuple[str, ...]  # name candidates, to match against Entity titles and aliases

    def to_json(self) -> dict:
        return {
            "keywords": list(self.keywords),
            "code_like": self.code_like,
            "intent": self.intent,
            "times": [
                {"text": t.text, "start": t.start.isoformat(), "end": t.end.isoformat(), "granularity": t.granularity}
                for t in self.times
            ],
            "names": list(self.names),
        }


def query_keywords(query: str) -> list[str]:
    """Search keywords of a query: search tokens minus English/Chinese stop-words, first occurrence order."""
    out: list[str] = []
    for tok in search_tokens(query):
        if tok not in EN_STOPWORDS and tok not in out:
            out.append(tok)
    return out


def has_code_token(query: str) -> bool:
    return _CODE_TOKEN.search(query) is not None


def analyze(query: str, anchor: datetime | None = None, keywords: Sequence[str] | None = None) -> QueryAnalysis:
    """The analysis of `query`; relative times resolve against `anchor` (None: absolute dates only).
    `keywords`: query_keywords(query) when the caller has them already."""
    lang = "zh" if has_han(query) else "en"
    times = tuple(
        m.value for m in find_times(query, lang, anchor) if m.value is not None and m.value.granularity != "recurring"
    )
    intent = next((name for name, pat in _INTENTS if pat.search(query)), None)
    names: list[str] = []
    for m in _NAME.finditer(query):
        words = m.group().split()
        if m.start() == 0 or query[: m.start()].rstrip().endswith(("?", "!", ".")):
            words = words[1:]  # a sentence's first word is capitalised anyway
        name = " ".join(_POSSESSIVE.sub("", w) for w in words)
        if name and name.lower() not in EN_STOPWORDS and name not in names:
            names.append(name)
    kw = query_keywords(query) if keywords is None else keywords
    return QueryAnalysis(tuple(kw), has_code_token(query), intent, times, tuple(names))
