#!/usr/bin/env python3
"""Recall latency: recall() warm p50/p95/p99, cold start and peak RSS on synthetic tenant graphs of 10k–1M edges.

For each size `nodes:edges` it generates one deterministic tenant (seeded) and builds it
through the real code paths:

  chat      conversations of 50–300 turns (~6 % Chinese) between the tenant's user and
            1–2 others; each turn is 1–3 clauses "<who> <verb> <object> at <place> <when>,
            <filler>" whose filler words follow a Zipf law over a vocabulary that grows
            with the corpus. Written as canonical JSONL and ingested with
            raw_store.ingest.ingest_bytes (real chunker + CAS), so citations read real,
            sha-verified blobs.
  graph     Episode per turn; Entities (PERSON / LOC / OBJECT / TIME) picked by Zipf
            popularity, so a few are hubs; Facts on a share of the clauses with AGENT /
            PATIENT / LOCATION / TIME edges and DERIVED_FROM their Episode; Concepts on
            vocabulary words with ABOUT edges from the turns that use them; MENTIONS
            (speaker and named entities); TEMPORAL_NEXT chains; Episode DERIVED_FROM its
            RawChunk. Edges beyond what the text supports (the issue's 10 edges a node is
            denser than R2G's ~4) are implicit MENTIONS / ABOUT from random turns to
            Zipf-popular entities and concepts, so the edges table holds exactly `edges`
            rows. raw_refs point at the exact bytes (turn, clause, name) in the chunks.
  index     nodes / edges / messages / raw_chunks written with the shared schemas at the
            Lake paths, then the real recall.index.build_indexes, in a fresh process
            (time and peak RSS).
  serve     a fresh process: the first recall() minus its warm time is the cold start
            (DuckDB open + FTS extension + attach, graph unpickle, jieba dictionary, first
            queries; the page cache stays warm); then
            every query once, warm, with recall(q, tenant, k=10, expand_depth=1): p50 /
            p95 / p99 and the p50 / p95 of each traced stage. Peak RSS of that process.
            A second fresh process times the index loads one by one.

Queries (deterministic, `--queries`, default 200): frequent and rare single words,
2–4 words of one turn, entity names (hubs and tail), questions, Chinese, and words the
corpus does not hold. `--profile N` adds a profiled second build and query pass (after the
measured ones) and prints where the time goes. The last line is always, for the largest size:
`p95_ms=… p50_ms=… cold_start_s=… nodes=… edges=…`.

Usage: python bench/recall_latency.py [--sizes 10k:100k 30k:300k 100k:1M] [--queries 200] [--seed 7]
                                      [--keep DIR] [--profile N]
"""
from __future__ import annotations

import argparse
import bisect
import cProfile
import hashlib
import io
import json
import math
import os
import pstats
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import cpu_busy_seconds  # noqa: E402

from r2g.ids import edge_ids, stable_id  # noqa: E402
from r2g.schema import EDGES, NODES  # noqa: E402
from r2g.tokens import search_tokens  # noqa: E402
from raw_store.cas import RawStore  # noqa: E402
from raw_store.ingest import ingest_bytes  # noqa: E402
from raw_store.lake import Lake  # noqa: E402
from raw_store.tables import write_import  # noqa: E402
from raw_store.schema import MESSAGES, RAW_CHUNKS, RAW_REFS  # noqa: E402
from recall import RecallConfig, recall  # noqa: E402
from recall.index import build_indexes  # noqa: E402
from recall.store import load_graph, open_index, tenant_reader  # noqa: E402

TENANT = "bench"
USER = "Alex Morgan"          # the tenant's own speaker: in every conversation, so the largest hub
DEFAULT_SIZES = ("10k:100k", "30k:300k", "100k:1M")
CONVS_PER_FILE = 12
ZH_SHARE = 0.06               # share of Chinese conversations
ZIPF_S = 1.07                 # word and entity popularity exponent
PROVENANCE = "bench.recall_latency.v1"   # marks every row as synthetic

# Node mix (share of all nodes); Facts take the rest.
EPISODE_SHARE, ENTITY_SHARE, CONCEPT_SHARE = 0.50, 0.15, 0.01
ENTITY_MIX = (("PERSON", 0.30), ("LOC", 0.20), ("OBJECT", 0.40), ("TIME", 0.10))
ZH_ENTITY_SHARE = 0.08

EDGE_WEIGHT = {"MENTIONS": 0.95, "AGENT": 0.8, "PATIENT": 0.85, "LOCATION": 0.85, "TIME": 0.9, "ABOUT": 0.7,
               "TEMPORAL_NEXT": 1.0, "DERIVED_FROM": 1.0}

# ---------------------------------------------------------------- vocabularies

# Frequent content words (none is a DuckDB or recall stop-word); pseudo-words fill the long tail.
EN_WORDS = """garden coffee guitar soccer hiking camera bicycle kitchen pottery marathon museum passport dentist
laptop painting concert library beach mountain river dinner breakfast recipe bakery puppy kitten flowers tomato
pizza sushi dumplings jazz piano violin poetry chess yoga swimming cycling fishing camping skiing photography movie
festival holiday vacation airport train flight hotel office meeting project report deadline interview promotion
salary apartment landlord neighbor school exam teacher homework birthday wedding party gift ticket market groceries
apples bread cheese wine tea juice weather rain snow sunshine storm trail lake forest island city village bridge
castle church hospital doctor medicine headache fever gym workout coach team match game score album song podcast
blog photo video phone charger battery keyboard printer garage car engine tire budget savings invoice bank letter
package delivery courier shoes jacket scarf umbrella backpack tent lantern compass canoe kayak sailboat telescope
planet moon""".split()
EN_VERBS = (("visited", "visit"), ("bought", "buy"), ("painted", "paint"), ("fixed", "fix"), ("borrowed", "borrow"),
            ("cooked", "cook"), ("watched", "watch"), ("photographed", "photograph"), ("cleaned", "clean"),
            ("ordered", "order"), ("planted", "plant"), ("repaired", "repair"), ("booked", "book"), ("sold", "sell"),
            ("found", "find"), ("lost", "lose"), ("carried", "carry"), ("packed", "pack"), ("shared", "share"),
            ("recommended", "recommend"), ("returned", "return"), ("sketched", "sketch"), ("rented", "rent"))
EN_GLUE = "the a and with to for my our some really so very it was then after near of".split()
EN_FUNCTION = frozenset(EN_GLUE) | {"i", "at", "this", "last", "two", "ago"}   # never a keyword or query word
EN_WHEN = (("yesterday", 1, "day"), ("today", 0, "day"), ("this morning", 0, "day"), ("last night", 1, "day"),
           ("two days ago", 2, "day"), ("last week", 7, "week"), ("last month", 30, "month"))
