"""What recall reads of its candidates, and only where it is read.

A query reaches a few hundred nodes; recall scores all of them but goes on to read ~1 in 5: MMR's pool and the
turn-level lines the query matched. `with_content` tests a candidate's title (no "be", 助手 results) only there, and
`read_details` reads their text, raw_refs, MMR tokens and evidence edges; the rest stay as scored.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING

from r2g.tokens import ZH_STOPWORDS
from recall.citations import RawRef, refs_column
from recall.diversify import TURN_LEVEL, mmr_tokens
from recall.query import EN_STOPWORDS
from recall.scoring import DETAIL_COLUMNS, NodeBatch
from recall.store import TenantReader
from recall.tenant_index import TenantIndex

if TYPE_CHECKING:  # recall.engine imports this module
    from recall.engine import RecallResult


# Words that alone make no memory: light/copula verbs, fillers and chat role labels. A result whose title holds
# nothing else ("be", "alright", "assistant") is left out (R2G no longer makes such nodes; older lakes may hold them).
NO_CONTENT_WORDS = frozenset(
    """
be do have get make go happen let seem alright ok okay yeah yes yep yup sure cool nice wow right fine great
awesome good thanks thank hi hello hey oh lol haha hmm true sorry yay assistant user system
是 有 做 帮 搞 弄 让 给 好 好的 嗯 嗯嗯 哈哈 哈 哦 啊 对 对的 行 可以 谢谢 助手 用户 系统
""".split()
)


Pair = tuple["RecallResult", list[RawRef]]


class Scored:
    """The candidates engine._score keeps, as batch rows with their score columns (bm25, graph, weight, recency,
    vector, score). A RecallResult is made (`pair`) only for a candidate with_content reads: ~1 in 5; the rest
    are ranked by their columns alone."""

    def __init__(
        self, batch: NodeBatch, rows: list[int], columns: list[list[float]], make: Callable[[int], RecallResult]
    ) -> None:
        self.batch, self.rows, self.columns, self._make = batch, rows, columns, make
        self.cards = {batch.id[i] for i in rows if batch.subtype[i] == "rollup"}
        self.pending: dict[str, Pair] = {}  # the pairs made, by id, whose details read_details fills

    def order(self, extra: Sequence[Pair]) -> list[Pair | int]:
        """The rows and the `extra` results (raw passages) by score, best first, equal scores by id."""
        score, ids = self.columns[5], self.batch.id
        keyed: list[tuple[tuple[float, str], Pair | int]] = [((-score[i], ids[i]), i) for i in self.rows]
        keyed += [((-pair[0].score, pair[0].node_id), pair) for pair in extra]
        keyed.sort(key=itemgetter(0))
        return [item for _, item in keyed]

    def matched(self, i: int) -> bool:
        """matched_line of row i, from its columns."""
        return self.columns[0][i] > 0 and self.batch.type[i] in TURN_LEVEL and self.batch.id[i] not in self.cards

    def pair(self, i: int) -> Pair:
        pair: Pair = (self._make(i), [])
        self.pending[self.batch.id[i]] = pair
        return pair


def with_content(
    ranked: Sequence[Pair | int], pool: int, cards: set[str], scored: Scored | None = None
) -> tuple[list[Pair], list[str]]:
    """The ranked candidates that have_content, as far as anything reads them: the first `pool` (all MMR looks
    at), then only the turn-level BM25 matches (the lines the citations prefer). The rest is never tested: a
    Chinese title's test segments it, ~10 ms a query over the ~400 candidates. Also the ids found empty.
    An int in `ranked` is a row of `scored`, made into its pair only when tested."""
    kept: list[Pair] = []
    dropped: list[str] = []
    for item in ranked:
        if isinstance(item, int):
            assert scored is not None
            if len(kept) >= pool and not scored.matched(item):
                continue
            pair = scored.pair(item)
        else:
            pair = item
            if len(kept) >= pool and not matched_line(pair[0], cards):
                continue
        if has_content(pair[0]):
            kept.append(pair)
        else:
            dropped.append(pair[0].node_id)
    return kept, dropped


def matched_line(r: RecallResult, cards: set[str]) -> bool:
    """A line the query's words matched: a turn-level result with BM25 (not a rollup card)."""
    return r.breakdown["bm25"] > 0 and r.type in TURN_LEVEL and r.node_id not in cards


