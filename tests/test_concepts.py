"""r2g.concepts: the shipped topic dictionary, matching in both languages, user extensions and the version."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from r2g.concepts import E_CONCEPT_ROW, ENV_VAR, ConceptDict, build, load_concepts, match_concepts
from r2g.nlp import annotate

ROW = "{key}\t{en}\t{zh}\t{lang}\t{term}\n"


@pytest.fixture(scope="module")
def cd() -> ConceptDict:
    return load_concepts([])


def _hits(text: str, lang: str, cd: ConceptDict) -> list[tuple[str, str]]:
    (a,), _ = annotate([text], [lang])
    return [(h.key, h.term) for h in cd.match(a.tokens, a.lemma, lang)]


# ---------------------------------------------------------------- the shipped dictionary

STOPWORDS = {
    "go",
    "make",
    "good",
    "get",
    "do",
    "be",
    "have",
    "work",
    "friend",
    "time",
    "day",
    "thing",
    "people",
    "like",
    "love",
    "want",
    "see",
    "say",
    "take",
    "play",
    "run",
    "read",
    "eat",
    "new",
    "one",
    "way",
    "去",
    "做",
    "好",
    "是",
    "有",
    "的",
    "了",
    "我",
    "朋友",
    "时间",
    "今天",
    "喜欢",
    "玩",
    "吃",
    "看",
}


def test_shipped_dictionary_shape(cd: ConceptDict) -> None:
    assert 40 <= len(cd) <= 60
    for c in cd.concepts.values():
        assert c.label_en and c.label_zh, c.key
        assert c.terms.get("en") and c.terms.get("zh"), c.key  # every topic in both languages
        assert all(b in cd for b in c.broader), c.key
        assert c.key not in cd.ancestors(c.key)  # no cycles
    terms = {t for c in cd.concepts.values() for ts in c.terms.values() for t in ts}
    assert not terms & STOPWORDS
    assert {"soccer", "football", "play soccer", "support group", "足球", "踢球", "爬山", "画画", "咖啡"} <= terms
    assert len(cd.version) == 12 and cd.version == load_concepts([]).version


def test_every_shipped_term_matches_itself(cd: ConceptDict) -> None:
    """Each term, run through the real tokenizer, hits its own concept over all its tokens (no spelling drift)."""
    items = [(lg, t, c.key) for c in cd.concepts.values() for lg, ts in c.terms.items() for t in ts]
    anns, _ = annotate([t for _, t, _ in items], [lg for lg, _, _ in items])
    bad = [
        (lg, t, a.tokens)
        for (lg, t, k), a in zip(items, anns)
        if not any(
            h.key == k and (h.tok_start, h.tok_end) == (0, len(a.tokens)) for h in cd.match(a.tokens, a.lemma, lg)
        )
    ]
    assert bad == []


def test_hierarchy_and_keywords(cd: ConceptDict) -> None:
    assert cd.ancestors("soccer") == ["ball_games", "sports"]
    assert cd.ancestors("adoption") == ["parenting", "family"]
    assert cd.ancestors("travel") == []
    kw = cd.keywords("soccer")
    assert kw[:2] == ["soccer", "足球"] and {"play soccer", "踢球", "踢足球", "football"} <= set(kw)
    assert len(kw) == len(set(kw))
    assert cd["soccer"].keywords("zh")[0] == "足球" and "play soccer" not in cd["soccer"].keywords("zh")
    assert cd.keywords("mental_health", "en")[:4] == ["mental", "health", "therapy", "mental health"]


# ---------------------------------------------------------------- matching, real tokenizers

EN_CASES = [
    # text, expected (concept, term) hits in order
    ("I love playing soccer with my friends.", [("soccer", "play soccer")]),
    ("Caroline went to an LGBTQ support group yesterday.", [("lgbtq", "lgbtq"), ("mental_health", "support group")]),
    ("I joined an LGBTQ+ group.", [("lgbtq", "lgbtq+")]),
    ("Support groups help a lot.", [("mental_health", "support group")]),
    ("We went hiking and then had coffee.", [("hiking", "go hiking"), ("coffee_tea", "coffee")]),
    ("She has been painting watercolors.", [("painting", "paint"), ("painting", "watercolor")]),
    ("We adopted a dog last month.", [("pets", "adopt a dog")]),
    ("They are researching adoption agencies.", [("adoption", "adoption agency")]),
    ("Happy Valentine's Day!", [("holidays", "valentine's day")]),
    ("Self-care is important.", [("mental_health", "self-care")]),
    ("I ran a half marathon on Sunday.", [("running", "half marathon")]),
    ("My therapist says I need more sleep.", [("mental_health", "therapist"), ("sleep", "sleep")]),
    ("He plays the guitar in a jazz club.", [("music", "play the guitar"), ("music", "jazz")]),
    ("I got promoted at work!", [("work", "get promoted"), ("work", "at work")]),
    ("It's the Chinese New Year soon.", [("holidays", "chinese new year")]),
    # non-hits: everyday words never fire
    ("I'm going to make a good decision and go home.", []),
    ("It all worked out in the end, it's a journey.", []),
    ("That ain't right.", []),
    ("It was 30 degrees outside.", []),
]

ZH_CASES = [
    ("小明在公园里踢足球", [("soccer", "踢足球")]),  # 踢 + 足球, concatenated
    ("我们周末去爬山，然后喝咖啡", [("hiking", "爬山"), ("coffee_tea", "喝咖啡")]),
    ("她喜欢画画和看书", [("painting", "画画"), ("reading", "看书")]),
    ("我今天不开心，因为昨晚没睡好", [("sleep", "睡")]),
    ("我们的足球队赢了", [("soccer", "足球")]),  # 足球 inside the compound 足球队
    ("我去了音乐节", [("music", "音乐")]),
    ("我今天去gym了", [("fitness", "gym")]),  # an English word in a Chinese message
    ("我上周去了LGBTQ互助小组", [("lgbtq", "lgbtq"), ("mental_health", "互助小组")]),
    ("以后优先用中文回答", []),
    ("好的，我知道了，明天见", []),
]


@pytest.mark.parametrize("text,expected", EN_CASES)
def test_match_en(cd: ConceptDict, text: str, expected: list[tuple[str, str]]) -> None:
    assert _hits(text, "en", cd) == expected


@pytest.mark.parametrize("text,expected", ZH_CASES)
def test_match_zh(cd: ConceptDict, text: str, expected: list[tuple[str, str]]) -> None:
    assert _hits(text, "zh", cd) == expected


def test_hit_fields_and_labels(cd: ConceptDict) -> None:
    (h,) = cd.match(["I", "love", "playing", "soccer"], ["I", "love", "play", "soccer"], "en")
    assert (h.key, h.label, h.label_en, h.label_zh, h.term, h.tok_start, h.tok_end) == (
        "soccer",
        "Soccer",
        "Soccer",
        "足球",
        "play soccer",
        2,
        4,
    )
    (z,) = cd.match(["小明", "踢", "足球"], ["小明", "踢", "足球"], "zh")
    assert (z.label, z.term, z.tok_start, z.tok_end) == ("足球", "踢足球", 1, 3)


# ---------------------------------------------------------------- matching rules, hand-written tokens

TOY = "".join(
    ROW.format(key=k, en=k.title(), zh=zh, lang=lg, term=t)
    for k, zh, lg, t in [
        ("support", "支持", "en", "support"),
        ("group", "小组", "en", "support group"),
        ("lgbtq", "性少数", "en", "lgbtq support group"),
        ("soccer", "足球", "en", "play soccer"),
        ("soccer", "足球", "en", "soccer"),
        ("ball", "球类", "en", "soccer"),  # one term, two concepts
        ("soccer", "足球", "zh", "足球"),
        ("soccer", "足球", "zh", "踢足球"),
        ("soccer", "足球", "zh", "足球赛季"),
        ("coffee", "咖啡", "zh", "咖啡"),
    ]
)

TOKEN_CASES = [
    # tokens, lemmas (None → same as tokens), lang, expected (key, term, start, end)
    (
        "we played soccer".split(),
        "we play soccer".split(),
        "en",
        [("soccer", "play soccer", 1, 3)],
    ),  # lemma match, multiword
    ("PLAY SOCCER".split(), None, "en", [("soccer", "play soccer", 0, 2)]),  # case-insensitive
    ("a soccer game".split(), None, "en", [("soccer", "soccer", 1, 2), ("ball", "soccer", 1, 2)]),
    ("an lgbtq support group".split(), None, "en", [("lgbtq", "lgbtq support group", 1, 4)]),  # longest wins
    (
        "support group support".split(),
        None,
        "en",
        [("group", "support group", 0, 2), ("support", "support", 2, 3)],
    ),  # no overlap, then continue
    ("support the group".split(), None, "en", [("support", "support", 0, 1)]),  # multiword must be contiguous
    ("groups".split(), "group".split(), "en", []),
    (["踢", "足球"], None, "zh", [("soccer", "踢足球", 0, 2)]),  # concatenation equals a term
    (["踢足球"], None, "zh", [("soccer", "踢足球", 0, 1)]),
    (["足球", "赛季"], None, "zh", [("soccer", "足球赛季", 0, 2)]),  # longest concatenation wins
    (["足球", "赛"], None, "zh", [("soccer", "足球", 0, 1)]),  # 足球赛 is only a prefix
    (["喝", "咖啡", "馆"], None, "zh", [("coffee", "咖啡", 1, 2)]),
    (["咖啡馆"], None, "zh", [("coffee", "咖啡", 0, 1)]),  # inside a compound token
    (["足", "球"], None, "zh", [("soccer", "足球", 0, 2)]),
    (["咖"], None, "zh", []),
    ([], None, "zh", []),
    ([], None, "en", []),
]


@pytest.mark.parametrize("tokens,lemmas,lang,expected", TOKEN_CASES)
def test_match_rules(tokens: list[str], lemmas: list[str] | None, lang: str, expected: list[tuple]) -> None:
    toy = build([("toy", TOY)])
    hits = toy.match(tokens, lemmas or tokens, lang)
    assert [(h.key, h.term, h.tok_start, h.tok_end) for h in hits] == expected


def test_match_is_fast(cd: ConceptDict) -> None:
    """Runs on every message: 20k messages well under two seconds (about 0.15 s on a laptop)."""
    en = (
        "Caroline went to an LGBTQ support group yesterday and then played soccer with her kids .".split(),
        "Caroline go to an LGBTQ support group yesterday and then play soccer with her kid .".split(),
    )
    zh = ["周末", "我们", "去", "爬山", "，", "然后", "喝", "咖啡", "，", "小明", "在", "公园", "里", "踢", "足球"]
    t0 = time.process_time()  # CPU time: the bound holds on a loaded machine or beside another test worker
    for _ in range(10_000):
        cd.match(en[0], en[1], "en")
        cd.match(zh, zh, "zh")
    assert time.process_time() - t0 < 2.0


# ---------------------------------------------------------------- extension files and the version


def test_user_extension_file(tmp_path: Path, cd: ConceptDict) -> None:
    ext = tmp_path / "mine.tsv"
    ext.write_text(
        "# my topics\n"
        + ROW.format(key="soccer", en="", zh="", lang="en", term="futsal")  # add to a shipped concept
        + ROW.format(key="knitting_club", en="Knitting club", zh="编织社", lang="en", term="knit club")
        + ROW.format(key="knitting_club", en="", zh="", lang="zh", term="编织社")
        + ROW.format(key="coffee_tea", en="", zh="", lang="en", term="-tea"),  # remove a shipped term
        "utf-8",
    )
    mine = load_concepts([ext])
    assert len(mine) == len(cd) + 1 and mine.version != cd.version
    toks = "we play futsal at the knit club with tea".split()
    assert [(h.key, h.term) for h in mine.match(toks, toks, "en")] == [
        ("soccer", "futsal"),
        ("knitting_club", "knit club"),
    ]
    assert [h.key for h in cd.match(toks, toks, "en")] == ["coffee_tea"]
    assert mine["knitting_club"].label("zh") == "编织社" and mine["soccer"].label_en == "Soccer"  # empty labels inherit
    assert "tea" not in mine["coffee_tea"].terms["en"] and "茶" in mine["coffee_tea"].terms["zh"]


def test_version_changes_when_the_file_changes(tmp_path: Path) -> None:
    ext = tmp_path / "mine.tsv"
    ext.write_text(ROW.format(key="chess", en="Chess", zh="国际象棋", lang="en", term="checkmate"), "utf-8")
    v1 = load_concepts([ext])
    assert load_concepts([ext]) is v1  # cached while the file is unchanged
    ext.write_text(
        ROW.format(key="chess", en="Chess", zh="国际象棋", lang="en", term="checkmate")
        + ROW.format(key="chess", en="", zh="", lang="zh", term="将死"),
        "utf-8",
    )
    v2 = load_concepts([ext])
    assert v2.version != v1.version and v2["chess"].terms["zh"] == ("将死",)


def test_env_var_extends_match_concepts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = tmp_path / "a.tsv", tmp_path / "b.tsv"
    a.write_text(ROW.format(key="chess", en="Chess", zh="国际象棋", lang="en", term="checkmate"), "utf-8")
    b.write_text(ROW.format(key="chess", en="", zh="", lang="zh", term="将死"), "utf-8")
    monkeypatch.setenv(ENV_VAR, f"{a}{os.pathsep}{b}")
    assert [h.key for h in match_concepts(["checkmate"], ["checkmate"], "en")] == ["chess"]
    assert [h.label for h in match_concepts(["将死"], ["将死"], "zh")] == ["国际象棋"]
    monkeypatch.delenv(ENV_VAR)
    assert match_concepts(["checkmate"], ["checkmate"], "en") == []


@pytest.mark.parametrize(
    "row",
    [
        "soccer\tSoccer\t足球\ten\n",  # too few columns
        "Soccer\tSoccer\t足球\ten\tfutsal\n",  # key not snake_case
        "soccer\tSoccer\t足球\tfr\tfutsal\n",  # unknown language
        "soccer\tSoccer\t足球\ten\t \n",
    ],
)  # empty term
def test_malformed_row_is_a_coded_error(tmp_path: Path, row: str) -> None:
    ext = tmp_path / "bad.tsv"
    ext.write_text("# ok\n" + row, "utf-8")
    with pytest.raises(ValueError, match=rf"^{E_CONCEPT_ROW} .*bad.tsv:2"):
        load_concepts([ext])