FIRST_NAMES = """James Mary Robert Patricia John Jennifer Michael Linda David Elizabeth William Barbara Richard Susan
Joseph Jessica Thomas Sarah Charles Karen Daniel Lisa Matthew Nancy Anthony Betty Mark Sandra Donald Ashley Steven
Kimberly Paul Emily Andrew Donna Joshua Michelle Kenneth Carol Kevin Amanda Brian Melissa George Deborah Timothy
Stephanie Ronald Rebecca Jason Sharon Edward Laura Jeffrey Cynthia Ryan Amy Jacob Kathleen Gary Angela Nicholas
Shirley Eric Brenda Jonathan Emma Stephen Anna Larry Pamela Justin Nicole Scott Samantha Brandon Katherine Benjamin
Christine Samuel Helen Gregory Debra Alexander Rachel Patrick Carolyn Frank Janet Raymond Maria Jack Olivia Dennis
Heather Jerry Diane Tyler Julie Aaron Joyce Jose Victoria Adam Ruth Nathan Virginia Henry Lauren Zachary Kelly Douglas
Christina Peter Joan Kyle Evelyn Noah Judith Ethan Andrea Jeremy Hannah Walter Megan Christian Cheryl Keith Jacqueline
Roger Martha Terry Madison Austin Teresa Sean Gloria Gerald Sara Carl Janice Harold Ann Dylan Kathryn Arthur Abigail
Lawrence Sophia Jordan Frances Jesse Jean Bryan Alice Billy Judy Bruce Isabella Gabriel Julia Joe Grace Logan Amber
Alan Denise Juan Danielle Albert Marilyn Willie Beverly Elijah Charlotte Wayne Natalie Randy Theresa Vincent Diana
Mason Brittany Roy Doris Ralph Kayla Bobby Alexis Russell Lori Bradley Marie Philip Priya Hiro Fatima Kenji Mateo
Aisha Omar Rosa Lena Nina Ivan Leo Chloe Zoe Carlos""".split()
SURNAMES = """Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez Hernandez Lopez Gonzalez Wilson
Anderson Thomas Taylor Moore Jackson Martin Lee Perez Thompson White Harris Sanchez Clark Ramirez Lewis Robinson
Walker Young Allen King Wright Scott Torres Nguyen Hill Flores Green Adams Nelson Baker Hall Rivera Campbell Mitchell
Carter Roberts Gomez Phillips Evans Turner Diaz Parker Cruz Edwards Collins Reyes Stewart Morris Morales Murphy Cook
Rogers Gutierrez Ortiz Morgan Cooper Peterson Bailey Reed Kelly Howard Ramos Kim Cox Ward Richardson Watson Brooks
Chavez Wood James Bennett Gray Mendoza Ruiz Hughes Price Alvarez Castillo Sanders Patel Myers Long Ross Foster
Jimenez Powell Jenkins Perry Russell Sullivan Bell Coleman Butler Henderson Barnes Gonzales Fisher Vasquez Simmons
Romero Jordan Patterson Alexander Hamilton Graham Reynolds Griffin Wallace Moreno West Cole Hayes Bryant Herrera
Gibson Ellis Tran Medina Aguilar Stevens Murray Ford Castro Marshall Owens Harrison Fernandez Mcdonald Woods
Washington Kennedy Wells Vargas Henry Chen Freeman Webb Tucker Guzman Burns Crawford Olson Simpson Porter Hunter
Gordon Mendez Silva Shaw Snyder Mason Dixon Munoz Hunt Hicks Holmes Palmer Wagner Black Robertson Boyd Rose Stone
Salazar Fox Warren Mills Meyer Rice Schmidt Garza Daniels Ferguson Nichols Stephens Soto Weaver Ryan Gardner Payne
Grant Dunn Kelley Spencer Hawkins Arnold Pierce Vazquez Hansen Peters Santos Hart Bradley Knight Elliott Cunningham
Duncan Armstrong Hudson Carroll Lane Riley Andrews Alvarado Ray Delgado Berry Perkins Hoffman Johnston
Matthews""".split()
LOC_SUFFIXES = """Park Street Lake Hill Market Bay Bridge Station Cafe Library Square Beach Harbor Garden Plaza Museum
Trail Avenue Mall Stadium""".split()
OBJ_ADJECTIVES = """blue red green yellow black white silver golden wooden leather vintage tiny huge old new broken
shiny folding electric antique handmade rusty plastic glass ceramic woolen striped spotted purple orange pink""".split()
OBJ_NOUNS = """camera bike guitar laptop lamp chair table kettle teapot mug backpack jacket scarf umbrella tent lantern
compass kayak telescope watch radio speaker headphones notebook sketchbook easel vase bowl skillet blender toaster
drone scooter skateboard helmet sweater boots sneakers wallet suitcase clock mirror rug blanket pillow quilt basket
bucket ladder hammer drill shovel""".split()

ZH_WORDS = """公园 图书馆 超市 学校 公司 医院 咖啡 火锅 电影 足球 篮球 爬山 跑步 游泳 钓鱼 钢琴 吉他 自行车 唱歌 做饭 拍照
滑雪 饺子 面条 米饭 水果 蛋糕 茶叶 啤酒 天气 下雨 阳光 周末 假期 旅行 机票 酒店 火车 地铁 会议 报告 项目 老板 同事 工资 房租
邻居 考试 老师 作业 生日 婚礼 礼物 朋友 孩子 妈妈 爸爸 奶奶 小狗 小猫 花园 西瓜 手机 电脑 键盘 相机 书包 雨伞 外套 鞋子 照片
音乐 小说 画画 瑜伽 健身 比赛 球队 演唱会 博物馆 海边 森林 湖边 山顶 城市 农村 医生 感冒 发烧 药店 快递 包裹 银行 早餐 晚饭
午饭""".split()
ZH_VERBS = (("买了", "买"), ("看了", "看"), ("修了", "修"), ("借了", "借"), ("做了", "做"), ("拍了", "拍"),
            ("送了", "送"), ("找到了", "找到"), ("带了", "带"), ("卖了", "卖"), ("订了", "订"))
ZH_GLUE = ("和", "的", "很", "也", "还", "就", "都")
ZH_WHEN = (("昨天", 1, "day"), ("今天", 0, "day"), ("前天", 2, "day"), ("今天早上", 0, "day"), ("上周", 7, "week"),
           ("上个月", 30, "month"))
ZH_SURNAMES = "王李张刘陈杨赵黄周吴徐孙马朱胡郭何林高罗梁宋唐许韩冯邓曹彭曾"
ZH_GIVEN = "芳伟娜洋静帆磊敏杰婷强丽超琳军平涛飞欣斌佳亮明红华勇艳霞刚辉"
ZH_CITIES = "北京 上海 杭州 成都 广州 深圳 南京 西安 武汉 苏州 重庆 天津 青岛 厦门 长沙 昆明 大连 宁波 合肥 郑州".split()
ZH_LOC_SUFFIXES = "公园 广场 商场 图书馆 咖啡馆 博物馆 体育馆 火车站 菜市场 书店 医院 大学 湖 山 海边".split()
ZH_OBJ_ADJECTIVES = "红色 蓝色 白色 黑色 绿色 二手 木头 旧 新 小 大 折叠 复古 手工".split()
ZH_OBJ_NOUNS = "自行车 相机 吉他 书包 雨伞 外套 手表 台灯 沙发 书桌 水杯 茶壶 帐篷 滑板 耳机 音箱 毛衣 围巾 钱包 行李箱".split()
ZH_ASK = ("什么时候去", "在哪里", "和谁一起", "为什么喜欢")

_CONS, _VOWELS = "bdfgklmnprstvz", "aeiou"
_NOHIT_CONS = "qxjwy"          # letters pseudo-words never use: queries made of them have no hits


# ---------------------------------------------------------------- sizes

@dataclass(frozen=True)
class Size:
    nodes: int
    edges: int

    @property
    def label(self) -> str:
        return f"{_short(self.nodes)}/{_short(self.edges)}"


def _short(n: int) -> str:
    for unit, div in (("M", 1_000_000), ("k", 1_000)):
        if n >= div and n % (div // 10) == 0:
            return f"{n / div:g}{unit}"
    return str(n)


def parse_size(text: str) -> Size:
    """'100k:1M' → Size(100_000, 1_000_000); k = 1e3, M = 1e6."""
    def num(s: str) -> int:
        m = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmM]?)", s.strip())
        if not m:
            raise argparse.ArgumentTypeError(f"bad size {text!r}: want NODES:EDGES like 100k:1M")
        return int(float(m.group(1)) * {"": 1, "k": 1_000, "K": 1_000, "m": 1_000_000, "M": 1_000_000}[m.group(2)])
    nodes, sep, edges = text.partition(":")
    if not sep:
        raise argparse.ArgumentTypeError(f"bad size {text!r}: want NODES:EDGES like 100k:1M")
    return Size(num(nodes), num(edges))