def has_content(r: RecallResult) -> bool:
    """A result worth showing: a raw passage, or a title with a word beyond NO_CONTENT_WORDS."""
    if r.type == "RawChunk":
        return True
    title = r.title.lower()
    if _HAN_JIEBA.search(title) and any(
        not _JIEBA_NOT_WORD.search(block) and _HAN_JIEBA.search(block.translate(_STOP_HAN)) is not None
        for block in _JIEBA_BLOCK.findall(title)
    ):
        return True
    return any(w not in NO_CONTENT_WORDS and w not in EN_STOPWORDS for w in mmr_tokens(title))


# has_content without segmenting a Chinese title, where the answer is certain: jieba cuts each run of
# _JIEBA_BLOCK characters (its re_han_default) on its own into words covering the run, so a run with no
# non-word character (+#&.%-) whose Han characters are not all from the stop words holds a token that is
# neither a stop word nor a no-content word. Anything else is segmented (tests/test_recall_scoring.py).
_JIEBA_BLOCK = re.compile(r"[\u4E00-\u9FD5a-zA-Z0-9+#&\._%\-]+")
_JIEBA_NOT_WORD = re.compile(r"[+#&.%\-]")
_HAN_JIEBA = re.compile(r"[\u4E00-\u9FD5]")
_STOP_HAN = {
    ord(ch): None for w in (*NO_CONTENT_WORDS, *EN_STOPWORDS, *ZH_STOPWORDS) for ch in w if _HAN_JIEBA.match(ch)
}


def read_details(
    reader: TenantIndex | TenantReader,
    pairs: Sequence[Pair],
    scored: Scored,
    evidence: Mapping[str, list[dict]],
    turn_of: dict[str, tuple[str, str]],
    mmr_hint: dict[str, list[str]],
) -> None:
    """Fills DETAIL_COLUMNS of the candidates among `pairs` made from `scored` (not the raw passages): read from
    recall's index, or taken from the DuckDB reader's batch, which holds them."""
    pending = scored.pending
    if not isinstance(reader, TenantIndex):
        fill_details(scored.batch, pending, evidence, turn_of, scored.cards, mmr_hint)
        return
    ids = [pair[0].node_id for pair in pairs if pending.get(pair[0].node_id) is pair]  # not a raw passage
    if ids:
        table = reader.node_table(ids, DETAIL_COLUMNS)
        details = NodeDetails(
            id=table.column("id").to_pylist(),
            text=table.column("text").to_pylist(),
            conv_id=table.column("conv_id").to_pylist(),
            msg_id=table.column("msg_id").to_pylist(),
            raw_refs=refs_column(table.column("raw_refs")),
            mmr=table.column("mmr").to_pylist(),
        )
        fill_details(details, pending, evidence, turn_of, scored.cards, mmr_hint)


@dataclass
class NodeDetails:
    """DETAIL_COLUMNS of some nodes (a NodeBatch read with them has the same attributes)."""

    id: list
    text: list | None
    conv_id: list | None
    msg_id: list | None
    raw_refs: list[list[RawRef]] | None
    mmr: list | None


def fill_details(
    d: NodeDetails | NodeBatch,
    pending: Mapping[str, tuple[RecallResult, list[RawRef]]],
    evidence: Mapping[str, list[dict]],
    turn_of: dict[str, tuple[str, str]],
    cards: set[str],
    mmr_hint: dict[str, list[str]] | None,
) -> None:
    """Each pending result's text, raw_refs and evidence edges (made only now: recall.expand.Evidence);
    `turn_of` gets the (conv_id, msg_id) of the turn-level ones whose rows name it, and `mmr_hint` the MMR tokens
    the index stored (nodes holding Han)."""
    assert d.text is not None and d.conv_id is not None and d.msg_id is not None and d.raw_refs is not None
    for i, nid in enumerate(d.id):
        pair = pending.get(nid)
        if pair is None:
            continue
        r, refs = pair
        r.text = d.text[i] or ""
        r.evidence = list(evidence.get(nid, []))
        refs.extend(d.raw_refs[i])
        if mmr_hint is not None and d.mmr is not None and d.mmr[i] is not None:
            mmr_hint[nid] = d.mmr[i]
        if nid not in cards and r.type in TURN_LEVEL and d.conv_id[i] is not None and d.msg_id[i] is not None:
            turn_of[nid] = (d.conv_id[i], d.msg_id[i])
