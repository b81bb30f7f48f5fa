"""Recall latency bench, part 1: the synthetic tenant's vocabularies, sizes, data classes and queries.

bench/recall_latency.py documents the whole bench; bench/latency_tenant.py generates the tenant.
"""

from __future__ import annotations

import argparse
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

TENANT = "bench"
USER = "Alex Morgan"  # the tenant's own speaker: in every conversation, so the largest hub
DEFAULT_SIZES = ("10k:100k", "30k:300k", "100k:1M")
CONVS_PER_FILE = 12
ZH_SHARE = 0.06  # share of Chinese conversations
ZIPF_S = 1.07  # word and entity popularity exponent
PROVENANCE = "bench.recall_latency.v1"  # marks every row as synthetic

# Node mix (share of all nodes); Facts take the rest.
EPISODE_SHARE, ENTITY_SHARE, CONCEPT_SHARE = 0.50, 0.15, 0.01
ENTITY_MIX = (("PERSON", 0.30), ("LOC", 0.20), ("OBJECT", 0.40), ("TIME", 0.10))
ZH_ENTITY_SHARE = 0.08

EDGE_WEIGHT = {
    "MENTIONS": 0.95,
    "AGENT": 0.8,
    "PATIENT": 0.85,
    "LOCATION": 0.85,
    "TIME": 0.9,
    "ABOUT": 0.7,
    "TEMPORAL_NEXT": 1.0,
    "DERIVED_FROM": 1.0,
}

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
EN_VERBS = (
    ("visited", "visit"),
    ("bought", "buy"),
    ("painted", "paint"),
    ("fixed", "fix"),
    ("borrowed", "borrow"),
    ("cooked", "cook"),
    ("watched", "watch"),
    ("photographed", "photograph"),
    ("cleaned", "clean"),
    ("ordered", "order"),
    ("planted", "plant"),
    ("repaired", "repair"),
    ("booked", "book"),
    ("sold", "sell"),
    ("found", "find"),
    ("lost", "lose"),
    ("carried", "carry"),
    ("packed", "pack"),
    ("shared", "share"),
    ("recommended", "recommend"),
    ("returned", "return"),
    ("sketched", "sketch"),
    ("rented", "rent"),
)
EN_GLUE = "the a and with to for my our some really so very it was then after near of".split()
EN_FUNCTION = frozenset(EN_GLUE) | {"i", "at", "this", "last", "two", "ago"}  # never a keyword or query word
EN_WHEN = (
    ("yesterday", 1, "day"),
    ("today", 0, "day"),
    ("this morning", 0, "day"),
    ("last night", 1, "day"),
    ("two days ago", 2, "day"),
    ("last week", 7, "week"),
    ("last month", 30, "month"),
)
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
ZH_VERBS = (
    ("买了", "买"),
    ("看了", "看"),
    ("修了", "修"),
    ("借了", "借"),
    ("做了", "做"),
    ("拍了", "拍"),
    ("送了", "送"),
    ("找到了", "找到"),
    ("带了", "带"),
    ("卖了", "卖"),
    ("订了", "订"),
)
ZH_GLUE = ("和", "的", "很", "也", "还", "就", "都")
ZH_WHEN = (
    ("昨天", 1, "day"),
    ("今天", 0, "day"),
    ("前天", 2, "day"),
    ("今天早上", 0, "day"),
    ("上周", 7, "week"),
    ("上个月", 30, "month"),
)
ZH_SURNAMES = "王李张刘陈杨赵黄周吴徐孙马朱胡郭何林高罗梁宋唐许韩冯邓曹彭曾"
ZH_GIVEN = "芳伟娜洋静帆磊敏杰婷强丽超琳军平涛飞欣斌佳亮明红华勇艳霞刚辉"
ZH_CITIES = (
    "北京 上海 杭州 成都 广州 深圳 南京 西安 武汉 苏州 重庆 天津 青岛 厦门 长沙 昆明 大连 宁波 合肥 郑州".split()
)
ZH_LOC_SUFFIXES = "公园 广场 商场 图书馆 咖啡馆 博物馆 体育馆 火车站 菜市场 书店 医院 大学 湖 山 海边".split()
ZH_OBJ_ADJECTIVES = "红色 蓝色 白色 黑色 绿色 二手 木头 旧 新 小 大 折叠 复古 手工".split()
ZH_OBJ_NOUNS = (
    "自行车 相机 吉他 书包 雨伞 外套 手表 台灯 沙发 书桌 水杯 茶壶 帐篷 滑板 耳机 音箱 毛衣 围巾 钱包 行李箱".split()
)
ZH_ASK = ("什么时候去", "在哪里", "和谁一起", "为什么喜欢")