# ---------------------------------------------------------------- generator

class Zipf:
    """Items drawn with probability ∝ 1 / rank^s (rank = list position, from 1)."""

    def __init__(self, items: list, s: float = ZIPF_S) -> None:
        self.items = items
        acc, self.cum = 0.0, []
        for k in range(1, len(items) + 1):
            acc += k ** -s
            self.cum.append(acc)

    def draw(self, r: random.Random, k: int = 1) -> list:
        return r.choices(self.items, cum_weights=self.cum, k=k)


def pseudo_words(n: int, r: random.Random, avoid: set[str]) -> list[str]:
    """`n` distinct pronounceable non-words of 2–4 syllables (no q/x/j/w/y), none in `avoid`."""
    out: dict[str, None] = {}
    while len(out) < n:
        w = "".join(r.choice(_CONS) + r.choice(_VOWELS) + (r.choice(_CONS) if r.random() < 0.3 else "")
                    for _ in range(r.choice((2, 2, 3, 3, 4))))
        if len(w) >= 4 and w not in avoid:
            out[w] = None
    return list(out)


def nohit_word(r: random.Random) -> str:
    return "".join(r.choice(_NOHIT_CONS) + r.choice(_VOWELS) for _ in range(3))


def _unique_combos(n: int, heads: list[str], tails: list[str], joiner: str, r: random.Random,
                   more_tails) -> list[str]:
    """`n` distinct `head + joiner + tail` names; `more_tails(k)` adds tails when the product is too small."""
    tails = list(tails)
    if len(heads) * len(tails) < n:
        tails += more_tails(-(-n // len(heads)) - len(tails))
    picks = r.sample(range(len(heads) * len(tails)), n)
    return [heads[i % len(heads)] + joiner + tails[i // len(heads)] for i in picks]


@dataclass(eq=False)   # one object per entity: compared and hashed by identity
class Entity:
    id: str
    subtype: str
    title: str
    lang: str
    keywords: list[str]
    time: datetime | None = None
    refs: list[dict] = field(default_factory=list)
    seen: list[datetime] = field(default_factory=list)   # [first, last]
    mentions: int = 0


@dataclass
class Clause:
    start: int                 # character span in the turn text
    end: int
    agent: Entity
    verb: str                  # lemma
    obj: str                   # what the verb acts on: the patient's title, or a plain word
    patient: Entity | None
    place: Entity | None
    when: Entity | None
    words: list[str]


@dataclass
class Turn:
    conv_id: str
    msg_id: str
    speaker: Entity
    ts: datetime
    lang: str
    text: str
    words: list[str]                                   # content words, in order
    names: list[tuple[Entity, int, int]]               # entity, character span
    clauses: list[Clause]
    ref: dict | None = None                            # the message's raw_ref after ingest


@dataclass
class Corpus:
    """What queries are drawn from."""
    turns: list[Turn]
    entities: dict[str, list[Entity]]                  # "en" / "zh" → named entities (no TIME)
    popular: list[Entity]                              # the most mentioned entities
    vocab: list[str]                                   # English words by Zipf rank
    counts: Counter


@dataclass
class Tenant:
    size: Size
    corpus: Corpus
    stats: dict


class Generator:
    """One deterministic tenant: chat turns, then the graph over them."""

    def __init__(self, size: Size, seed: int) -> None:
        self.size = size
        self.r = random.Random(f"recall-latency:{seed}:{size.nodes}:{size.edges}")
        n = size.nodes
        self.n_episodes = round(EPISODE_SHARE * n)
        self.n_entities = max(20, round(ENTITY_SHARE * n))
        self.n_concepts = max(5, round(CONCEPT_SHARE * n))
        self.n_facts = n - self.n_episodes - self.n_entities - self.n_concepts
        if self.n_facts < 0:
            raise ValueError(f"{n} nodes is too few for a tenant (want at least ~100)")
        n_vocab = max(2_000, n // 4)     # vocabulary grows with the corpus (Heaps' law, roughly)
        avoid = set(EN_WORDS) | {w.lower() for w in FIRST_NAMES + SURNAMES + LOC_SUFFIXES + OBJ_NOUNS}
        self.vocab = list(EN_WORDS) + pseudo_words(n_vocab - len(EN_WORDS), self.r, avoid)
        self.words_en, self.words_zh = Zipf(self.vocab), Zipf(list(ZH_WORDS))
        self._make_entities()

    # -- entities and concepts --------------------------------------------------------------

    def _entity(self, subtype: str, title: str, lang: str, time: datetime | None = None) -> Entity:
        keywords = ([title] if lang == "zh" else title.lower().split()) if subtype != "TIME" else \
            [p for p in re.split(r"[-W]", title) if p]
        return Entity(stable_id("n", TENANT, "Entity", subtype, title), subtype, title, lang, keywords, time)

    def _make_entities(self) -> None:
        """Entities (the user, PERSON / LOC / OBJECT per language, TIME), each pool in Zipf order; Concepts."""
        counts = {sub: round(share * self.n_entities) for sub, share in ENTITY_MIX}
        self._make_times(counts["TIME"])
        counts["TIME"] = len(self.time_entities)
        counts["OBJECT"] = self.n_entities - counts["PERSON"] - counts["LOC"] - counts["TIME"]
        self.user = self._entity("PERSON", USER, "en")
        pools = self._named_pools(counts)
        self.pools = {lang: {sub: Zipf(es) for sub, es in subs.items()} for lang, subs in pools.items()}
        self.named = {lang: [e for es in subs.values() for e in es] for lang, subs in pools.items()}
        self.entities = [self.user] + self.named["en"] + self.named["zh"] + list(self.time_entities.values())
        self.r.shuffle(self.entities)
        self.all_entities = Zipf(self.entities)
        # Concepts: vocabulary words across the ranks (a frequent word's concept is a hub)
        picks = sorted(self.r.sample(range(10, len(self.vocab)), min(self.n_concepts, len(self.vocab) - 10)))
        self.concepts = {self.vocab[i]: stable_id("n", TENANT, "Concept", self.vocab[i]) for i in picks}
        self.concept_zipf = Zipf(list(self.concepts.values()))

    def _make_times(self, wanted: int) -> None:
        """Up to `wanted` TIME entities among the days, ISO weeks and months of 2023–2024; the first day always."""
        days = [datetime(2023, 1, 1) + timedelta(days=d) for d in range(730)]
        times = [("day", d, d.strftime("%Y-%m-%d")) for d in days]
        times += [("week", d, d.strftime("%G-W%V")) for d in days[::7]]
        times += [("month", d, d.strftime("%Y-%m")) for d in days if d.day == 1]
        first_day = times[0][0], times[0][2]
        rest = sorted((kind, title) for kind, _, title in times[1:])
        kept = set(self.r.sample(rest, min(max(wanted, 1), len(times)) - 1)) | {first_day}
        self.time_entities = {(kind, title): self._entity("TIME", title, "en", d)
                              for kind, d, title in times if (kind, title) in kept}
        self.time_keys = {kind: sorted(t for k, t in self.time_entities if k == kind)
                          for kind in ("day", "week", "month")}

    def _named_pools(self, counts: dict[str, int]) -> dict[str, dict[str, list[Entity]]]:
        """lang → subtype → distinct named entities (8 % Chinese), in random order; the user is one PERSON more."""
        r = self.r
        more = lambda k: [w.capitalize() for w in pseudo_words(k, r, set(self.vocab))]  # noqa: E731
        zh_given = list(ZH_GIVEN) + [a + b for a in ZH_GIVEN for b in ZH_GIVEN]
        pools: dict[str, dict[str, list[Entity]]] = {"en": {}, "zh": {}}
        for sub in ("PERSON", "LOC", "OBJECT"):
            n_zh = max(3, round(ZH_ENTITY_SHARE * counts[sub]))
            n_en = counts[sub] - n_zh - (1 if sub == "PERSON" else 0)
            if sub == "PERSON":
                en = _unique_combos(n_en, FIRST_NAMES, SURNAMES, " ", r, more)
                zh = _unique_combos(n_zh, list(ZH_SURNAMES), zh_given, "", r, lambda k: [])
            elif sub == "LOC":
                en = [" ".join(reversed(x.split(" "))) for x in _unique_combos(n_en, LOC_SUFFIXES, [], " ", r, more)]
                zh = _unique_combos(n_zh, ZH_CITIES, ZH_LOC_SUFFIXES, "", r,
                                    lambda k: [c + s for c in ZH_GIVEN for s in ZH_LOC_SUFFIXES][:k])
            else:
                en = _unique_combos(n_en, OBJ_ADJECTIVES, OBJ_NOUNS, " ", r, lambda k: pseudo_words(k, r, set()))
                zh = _unique_combos(n_zh, ZH_OBJ_ADJECTIVES, ZH_OBJ_NOUNS, "", r,
                                    lambda k: [a + n for a in ZH_GIVEN for n in ZH_OBJ_NOUNS][:k])
            pools["en"][sub] = [self._entity(sub, t, "en") for t in en]
            pools["zh"][sub] = [self._entity(sub, t, "zh") for t in zh]
        return pools

    def _time_entity(self, ts: datetime, back_days: int, kind: str) -> Entity:
        d = ts - timedelta(days=back_days)
        title = {"day": d.strftime("%Y-%m-%d"), "week": d.strftime("%G-W%V"), "month": d.strftime("%Y-%m")}[kind]
        keys = self.time_keys[kind] or self.time_keys["day"]
        if (kind, title) not in self.time_entities:   # not kept on this size: the nearest kept one
            title = keys[min(bisect.bisect_left(keys, title), len(keys) - 1)]
            kind = kind if self.time_keys[kind] else "day"
        return self.time_entities[(kind, title)]

    # -- chat --------------------------------------------------------------------------------

    def _clause(self, lang: str, speaker: Entity, ts: datetime, text: list[str], names: list) -> Clause:
        """Append one clause to `text` (a list of pieces); returns it with its character span."""
        r, pool = self.r, self.pools[lang]
        start = pos = sum(map(len, text))
        first = len(text)

        def put(piece: str, entity: Entity | None = None) -> None:
            nonlocal pos
            if entity is not None:
                names.append((entity, pos, pos + len(piece)))
            text.append(piece)
            pos += len(piece)

        agent = speaker if r.random() < 0.5 else pool["PERSON"].draw(r)[0]
        patient = pool["OBJECT"].draw(r)[0] if r.random() < 0.7 else None
        place = pool["LOC"].draw(r)[0] if r.random() < 0.5 else None
        when = r.choice(EN_WHEN if lang == "en" else ZH_WHEN) if r.random() < 0.5 else None
        time_entity = self._time_entity(ts, when[1], when[2]) if when else None
        if lang == "en":
            verb, lemma = r.choice(EN_VERBS)
            put("I" if agent is speaker else agent.title, None if agent is speaker else agent)
            put(f" {verb} ")
            obj = patient.title if patient is not None else self.words_en.draw(r)[0]
            put("the " if patient is not None else "")
            put(obj, patient)
            if place is not None:
                put(" at ")
                put(place.title, place)
            if when is not None:
                put(f" {when[0]}")
            filler = self.words_en.draw(r, r.randint(3, 9))
            glued = [w if r.random() < 0.6 else f"{r.choice(EN_GLUE)} {w}" for w in filler]
            if r.random() < 0.2:
                friend = pool["PERSON"].draw(r)[0]
                put(", with ")
                put(friend.title, friend)
            put(", " + " ".join(glued) + ". ")
        else:
            verb, lemma = r.choice(ZH_VERBS)
            put("我" if agent is speaker else agent.title, None if agent is speaker else agent)
            if when is not None:
                put(when[0])
            if place is not None:
                put("在")
                put(place.title, place)
            put(verb)
            obj = patient.title if patient is not None else self.words_zh.draw(r)[0]
            put(obj, patient)
            filler = self.words_zh.draw(r, r.randint(2, 6))
            put("，" + "".join(w if r.random() < 0.6 else r.choice(ZH_GLUE) + w for w in filler) + "。")
        words = [w for piece in text[first:] for w in re.findall(r"[a-z]+", piece.lower())
                 if w not in EN_FUNCTION] if lang == "en" else filler
        return Clause(start, pos, agent, lemma, obj, patient, place, time_entity, words)

    def chat(self) -> list[Turn]:
        """Conversations of 50–300 turns until there is one turn per Episode."""
        r, turns, conv_no = self.r, [], 0
        while len(turns) < self.n_episodes:
            lang = "zh" if conv_no == 1 or r.random() < ZH_SHARE else "en"
            others = [e for e in self.pools[lang]["PERSON"].draw(r, r.randint(1, 2)) if e is not self.user]
            speakers = [self.user] + list(dict.fromkeys(others))
            ts = datetime(2023, 1, 1) + timedelta(minutes=r.randrange(2 * 365 * 24 * 60 - 30 * 24 * 60))
            conv_id = f"conv{conv_no:05d}"
            for k in range(min(r.randint(50, 300), self.n_episodes - len(turns))):
                ts += timedelta(seconds=r.randint(5, 1800)) if r.random() > 0.03 else timedelta(days=r.randint(1, 6))
                speaker = r.choice(speakers)
                pieces: list[str] = []
                names: list[tuple[Entity, int, int]] = []
                clauses = [self._clause(lang, speaker, ts, pieces, names) for _ in range(r.choice((1, 1, 2, 2, 3)))]
                text = "".join(pieces).strip()
                words = [w for c in clauses for w in c.words]
                turns.append(Turn(conv_id, f"m{k}", speaker, ts, lang, text, words, names, clauses))
            conv_no += 1
        return turns

    # -- raw layer ---------------------------------------------------------------------------

    def ingest(self, turns: list[Turn], lake: Lake) -> dict:
        """Canonical JSONL files → ingest_bytes (real chunker + CAS); sets each turn's raw_ref; writes the tables."""
        store = RawStore(lake.root)
        by_conv: dict[str, list[Turn]] = defaultdict(list)
        for t in turns:
            by_conv[t.conv_id].append(t)
        convs = list(by_conv)
        messages, chunks = [], []
        for f in range(0, len(convs), CONVS_PER_FILE):
            lines = [json.dumps({"conv_id": t.conv_id, "msg_id": t.msg_id, "speaker": t.speaker.title, "role": "user",
                                 "ts": t.ts.isoformat(), "text": t.text}, ensure_ascii=False)
                     for c in convs[f:f + CONVS_PER_FILE] for t in by_conv[c]]
            source = f"{TENANT}/chat_{f // CONVS_PER_FILE:04d}.jsonl"
            result = ingest_bytes(("\n".join(lines) + "\n").encode("utf-8"), source, TENANT, store)
            messages.append(result.messages)
            chunks.append(result.raw_chunks)
        msgs, raw = pa.concat_tables(messages), pa.concat_tables(chunks)
        where = {(c, m): refs[0] for c, m, refs in zip(msgs.column("conv_id").to_pylist(),
                                                        msgs.column("msg_id").to_pylist(),
                                                        msgs.column("raw_refs").to_pylist())}
        for t in turns:
            t.ref = where[(t.conv_id, t.msg_id)]
        write_import(lake, {"messages": (msgs, MESSAGES), "raw_chunks": (raw, RAW_CHUNKS)}, key="chat")
        return {"messages": msgs.num_rows, "raw_chunks": raw.num_rows,
                "raw_bytes": sum(raw.column("len_bytes").to_pylist())}

    # -- graph -------------------------------------------------------------------------------

    def graph(self, turns: list[Turn], lake: Lake) -> dict:
        """Nodes and exactly size.edges edges over the ingested turns, written as the lake's tables."""
        nodes: list[dict] = []
        core: list[tuple] = []              # (src, type, dst, ts, refs): always kept
        optional: dict[tuple, tuple] = {}   # text-grounded MENTIONS / ABOUT: trimmed when over the edge budget
        episodes = self._episodes(turns, nodes, core, optional)
        facts = self._facts(turns, nodes, core)
        if len(core) > self.size.edges:
            raise ValueError(f"{self.size.label}: the turns and facts alone need {len(core):,} edges; "
                             f"ask for at least that many")
        kept = list(optional.items())
        room = self.size.edges - len(core)
        if len(kept) > room:
            kept = [kept[i] for i in sorted(self.r.sample(range(len(kept)), room))]
        for (src, etype, dst), (ts, refs, e) in kept:
            core.append((src, etype, dst, ts, refs))
            if e is not None:
                self._mention(e, ts, refs[0])
        edges = core + self._implicit(room - len(kept), episodes + facts, {(s, y, d) for s, y, d, _, _ in core})
        nodes += self._entity_nodes() + self._concept_nodes(edges)
        write_import(lake, {"nodes": (pa.Table.from_pylist(nodes, schema=_used(NODES, nodes)), NODES),
                            "edges": (_edge_table(edges), EDGES)}, key="graph")
        return {"nodes": Counter(n["type"] for n in nodes), "edges": Counter(y for _, y, _, _, _ in edges)}

    def _episodes(self, turns: list[Turn], nodes: list[dict], core: list[tuple],
                  optional: dict[tuple, tuple]) -> list[tuple[str, datetime, dict]]:
        """An Episode per turn with its DERIVED_FROM, speaker MENTIONS and TEMPORAL_NEXT edges (core) and
        its named MENTIONS and ABOUT edges (optional); returns (id, ts, raw_ref) per Episode."""
        out, prev = [], {}
        for t in turns:
            eid = stable_id("n", TENANT, "Episode", t.conv_id, t.msg_id)
            ref = dict(t.ref)
            title = f"{t.speaker.title}: {t.text[:64]}" + ("…" if len(t.text) > 64 else "")
            nodes.append(_node(eid, "Episode", "turn", title, t.text, list(dict.fromkeys(t.words))[:12], t.ts, [ref],
                               t, [e.title for e, _, _ in t.names]))
            out.append((eid, t.ts, ref))
            core.append((eid, "DERIVED_FROM", ref["raw_id"], t.ts, [ref]))
            core.append((eid, "MENTIONS", t.speaker.id, t.ts, [ref]))
            self._mention(t.speaker, t.ts, ref)
            if t.conv_id in prev:
                core.append((prev[t.conv_id], "TEMPORAL_NEXT", eid, t.ts, []))
            prev[t.conv_id] = eid
            for e, s, end in t.names:
                if e is not t.speaker:
                    optional.setdefault((eid, "MENTIONS", e.id), (t.ts, [_span(t, s, end)], e))
            for w in list(dict.fromkeys(w for w in t.words if w in self.concepts))[:3]:
                optional.setdefault((eid, "ABOUT", self.concepts[w]), (t.ts, [ref], None))
        return out

    def _facts(self, turns: list[Turn], nodes: list[dict], core: list[tuple]) -> list[tuple[str, datetime, dict]]:
        """Facts on n_facts clauses drawn at random, with DERIVED_FROM their Episode and their role edges."""
        clauses = [(t, c) for t in turns for c in t.clauses]
        out = []
        for i in sorted(self.r.sample(range(len(clauses)), min(self.n_facts, len(clauses)))):
            t, c = clauses[i]
            fid = stable_id("n", TENANT, "Fact", t.conv_id, t.msg_id, str(c.start))
            span = _span(t, c.start, c.end)
            nodes.append(_node(fid, "Fact", "event", f"{c.agent.title} {c.verb} {c.obj}", t.text[c.start:c.end].strip(),
                               list(dict.fromkeys([c.verb, *c.words[:8]])), c.when.time if c.when else t.ts,
                               [span], t, [e.title for e in (c.agent, c.patient, c.place, c.when) if e]))
            out.append((fid, t.ts, span))
            core.append((fid, "DERIVED_FROM", stable_id("n", TENANT, "Episode", t.conv_id, t.msg_id), t.ts, [span]))
            for etype, e in (("AGENT", c.agent), ("PATIENT", c.patient), ("LOCATION", c.place), ("TIME", c.when)):
                if e is not None:
                    core.append((fid, etype, e.id, t.ts, [span]))
                    self._mention(e, t.ts, span)
        return out

    def _implicit(self, n: int, sources: list[tuple[str, datetime, dict]], have: set) -> list[tuple]:
        """`n` more edges than the text names: 2/3 MENTIONS of Zipf-popular entities, 1/3 ABOUT popular concepts."""
        r, out = self.r, []
        while len(out) < n:
            src, ts, ref = r.choice(sources)
            if r.random() < 2 / 3:
                e = self.all_entities.draw(r)[0]
                etype, dst = "MENTIONS", e.id
            else:
                e, etype, dst = None, "ABOUT", self.concept_zipf.draw(r)[0]
            if (src, etype, dst) in have:
                continue
            have.add((src, etype, dst))
            out.append((src, etype, dst, ts, [ref]))
            if e is not None:
                self._mention(e, ts, ref)
        return out

    def _mention(self, e: Entity, ts: datetime, ref: dict) -> None:
        e.mentions += 1
        e.seen = [min(e.seen[0], ts), max(e.seen[1], ts)] if e.seen else [ts, ts]
        if len(e.refs) < 5:
            e.refs.append(ref)

    def _entity_nodes(self) -> list[dict]:
        out = []
        for e in self.entities:
            first, last = e.seen or [datetime(2023, 1, 1)] * 2
            out.append({"id": e.id, "tenant": TENANT, "type": "Entity", "subtype": e.subtype, "title": e.title,
                        "text": f"{e.title} ({e.subtype})", "keywords": e.keywords, "lang": e.lang,
                        "time_start": e.time, "first_seen": first, "last_seen": last, "status": "active",
                        "raw_refs": e.refs, "provenance": PROVENANCE, "aliases": [e.title], "mentions": e.mentions,
                        "frequency": e.mentions, "importance": 0.5, "confidence": 0.8, "tier": "short",
                        "category": "fact"})
        return out

    def _concept_nodes(self, edges: list[tuple]) -> list[dict]:
        seen: dict[str, list] = {}
        for src, etype, dst, ts, refs in edges:
            if etype == "ABOUT":
                s = seen.setdefault(dst, [ts, ts, [], 0])
                s[0], s[1], s[3] = min(s[0], ts), max(s[1], ts), s[3] + 1
                if len(s[2]) < 5:
                    s[2] += refs
        out = []
        for word, cid in self.concepts.items():
            first, last, refs, n = seen.get(cid, [datetime(2023, 1, 1), datetime(2023, 1, 1), [], 0])
            out.append({"id": cid, "tenant": TENANT, "type": "Concept", "subtype": "topic", "title": word.capitalize(),
                        "text": f"Topic: {word.capitalize()}", "keywords": [word], "lang": "en", "first_seen": first,
                        "last_seen": last, "status": "active", "raw_refs": refs, "provenance": PROVENANCE,
                        "mentions": n, "frequency": n, "importance": 0.5, "confidence": 0.7, "tier": "short",
                        "category": "fact"})
        return out

    def corpus(self, turns: list[Turn]) -> Corpus:
        counts = Counter(w for t in turns if t.lang == "en" for w in t.words)
        popular = sorted(self.entities, key=lambda e: -e.mentions)[:50]
        named = {lang: [e for e in es if e.subtype != "TIME"] for lang, es in self.named.items()}
        return Corpus(turns, named, [e for e in popular if e.subtype != "TIME"], self.vocab, counts)


def _span(t: Turn, start: int, end: int) -> dict:
    """The raw_ref of characters [start, end) of a turn's text inside its chunk."""
    b0, b1 = len(t.text[:start].encode("utf-8")), len(t.text[:end].encode("utf-8"))
    return {"raw_id": t.ref["raw_id"], "offset": t.ref["offset"] + b0, "length": b1 - b0}


def _node(nid: str, ntype: str, subtype: str, title: str, text: str, keywords: list[str], time_start: datetime,
          refs: list[dict], t: Turn, entities: list[str]) -> dict:
    """A NODES row of a node drawn from turn `t` (an Episode or a Fact)."""
    return {"id": nid, "tenant": TENANT, "type": ntype, "subtype": subtype, "title": title, "text": text,
            "keywords": keywords, "entities": entities, "lang": t.lang, "time_start": time_start,
            "first_seen": t.ts, "last_seen": t.ts, "status": "active", "raw_refs": refs, "provenance": PROVENANCE,
            "conv_id": t.conv_id, "msg_id": t.msg_id, "speaker": t.speaker.title, "importance": 0.5,
            "confidence": 1.0 if ntype == "Episode" else 0.7, "frequency": 1, "tier": "short",
            "category": "episode" if ntype == "Episode" else "fact"}


def _used(schema: pa.Schema, rows: list[dict]) -> pa.Schema:
    """The schema restricted to the columns the rows use (write_table fills the rest with nulls)."""
    used = {k for row in rows for k in row}
    return pa.schema([f for f in schema if f.name in used])


def _edge_table(edges: list[tuple]) -> pa.Table:
    src, etype, dst, ts, refs = (list(col) for col in zip(*edges))
    return pa.table({
        "id": edge_ids([(TENANT, s, y, d) for s, y, d in zip(src, etype, dst)]),
        "tenant": [TENANT] * len(src), "src": src, "dst": dst, "type": etype,
        "weight": [EDGE_WEIGHT[y] for y in etype], "confidence": [0.8] * len(src),
        "valid_since": pa.array(ts, pa.timestamp("us")), "raw_refs": pa.array(refs, RAW_REFS),
        "provenance": [PROVENANCE] * len(src),
    })


def generate_tenant(size: Size, seed: int, root: Path) -> Tenant:
    """Generate, ingest and write one tenant's lake tables under `root` (indexes not built)."""
    lake = Lake(root)
    lake.lake.mkdir(parents=True, exist_ok=True)
    gen = Generator(size, seed)
    t0 = time.perf_counter()
    turns = gen.chat()
    t1 = time.perf_counter()
    raw = gen.ingest(turns, lake)
    t2 = time.perf_counter()
    graph = gen.graph(turns, lake)
    t3 = time.perf_counter()
    stats = {**raw, **graph, "seconds": {"chat": t1 - t0, "ingest": t2 - t1, "graph": t3 - t2}}
    return Tenant(size, gen.corpus(turns), stats)


# ---------------------------------------------------------------- queries

KIND_PATTERN = ("frequent", "multi", "entity", "rare", "question", "multi", "hub", "zh", "frequent", "rare",
                "multi", "entity", "question", "rare", "zh", "multi", "entity", "frequent", "nohit", "rare")


@dataclass(frozen=True)
class Query:
    kind: str
    text: str
    expect_hits: bool


def make_queries(corpus: Corpus, n: int, seed: int) -> list[Query]:
    """`n` deterministic queries cycling through KIND_PATTERN (5 % with no hits, 10 % Chinese)."""
    r = random.Random(f"recall-latency-queries:{seed}")
    en = [t for t in corpus.turns if t.lang == "en" and len(t.words) >= 4]
    zh = [t for t in corpus.turns if t.lang == "zh"] or en
    out = []
    for i in range(n):
        kind = KIND_PATTERN[i % len(KIND_PATTERN)]
        if kind == "frequent":
            text = r.choice(corpus.vocab[:40])
        elif kind == "rare":
            words = r.choice(en).words
            text = min(words, key=lambda w: (corpus.counts[w], words.index(w)))
        elif kind == "multi":
            words = list(dict.fromkeys(r.choice(en).words))
            text = " ".join(r.sample(words, min(len(words), r.randint(2, 4))))
        elif kind == "entity":
            text = r.choice(corpus.entities["en"]).title
        elif kind == "hub":
            text = r.choice(corpus.popular[:20]).title
        elif kind == "question":
            t = r.choice([t for t in en[:2000] if t.names] or en)
            name = t.names[0][0].title if t.names else t.speaker.title
            text = f"What did {name} say about the {r.choice(t.words)}?"
        elif kind == "zh":
            t = r.choice(zh)
            who = t.names[0][0].title if t.names else r.choice(corpus.entities["zh"]).title
            text = f"{who}{r.choice(ZH_ASK)}{r.choice(t.words) if t.words else ''}"
        else:
            text = f"{nohit_word(r)} {nohit_word(r)}"
        out.append(Query(kind, text, kind != "nohit"))
    return out


# ---------------------------------------------------------------- fresh-process measurements

def run_fresh(func: str, **kwargs) -> dict:
    """`func(**kwargs)` of this file in a new Python process (caches cold); its JSON result plus import_s."""
    code = ("import importlib.util, json, sys, time\n"
            "t = time.perf_counter()\n"
            "spec = importlib.util.spec_from_file_location('bench_recall_latency_child', sys.argv[1])\n"
            "mod = importlib.util.module_from_spec(spec); sys.modules[spec.name] = mod; spec.loader.exec_module(mod)\n"
            "t = time.perf_counter() - t\n"
            "out = getattr(mod, sys.argv[2])(**json.load(sys.stdin))\n"
            "out['import_s'] = t\n"
            "print(json.dumps(out))\n")
    proc = subprocess.run([sys.executable, "-c", code, str(Path(__file__).resolve()), func],
                          input=json.dumps(kwargs), capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{func} failed in its process:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def recall_code_id() -> str:
    """A short hash of the recall package's sources: which recall() a figure belongs to."""
    h = hashlib.sha256()
    for path in sorted((Path(__file__).resolve().parents[1] / "recall").glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:12]


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024   # Linux: KiB


def _own_cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


# Where the time goes: these functions' cumulative time in a profile, as a share of the root function's.
PROFILE_KEYS = {
    "recall": (
        ("recall/query.py", "analyze", "query analysis (intent, times, names)"),
        ("recall/engine.py", "_named_entities", "names matched to Entities (SQL)"),
        ("recall/store.py", "node_bm25", "BM25 seeds (match_bm25 over node docs)"),
        ("recall/store.py", "raw_bm25", "BM25 raw fallback (match_bm25 over chunks)"),
        ("recall/engine.py", "_expand", "graph expansion (Python walk + PPR)"),
        ("recall/engine.py", "_ppr", "  of which personalized PageRank"),
        ("recall/store.py", "nodes", "candidate node rows (nodes(ids))"),
        ("recall/citations.py", "prefetch", "citation rows (chunks + messages_in)"),
        ("recall/store.py", "messages_in", "  of which messages_in"),
        ("raw_store/cas.py", "read", "blob reads (sha-verified, cached)"),
        ("recall/engine.py", "_mmr", "MMR"),
        ("<frozen importlib._bootstrap>", "_find_and_load", "failed `import pandas` tries (DuckDB list parameters)"),
    ),
    "build_indexes": (
        ("raw_store/lake.py", "read_table", "read the Parquet tables"),
        ("recall/index.py", "_write_graphs", "igraph pickle per tenant (_write_graphs)"),
        ("recall/index.py", "_write_pickle_atomic", "  of which pickle + fsync"),
        ("recall/index.py", "_write_duckdb", "DuckDB file (_write_duckdb)"),
        ("r2g/tokens.py", "segment_for_fts", "  of which jieba / token segmentation of docs"),
        ("recall/index.py", "_per_tenant_fts", "  of which per-tenant copy + create_fts_index"),
    ),
}


def _profile_text(prof: cProfile.Profile, top: int, root_func: str, runs: int = 1) -> str:
    """The key functions' share of `root_func`'s cumulative time (and calls per run), then the top N by own time."""
    stats = pstats.Stats(prof)
    by_key = {(k[0] if k[0].startswith("<") else f"{Path(k[0]).parent.name}/{Path(k[0]).name}", k[2]): v
              for k, v in stats.stats.items()}
    total = max((v[3] for (f, name), v in by_key.items() if name == root_func and not f.startswith("<")),
                default=0.0) or 1.0
    lines = [f"  {'cumulative s':>12} {'share':>6} {'calls/run':>9}  what"]
    for file, name, label in PROFILE_KEYS[root_func]:
        hit = by_key.get((file, name))
        if hit:
            lines.append(f"  {hit[3]:>12.2f} {hit[3] / total:>6.1%} {hit[1] / runs:>9.1f}  {label}")
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(top)
    out = buf.getvalue().splitlines()
    head = next((i for i, ln in enumerate(out) if ln.lstrip().startswith("ncalls")), 0)
    return "\n".join(lines + [""] + [ln for ln in out[head:] if ln.strip()])


def build(root: str, profile: int = 0) -> dict:
    """build_indexes on the lake at `root`: its stats, seconds and peak RSS; with `profile`, a second
    build under cProfile gives the top functions (the figures come from the first, unprofiled one)."""
    lake = Lake(Path(root))
    t = time.perf_counter()
    stats = build_indexes(lake)
    out = {"seconds": time.perf_counter() - t, "graphs": stats["graphs"], "tables": stats["tables"],
           "rss_mib": _peak_rss_mib(), "duckdb_mib": lake.duckdb_path.stat().st_size / 2**20,
           "graph_mib": sum(p.stat().st_size for p in lake.graph_dir.glob("*.pkl")) / 2**20}
    if profile:
        prof = cProfile.Profile()
        prof.runcall(build_indexes, lake)
        out["profile"] = _profile_text(prof, profile, "build_indexes")
    return out


def load_breakdown(root: str, tenant: str) -> dict:
    """Seconds of each index load a first recall pays, one by one, in a process that has loaded none."""
    lake = Lake(Path(root))
    out = {}
    t = time.perf_counter()
    open_index(lake)
    out["open_duckdb"] = time.perf_counter() - t
    t = time.perf_counter()
    reader = tenant_reader(lake, tenant)
    info = reader.info()
    out["tenant_info"] = time.perf_counter() - t
    t = time.perf_counter()
    tg = load_graph(lake, info.slug)
    out["load_graph"] = time.perf_counter() - t
    out["hubs"] = sum(1 for d in tg.degree if d > RecallConfig().hub_degree)
    t = time.perf_counter()
    search_tokens("公园")
    out["jieba_init"] = time.perf_counter() - t
    t = time.perf_counter()
    reader.node_bm25(info, "coffee garden", RecallConfig().seed_limit)
    out["first_bm25"] = time.perf_counter() - t
    reader.close()
    return out


def serve(root: str, tenant: str, queries: list[dict], warmup: str, profile: int = 0) -> dict:
    """First recall() cold, then each query once warm: per-query ms, stage ms, result counts; peak RSS."""
    lake = Lake(Path(root))
    code = recall_code_id()

    def timed(q: str) -> tuple[float, list, list]:
        trace: list = []
        t = time.perf_counter()
        res = recall(q, tenant, k=10, expand_depth=1, lake=lake, trace=trace)
        return (time.perf_counter() - t) * 1000, trace, res

    cold_ms, _, _ = timed(warmup)
    rows = []
    busy, cpu, wall = cpu_busy_seconds(), _own_cpu_seconds(), time.perf_counter()
    for q in queries:
        ms, trace, res = timed(q["text"])
        stages = defaultdict(float)
        for s in trace:
            stages[s["stage"]] += s["ms"]
        rows.append({"kind": q["kind"], "ms": ms, "stages": stages, "results": len(res),
                     "cited": sum(1 for x in res if x.citations), "expect_hits": q["expect_hits"],
                     "seeds": next((s["n"] for s in trace if s["stage"] == "seeds"), 0),
                     "reached": next((s["n"] for s in trace if s["stage"] == "expand"), 0)})
    wall, cpu = time.perf_counter() - wall, _own_cpu_seconds() - cpu
    busy = None if busy is None else (cpu_busy_seconds() - busy) / wall
    warm_again = sorted(timed(warmup)[0] for _ in range(5))[2]
    out = {"cold_ms": cold_ms, "warmup_warm_ms": warm_again, "rows": rows, "rss_mib": _peak_rss_mib(),
           "loop_s": wall, "loop_cpu_s": cpu, "busy_cores": busy, "code": code}
    if profile:
        prof = cProfile.Profile()
        prof.enable()
        for q in queries:
            recall(q["text"], tenant, k=10, expand_depth=1, lake=lake)
        prof.disable()
        out["profile"] = _profile_text(prof, profile, "recall", len(queries))
    return out


# ---------------------------------------------------------------- report

def pct(xs: list[float], p: float) -> float:
    """The p-th percentile (nearest rank, p in 0–100); 0.0 for no values."""
    if not xs:
        return 0.0
    s = sorted(xs)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


@dataclass
class Measured:
    """One size's figures: generation stats, then what the build, load and serve processes returned."""
    size: Size
    stats: dict
    built: dict
    load: dict
    served: dict

    @property
    def ms(self) -> list[float]:
        return [r["ms"] for r in self.served["rows"]]

    @property
    def cold_start_s(self) -> float:
        return max(0.0, (self.served["cold_ms"] - self.served["warmup_warm_ms"]) / 1000)


def measure_size(size: Size, seed: int, n_queries: int, root: Path, profile: int) -> Measured:
    """Generate the tenant at `root`, then build, load and serve it, each in a fresh process."""
    t = time.perf_counter()
    tenant = generate_tenant(size, seed, root)
    tenant.stats["seconds"]["total"] = time.perf_counter() - t
    queries = make_queries(tenant.corpus, n_queries, seed)
    built = run_fresh("build", root=str(root), profile=profile)
    load = run_fresh("load_breakdown", root=str(root), tenant=TENANT)
    warmup = f"{tenant.corpus.vocab[0]} {ZH_WORDS[0]}"   # English and Chinese: loads the jieba dictionary too
    served = run_fresh("serve", root=str(root), tenant=TENANT, queries=[q.__dict__ for q in queries],
                       warmup=warmup, profile=profile)
    return Measured(size, tenant.stats, built, load, served)


def print_size(m: Measured) -> None:
    st, b, s = m.stats, m.built, m.served
    g = next(iter(b["graphs"].values()))
    sec = st["seconds"]
    nodes = ", ".join(f"{k} {v:,}" for k, v in sorted(st["nodes"].items(), key=lambda kv: -kv[1]))
    edges = ", ".join(f"{k} {v:,}" for k, v in sorted(st["edges"].items(), key=lambda kv: -kv[1]))
    print(f"\n== {m.size.label}: {m.size.nodes:,} nodes, {m.size.edges:,} edges")
    print(f"nodes: {nodes}")
    print(f"edges: {edges}")
    print(f"graph index: {g['vertices']:,} vertices, {g['edges']:,} edges (DERIVED_FROM → RawChunk left out); "
          f"{m.load['hubs']:,} hubs above degree {RecallConfig().hub_degree}")
    print(f"raw: {st['messages']:,} messages in {st['raw_chunks']:,} chunks ({st['raw_bytes'] / 2**20:.1f} MiB)")
    print(f"generate {sec['total']:.1f} s (chat {sec['chat']:.1f}, ingest+CAS {sec['ingest']:.1f}, "
          f"graph+Parquet {sec['graph']:.1f});  build_indexes {b['seconds']:.1f} s, peak RSS {b['rss_mib']:,.0f} MiB; "
          f"memory.duckdb {b['duckdb_mib']:.0f} MiB, graph pickle {b['graph_mib']:.1f} MiB")
    ld = m.load
    print(f"cold start {m.cold_start_s:.2f} s: first recall() in a fresh process {s['cold_ms']:.0f} ms − warm "
          f"{s['warmup_warm_ms']:.0f} ms (imports before it {s['import_s']:.2f} s, not counted)")
    print(f"  one by one: open DuckDB + FTS ext {ld['open_duckdb'] * 1000:.0f} ms, tenant info "
          f"{ld['tenant_info'] * 1000:.0f} ms, load_graph {ld['load_graph'] * 1000:.0f} ms, jieba dictionary "
          f"{ld['jieba_init'] * 1000:.0f} ms, first BM25 {ld['first_bm25'] * 1000:.0f} ms")
    rows = s["rows"]
    ms = m.ms
    print(f"warm recall() over {len(rows)} queries (k=10, expand_depth=1): p50 {pct(ms, 50):.1f} ms  "
          f"p95 {pct(ms, 95):.1f} ms  p99 {pct(ms, 99):.1f} ms  max {max(ms):.1f} ms  "
          f"mean {sum(ms) / len(ms):.1f} ms;  "
          f"peak RSS {s['rss_mib']:,.0f} MiB")
    busy = "n/a" if s["busy_cores"] is None else f"{s['busy_cores']:.2f}"
    print(f"  the loop: {s['loop_s']:.1f} s wall, {s['loop_cpu_s']:.1f} s CPU of the recall process "
          f"(DuckDB runs its own threads); machine busy cores {busy} of {os.cpu_count()}")
    print(f"  {'stage':<10}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'mean ms':>9}")
    for stage in (*stages_of(rows), "other"):
        xs = [r["ms"] - sum(r["stages"].values()) if stage == "other" else r["stages"].get(stage, 0.0) for r in rows]
        print(f"  {stage:<10}{pct(xs, 50):>9.1f}{pct(xs, 95):>9.1f}{pct(xs, 99):>9.1f}{sum(xs) / len(xs):>9.1f}")
    print(f"  {'kind':<10}{'n':>4}{'p50 ms':>9}{'p95 ms':>9}{'seeds':>7}{'reached':>9}{'results':>9}{'cited':>7}")
    for kind in dict.fromkeys(KIND_PATTERN):
        kr = [r for r in rows if r["kind"] == kind]
        if kr:
            km = [r["ms"] for r in kr]
            avg = lambda key: sum(r[key] for r in kr) / len(kr)  # noqa: E731
            print(f"  {kind:<10}{len(kr):>4}{pct(km, 50):>9.1f}{pct(km, 95):>9.1f}{avg('seeds'):>7.1f}"
                  f"{avg('reached'):>9.0f}{avg('results'):>9.1f}{avg('cited'):>7.1f}")
    hit = [r for r in rows if r["expect_hits"]]
    nohit = [r for r in rows if not r["expect_hits"]]
    print(f"hits: {sum(1 for r in hit if r['results'])}/{len(hit)} queries with hits returned results "
          f"({sum(1 for r in hit if r['cited'])} with citations); "
          f"{sum(1 for r in nohit if not r['results'])}/{len(nohit)} no-hit queries returned nothing")
    for name, key in (("build_indexes", b), ("warm recall() loop", s)):
        if key.get("profile"):
            print(f"\nprofile of {name} (cProfile, by own time):\n{key['profile']}")


def stages_of(rows: list[dict]) -> list[str]:
    """The traced stages, in the order recall() reports them (a stage skipped by one query counts 0 ms there)."""
    return list(dict.fromkeys(stage for r in rows for stage in r["stages"]))


def print_summary(done: list[Measured]) -> None:
    codes = {m.served["code"] for m in done}
    print("\n== summary" + (f" (recall sources {codes.pop()})" if len(codes) == 1 else
                            f" — WARNING: recall sources changed during the run: {sorted(codes)}"))
    print(f"{'size':<12}{'build s':>9}{'cold s':>8}{'p50 ms':>8}{'p95 ms':>8}{'p99 ms':>8}{'RSS MiB':>9}"
          f"{'seeds p95':>10}{'expand p95':>11}{'cite p95':>9}")
    for m in done:
        rows = m.served["rows"]
        sp = {k: pct([r["stages"].get(k, 0.0) for r in rows], 95) for k in ("seeds", "expand", "cite")}
        print(f"{m.size.label:<12}{m.built['seconds']:>9.1f}{m.cold_start_s:>8.2f}{pct(m.ms, 50):>8.1f}"
              f"{pct(m.ms, 95):>8.1f}{pct(m.ms, 99):>8.1f}{m.served['rss_mib']:>9,.0f}{sp['seeds']:>10.1f}"
              f"{sp['expand']:>11.1f}{sp['cite']:>9.1f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=parse_size, nargs="+", default=[parse_size(s) for s in DEFAULT_SIZES],
                    help="NODES:EDGES per tenant, e.g. 10k:100k 100k:1M (default: %s)" % " ".join(DEFAULT_SIZES))
    ap.add_argument("--queries", type=int, default=200, help="queries per size (default 200)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--keep", type=Path, help="build the lakes here and keep them (default: a temp dir)")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="also profile (cProfile) a second build and a second pass over the queries, after "
                         "the measured ones, and print where the time goes plus the top N functions")
    args = ap.parse_args(argv)
    if args.queries < 1:
        ap.error("--queries must be at least 1")

    work = args.keep or Path(tempfile.mkdtemp(prefix="memctl_bench_recall_"))
    done = []
    try:
        for size in sorted(args.sizes, key=lambda s: (s.edges, s.nodes)):
            root = work / f"lake_{size.nodes}_{size.edges}"
            shutil.rmtree(root, ignore_errors=True)
            m = measure_size(size, args.seed, args.queries, root, args.profile)
            print_size(m)
            done.append(m)
            sys.stdout.flush()
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    print_summary(done)
    last = done[-1]
    print(f"p95_ms={pct(last.ms, 95):.1f} p50_ms={pct(last.ms, 50):.1f} cold_start_s={last.cold_start_s:.2f} "
          f"nodes={last.size.nodes} edges={last.size.edges}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