_CONS, _VOWELS = "bdfgklmnprstvz", "aeiou"
_NOHIT_CONS = "qxjwy"  # letters pseudo-words never use: queries made of them have no hits


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
            acc += k**-s
            self.cum.append(acc)

    def draw(self, r: random.Random, k: int = 1) -> list:
        return r.choices(self.items, cum_weights=self.cum, k=k)


def pseudo_words(n: int, r: random.Random, avoid: set[str]) -> list[str]:
    """`n` distinct pronounceable non-words of 2–4 syllables (no q/x/j/w/y), none in `avoid`."""
    out: dict[str, None] = {}
    while len(out) < n:
        w = "".join(
            r.choice(_CONS) + r.choice(_VOWELS) + (r.choice(_CONS) if r.random() < 0.3 else "")
            for _ in range(r.choice((2, 2, 3, 3, 4)))
        )
        if len(w) >= 4 and w not in avoid:
            out[w] = None
    return list(out)


def nohit_word(r: random.Random) -> str:
    return "".join(r.choice(_NOHIT_CONS) + r.choice(_VOWELS) for _ in range(3))


def _unique_combos(n: int, heads: list[str], tails: list[str], joiner: str, r: random.Random, more_tails) -> list[str]:
    """`n` distinct `head + joiner + tail` names; `more_tails(k)` adds tails when the product is too small."""
    tails = list(tails)
    if len(heads) * len(tails) < n:
        tails += more_tails(-(-n // len(heads)) - len(tails))
    picks = r.sample(range(len(heads) * len(tails)), n)
    return [heads[i % len(heads)] + joiner + tails[i // len(heads)] for i in picks]


@dataclass(eq=False)  # one object per entity: compared and hashed by identity
class Entity:
    id: str
    subtype: str
    title: str
    lang: str
    keywords: list[str]
    time: datetime | None = None
    refs: list[dict] = field(default_factory=list)
    seen: list[datetime] = field(default_factory=list)  # [first, last]
    mentions: int = 0


@dataclass
class Clause:
    start: int  # character span in the turn text
    end: int
    agent: Entity
    verb: str  # lemma
    obj: str  # what the verb acts on: the patient's title, or a plain word
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
    words: list[str]  # content words, in order
    names: list[tuple[Entity, int, int]]  # entity, character span
    clauses: list[Clause]
    ref: dict | None = None  # the message's raw_ref after ingest


@dataclass
class Corpus:
    """What queries are drawn from."""

    turns: list[Turn]
    entities: dict[str, list[Entity]]  # "en" / "zh" → named entities (no TIME)
    popular: list[Entity]  # the most mentioned entities
    vocab: list[str]  # English words by Zipf rank
    counts: Counter


@dataclass
class Tenant:
    size: Size
    corpus: Corpus
    stats: dict


# ---------------------------------------------------------------- queries

KIND_PATTERN = (
    "frequent",
    "multi",
    "entity",
    "rare",
    "question",
    "multi",
    "hub",
    "zh",
    "frequent",
    "rare",
    "multi",
    "entity",
    "question",
    "rare",
    "zh",
    "multi",
    "entity",
    "frequent",
    "nohit",
    "rare",
)


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
