#!/usr/bin/env python3
"""Ingest speed: raw spaCy `nlp.pipe` against the full chunk → NLP → R2G → Parquet path, in one run.

Generates a deterministic synthetic chat corpus (seeded; English and Chinese
conversations of 50–300 turns, several speakers, names, places, relative times,
causes, preferences and plans built from templates × vocabularies, so ~98 % of the
texts are distinct and the text-hash NLP cache cannot inflate the figures), writes
it as canonical JSONL inbox files (~2,000 messages each) in a temp dir, then measures

  (a) raw spaCy  the pipeline objects `r2g.nlp.annotate` uses (`pipeline_for(lang)`),
                 `nlp.pipe` over the same texts, language by language, docs dropped:
                 in 1 process; with W processes both as spaCy's `n_process=W`
                 (docs come back to the parent) and as W processes each piping 1/W
                 of the texts (nothing comes back: the ceiling on W cores).
  (b) pipeline   per inbox file, end to end: read + ingest_bytes (parse, chunk,
                 CAS) → annotate_messages (a fresh, empty NlpCache) → the
                 annotations written to and read back from the partition's
                 Parquet (Dagster's file_annotations → file_graph hand-over) →
                 partition_graph (build_graph + fact links) → Parquet (messages,
                 raw_chunks, nodes, edges): in 1 process; with W processes as
                 "files" (files spread over W processes, as Dagster runs one
                 partition per file) and as "annotate" (1 process, annotate's own
                 pool of W workers, R2G in the parent).

The runs are interleaved: the files are cut into rounds (default 4) and every run
does round 1, then every run round 2, …, so a drift in machine speed hits all of
them alike. Each run starts each round with a cold jieba HMM memo in every process
it uses; models are loaded and worker processes started before the clock starts.
Each row shows the machine's busy cores while it ran (all processes, /proc/stat):
~1.0 for a clean 1-process row, up to 2.0 with 2 processes; more means the machine
was shared and the row is not to be trusted.
Words are whitespace tokens for English and jieba tokens (`jieba.lcut`, spaces and
punctuation left out) for Chinese. The last line is always
`ratio pipeline/raw_spacy=0.xx messages=N`: (b)'s best messages/s over (a)'s best
messages/s, each at its best process count.

Usage: python bench/ingest.py [--messages 100000] [--seed 7] [--zh-share 0.5] [--workers 1 2]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from multiprocessing import get_context
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import cpu_busy_seconds  # noqa: E402
from r2g.nlp import (  # noqa: E402
    english,
    pipeline_for,
    shutdown_workers,
    single_thread_blas,
    worker_pool,
)
from r2g.nlp_cache import NlpCache  # noqa: E402
from r2g.nlp_zh import chinese, clear_hmm_memo, hmm_memo_stats  # noqa: E402
from r2g.pipeline import annotate_messages, annotations_from_table, annotations_table, partition_graph  # noqa: E402
from r2g.schema import ANNOTATIONS, EDGES, NODES  # noqa: E402
from raw_store.cas import RawStore  # noqa: E402
from raw_store.ingest import ingest_bytes  # noqa: E402
from raw_store.lake import read_table, write_table  # noqa: E402
from raw_store.schema import MESSAGES, RAW_CHUNKS  # noqa: E402

TENANT = "bench"
CONVS_PER_FILE = 12      # ~2,000 messages per inbox file (a typical export)
BATCH_SIZE = 256         # nlp.pipe batch size, annotate's default (64–1000 measured within ±4 %)
STAGES = ("chunk", "nlp", "annotations", "r2g", "parquet")

# ---------------------------------------------------------------- vocabularies

EN_NAMES = ["Caroline", "Melanie", "Jon", "Gina", "Sam", "Evan", "Priya", "Tom", "Aisha", "Marco", "Lena", "Jake",
            "Nina", "Omar", "Rosa", "Dave", "Chloe", "Hiro", "Fatima", "Leo", "Grace", "Ivan", "Maya", "Ben",
            "Sofia", "Raj", "Emma", "Noah", "Zoe", "Carlos", "Hannah", "Ethan", "Julia", "Kenji", "Olivia", "Mateo"]
EN_PLACES = ["the park", "Central Park", "the library", "the gym", "Boston", "Seattle", "Paris", "the beach",
             "the office", "the mall", "Golden Gate Park", "the museum", "Chicago", "the farmers market", "the lake",
             "Mount Tam", "the cafe on Main Street", "Tokyo", "the community center", "the airport", "London",
             "the hospital", "the campus", "the support group", "Lisbon", "the bakery", "the river trail", "Denver"]
EN_TIMES = ["yesterday", "last Saturday", "last week", "this morning", "tonight", "two days ago", "last night",
            "on Sunday", "last month", "this weekend", "yesterday afternoon", "on Friday", "last summer",
            "three weeks ago", "this afternoon", "last Tuesday", "earlier today", "a few days ago"]
EN_FUTURE = ["tomorrow", "next week", "next Saturday", "on Monday", "this Friday", "next month", "tomorrow morning",
             "later tonight", "next weekend", "in two weeks", "on Thursday", "next summer"]
EN_ACTIVITIES = ["went hiking", "played football", "went swimming", "watched a movie", "baked bread",
                 "painted a landscape", "went to a concert", "read a novel", "went camping", "ran five miles",
                 "cooked dinner", "visited my parents", "went shopping", "played chess", "went fishing",
                 "took photos", "went to a pottery class", "played the guitar", "volunteered", "went skiing",
                 "had a picnic", "went to a yoga class", "rode my bike", "studied for the exam"]
EN_PLANS = ["finish the report", "call my mom", "buy groceries", "book the flights", "fix the car",
            "clean the apartment", "renew my passport", "pick up the kids", "prepare the presentation",
            "pay the rent", "water the plants", "walk the dog", "sign up for the marathon", "send the invoice",
            "meet the landlord", "repaint the fence", "return the library books", "schedule a dentist appointment"]
EN_LIKES = ["hiking", "spicy food", "jazz", "old movies", "gardening", "board games", "photography", "sushi",
            "rainy days", "running", "poetry", "dumplings", "classical music", "painting", "coffee", "camping",
            "chess", "science fiction", "baking", "cycling", "green tea", "horror films", "karaoke", "pottery"]
EN_FEELINGS = ["tired", "happy", "stressed", "excited", "nervous", "relaxed", "sad", "proud", "grateful", "bored",
               "anxious", "thrilled", "exhausted", "calm"]
EN_REASONS = ["I didn't sleep well", "the meeting ran late", "it was raining all day", "my sister visited",
              "I got a promotion", "the train was delayed", "I finished my project", "my back hurts",
              "the weather was perfect", "I lost my keys", "we won the game", "the deadline moved",
              "my friend called", "I worked overtime", "the kids were sick", "I started a new job"]
EN_THINGS = ["a new camera", "a blue bike", "some flowers", "a book about birds", "concert tickets", "a puppy",
             "a guitar", "new running shoes", "a plant", "a painting", "a laptop", "a cookbook", "a kite"]
EN_OPENERS = ["", "", "", "Hey, ", "Oh, ", "Well, ", "Honestly, ", "Haha, ", "So ", "Guess what, ", "Actually, "]
EN_REPLIES = ["That sounds great!", "Wow, really?", "I'm so happy for you.", "That's tough, sorry to hear.",
              "Tell me more!", "How was it?", "Nice, I should try that.", "Same here.", "No way!",
              "That makes sense.", "Good luck with that.", "I remember that place.", "Send me photos!"]

ZH_NAMES = ["小明", "小红", "小李", "王芳", "张伟", "李娜", "刘洋", "陈静", "杨帆", "赵磊", "黄敏", "周杰", "吴婷",
            "徐强", "孙丽", "马超", "朱琳", "胡军", "郭靖", "何平", "林涛", "高飞", "罗欣", "梁斌", "宋佳", "唐亮"]
ZH_PLACES = ["公园", "北京", "上海", "图书馆", "超市", "学校", "公司", "医院", "杭州", "成都", "海边", "咖啡馆",
             "健身房", "电影院", "广州", "深圳", "西湖", "博物馆", "商场", "体育馆", "南京", "餐厅", "山上", "家里"]
ZH_TIMES = ["昨天", "上周六", "昨天晚上", "前天", "上个月", "今天早上", "上周", "昨晚", "周末", "三天前",
            "上周日", "去年夏天", "今天下午", "前几天", "上周五", "刚才"]
ZH_FUTURE = ["明天", "下周", "下周六", "后天", "明天早上", "下个月", "周一", "今晚", "下周末", "明年"]
ZH_ACTIVITIES = ["踢足球", "打篮球", "爬山", "看电影", "喝咖啡", "吃火锅", "跑步", "游泳", "逛街", "钓鱼",
                 "打羽毛球", "看书", "学英语", "弹钢琴", "画画", "骑自行车", "唱歌", "做饭", "拍照", "滑雪",
                 "买菜", "写代码", "打游戏", "看展览"]
ZH_PLANS = ["交报告", "给妈妈打电话", "买菜", "订机票", "修车", "打扫房间", "办护照", "接孩子", "准备演讲",
            "交房租", "浇花", "遛狗", "报名马拉松", "发邮件", "见房东", "还书", "去看牙医", "复习功课"]
ZH_LIKES = ["爬山", "吃辣", "听爵士乐", "看老电影", "种花", "下棋", "摄影", "吃寿司", "下雨天", "跑步", "读诗",
            "吃饺子", "听古典音乐", "画画", "喝茶", "露营", "看科幻小说", "烤面包", "骑车", "唱卡拉OK"]
ZH_FEELINGS = ["很累", "很开心", "压力很大", "特别兴奋", "有点紧张", "很放松", "不开心", "很骄傲", "很感激",
               "有点无聊", "很焦虑", "很满足"]
ZH_REASONS = ["昨晚没睡好", "会议开得太晚", "下了一整天雨", "姐姐来看我", "我升职了", "火车晚点了", "项目做完了",
              "腰疼", "天气特别好", "钥匙丢了", "我们赢了比赛", "截止日期推迟了", "朋友打电话来", "加班到很晚",
              "孩子生病了", "换了新工作"]
ZH_THINGS = ["一台相机", "一辆自行车", "一束花", "一本书", "两张演唱会的票", "一只小狗", "一把吉他", "一双跑鞋",
             "一盆绿植", "一幅画", "一台电脑", "一本菜谱"]
ZH_OPENERS = ["", "", "", "哈哈，", "对了，", "其实", "说真的，", "嗯，", "唉，", "你知道吗，"]
ZH_REPLIES = ["听起来不错！", "真的吗？", "太好了，替你高兴。", "辛苦了。", "然后呢？", "好玩吗？", "我也想去。",
              "我也是。", "不会吧！", "有道理。", "加油！", "我记得那个地方。", "发照片给我看看！"]


def _en_turn(r: random.Random, speakers: list[str]) -> str:
    name, other = r.choice(EN_NAMES), r.choice(speakers)
    kind = r.randrange(10)
    if kind == 0:
        s = f"I {r.choice(EN_ACTIVITIES)} at {r.choice(EN_PLACES)} {r.choice(EN_TIMES)}."
    elif kind == 1:
        s = f"{name} {r.choice(EN_ACTIVITIES)} with {r.choice(EN_NAMES)} in {r.choice(EN_PLACES)} {r.choice(EN_TIMES)}."
    elif kind == 2:
        s = f"I'm {r.choice(EN_FEELINGS)} {r.choice(['today', 'right now', 'this week', 'tonight'])} because {r.choice(EN_REASONS)}."
    elif kind == 3:
        tail = r.choice([", especially on weekends", f" more than {r.choice(EN_LIKES)}", " since I was a kid",
                         f" with {r.choice(EN_NAMES)}", f" at {r.choice(EN_PLACES)}", f", {r.choice(EN_NAMES)} too"])
        s = f"I {r.choice(['love', 'really like', 'prefer', 'hate', 'enjoy'])} {r.choice(EN_LIKES)}{tail}."
    elif kind == 4:
        s = f"I need to {r.choice(EN_PLANS)} {r.choice(EN_FUTURE)}{r.choice(['', ' before ' + str(r.randint(1, 11)) + ' pm'])}."
    elif kind == 5:
        s = f"{other}, did you {r.choice(['see', 'meet', 'call', 'text'])} {name} {r.choice(EN_TIMES)}?"
    elif kind == 6:
        s = f"{r.choice(EN_REPLIES)} " + r.choice([f"I bought {r.choice(EN_THINGS)} {r.choice(EN_TIMES)}.",
                                                  f"Say hi to {name} for me.", f"See you {r.choice(EN_FUTURE)}, {other}."])
    elif kind == 7:
        s = f"We are going to {r.choice(EN_PLACES)} {r.choice(EN_FUTURE)} so I can't {r.choice(EN_PLANS)}."
    elif kind == 8:
        s = f"{name} gave me {r.choice(EN_THINGS)} {r.choice(EN_TIMES)}, it took {r.randint(2, 90)} minutes to get home."
    else:
        s = f"From now on please remind me to {r.choice(EN_PLANS)} every {r.choice(['morning', 'week', 'Monday', 'evening'])}" \
            f" at {r.randint(6, 10)}:{r.choice(['00', '15', '30', '45'])}."
    opener = r.choice(EN_OPENERS)
    if opener and s.startswith(("From", "We")):  # "Well, from now on…"; names and "I" keep their capital
        s = s[0].lower() + s[1:]
    s = opener + s
    if r.random() < 0.6:
        s += " " + r.choice([f"I was so {r.choice(EN_FEELINGS)}.", f"{r.choice(EN_REPLIES)} {r.choice(EN_REPLIES)}",
                             f"Maybe {r.choice(EN_NAMES)} will join {r.choice(EN_FUTURE)}.",
                             f"It cost {r.randint(5, 300)} dollars.",
                             f"{r.choice(EN_NAMES)} said {r.choice(EN_PLACES)} was "
                             f"{r.choice(['crowded', 'lovely', 'closed', 'packed', 'quiet'])}.",
                             f"I {r.choice(EN_ACTIVITIES)} {r.choice(EN_TIMES)} too."])
    return s.strip()


def _zh_turn(r: random.Random, speakers: list[str]) -> str:
    name, other = r.choice(ZH_NAMES), r.choice(speakers)
    kind = r.randrange(10)
    if kind == 0:
        s = f"我{r.choice(ZH_TIMES)}在{r.choice(ZH_PLACES)}{r.choice(ZH_ACTIVITIES)}。"
    elif kind == 1:
        s = f"{name}{r.choice(ZH_TIMES)}和{r.choice(ZH_NAMES)}去{r.choice(ZH_PLACES)}{r.choice(ZH_ACTIVITIES)}了。"
    elif kind == 2:
        s = f"我{r.choice(['今天', '这几天', '这周', '现在'])}{r.choice(ZH_FEELINGS)}，因为{r.choice(ZH_REASONS)}。"
    elif kind == 3:
        tail = r.choice(["，尤其是周末", f"，比{r.choice(ZH_LIKES)}好多了", "，从小就这样",
                         f"，{r.choice(ZH_NAMES)}也是", f"，常和{r.choice(ZH_NAMES)}一起"])
        s = f"我{r.choice(['喜欢', '很喜欢', '讨厌', '最爱', '不喜欢'])}{r.choice(ZH_LIKES)}{tail}。"
    elif kind == 4:
        s = (f"我{r.choice(ZH_FUTURE)}要{r.choice(ZH_PLANS)}"
             f"{r.choice(['', '，' + str(r.randint(1, 11)) + '点之前', '，' + r.choice(ZH_FEELINGS)])}。")
    elif kind == 5:
        s = f"{other}，你{r.choice(ZH_TIMES)}{r.choice(['见到', '碰到', '联系', '找过'])}{name}了吗？"
    elif kind == 6:
        s = r.choice(ZH_REPLIES) + r.choice([f"我{r.choice(ZH_TIMES)}买了{r.choice(ZH_THINGS)}。",
                                             f"替我向{name}问好。", f"{other}，{r.choice(ZH_FUTURE)}见。"])
    elif kind == 7:
        s = f"我们{r.choice(ZH_FUTURE)}去{r.choice(ZH_PLACES)}，所以没法{r.choice(ZH_PLANS)}了。"
    elif kind == 8:
        s = f"{name}{r.choice(ZH_TIMES)}送了我{r.choice(ZH_THINGS)}，回家花了{r.randint(2, 90)}分钟。"
    else:
        s = (f"以后{r.choice(['每天早上', '每周', '每个周一', '晚上'])}{r.randint(6, 10)}点"
             f"{r.choice(['', '半', '一刻', '十分'])}提醒我{r.choice(ZH_PLANS)}。")
    s = r.choice(ZH_OPENERS) + s
    if r.random() < 0.6:
        s += r.choice([f"我{r.choice(ZH_FEELINGS)}。", r.choice(ZH_REPLIES) + r.choice(ZH_REPLIES),
                       f"也许{r.choice(ZH_NAMES)}{r.choice(ZH_FUTURE)}也来。", f"花了{r.randint(5, 300)}块钱。",
                       f"{r.choice(ZH_NAMES)}说{r.choice(ZH_PLACES)}{r.choice(['人很多', '很漂亮', '关门了', '很安静'])}。",
                       f"我{r.choice(ZH_TIMES)}也{r.choice(ZH_ACTIVITIES)}了。"])
    return s


@dataclass
class Corpus:
    files: list[tuple[str, bytes]]           # (source_file, canonical JSONL bytes)
    file_texts: list[dict[str, list[str]]]   # per file: lang → its message texts, in file order

    def texts_of(self, indices: Sequence[int] | None = None) -> dict[str, list[str]]:
        """lang → texts of the given files (default: all), in file order."""
        out: dict[str, list[str]] = {"en": [], "zh": []}
        for i in range(len(self.files)) if indices is None else indices:
            for lang, ts in self.file_texts[i].items():
                out[lang].extend(ts)
        return out

    @property
    def texts(self) -> dict[str, list[str]]:
        return self.texts_of()

    @property
    def n_messages(self) -> int:
        return sum(len(ts) for ft in self.file_texts for ts in ft.values())


def generate_corpus(n_messages: int, seed: int = 7, zh_share: float = 0.5,
                    convs_per_file: int = CONVS_PER_FILE) -> Corpus:
    """Exactly `n_messages` chat turns in conversations of 50–300 turns, as canonical JSONL files (deterministic)."""
    r = random.Random(seed)
    texts: dict[str, list[str]] = {"en": [], "zh": []}
    files: list[tuple[str, bytes]] = []
    file_texts: list[dict[str, list[str]]] = []
    lines: list[bytes] = []
    conv_no = done = 0
    while done < n_messages:
        lang = "zh" if r.random() < zh_share else "en"
        names = ZH_NAMES if lang == "zh" else EN_NAMES
        speakers = r.sample(names, r.randint(2, 4))
        n_turns = min(r.randint(50, 300), n_messages - done)
        ts = datetime(2023, 1, 1) + timedelta(minutes=r.randrange(2 * 365 * 24 * 60))
        conv_id = f"conv{conv_no:05d}"
        turn = _zh_turn if lang == "zh" else _en_turn
        for k in range(n_turns):
            ts += timedelta(seconds=r.randint(5, 1800)) if r.random() > 0.03 else timedelta(days=r.randint(1, 6))
            text = turn(r, speakers)
            texts[lang].append(text)
            lines.append(json.dumps({"conv_id": conv_id, "msg_id": f"m{k}", "speaker": r.choice(speakers),
                                     "role": "user", "ts": ts.isoformat(), "text": text},
                                    ensure_ascii=False).encode("utf-8"))
        done += n_turns
        conv_no += 1
        if conv_no % convs_per_file == 0 or done >= n_messages:
            files.append((f"{TENANT}/chat_{len(files):04d}.jsonl", b"\n".join(lines) + b"\n"))
            file_texts.append(texts)
            lines, texts = [], {"en": [], "zh": []}
    return Corpus(files, file_texts)


def write_inbox(corpus: Corpus, inbox: Path) -> list[Path]:
    paths = []
    for source_file, data in corpus.files:
        path = inbox / source_file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        paths.append(path)
    return paths


def corpus_sha256(corpus: Corpus) -> str:
    h = hashlib.sha256()
    for source_file, data in corpus.files:
        h.update(source_file.encode("utf-8") + b"\0" + data)
    return h.hexdigest()


_PUNCT_OR_SPACE = re.compile(r"^[\W_]+$")


def word_counts(corpus: Corpus) -> dict[str, int]:
    """Whitespace tokens of the English texts; jieba.lcut tokens of the Chinese ones, spaces/punctuation left out."""
    import jieba

    return {"en": sum(len(t.split()) for t in corpus.texts["en"]),
            "zh": sum(1 for t in corpus.texts["zh"] for w in jieba.lcut(t) if not _PUNCT_OR_SPACE.match(w))}


# ---------------------------------------------------------------- worker processes

def _warm_worker() -> None:
    """Pool initializer: one BLAS thread, both pipelines loaded and run once, HMM memo emptied."""
    single_thread_blas()
    english()("Warm up.")
    chinese()("热身。")
    clear_hmm_memo()


def _ping(action: str) -> int:
    if action == "warm":
        _warm_worker()
    elif action == "clear":
        clear_hmm_memo()
    time.sleep(0.3)
    return os.getpid()


def _each_worker(pool: ProcessPoolExecutor, workers: int, action: str = "") -> None:
    """Return once every worker of `pool` has started and run _ping(action) ("warm", "clear" or "")."""
    seen: set[int] = set()
    for _ in range(50):
        seen.update(f.result() for f in [pool.submit(_ping, action) for _ in range(workers)])
        if len(seen) >= workers:
            return


def warm_pool(workers: int) -> ProcessPoolExecutor:
    """A spawn pool whose `workers` processes have all loaded both pipelines."""
    pool = ProcessPoolExecutor(workers, mp_context=get_context("spawn"), initializer=_warm_worker)
    _each_worker(pool, workers)
    return pool


# ---------------------------------------------------------------- (a) raw spaCy

def _pipe_count(lang: str, texts: list[str], batch_size: int = BATCH_SIZE) -> int:
    return sum(1 for _ in pipeline_for(lang).pipe(texts, batch_size=batch_size))


def raw_spacy(texts: dict[str, list[str]], workers: int, mode: str, pool: ProcessPoolExecutor | None) -> dict[str, float]:
    """Seconds per language to nlp.pipe `texts`; mode "1" (here), "n_process" (spaCy's) or "split" (over `pool`)."""
    out: dict[str, float] = {}
    for lang in ("en", "zh"):
        ts = texts[lang]
        t0 = time.perf_counter()
        if not ts:
            pass
        elif mode == "1":
            _pipe_count(lang, ts)
        elif mode == "n_process":
            sum(1 for _ in pipeline_for(lang).pipe(ts, batch_size=BATCH_SIZE, n_process=workers))
        else:
            step = -(-len(ts) // workers)
            futures = [pool.submit(_pipe_count, lang, ts[k:k + step]) for k in range(0, len(ts), step)]
            assert sum(f.result() for f in futures) == len(ts)
        out[lang] = time.perf_counter() - t0
    return out


# ---------------------------------------------------------------- (b) full pipeline

def run_file(path: str, root: str, annotate_workers: int = 1) -> dict[str, float]:
    """One inbox file through read+chunk → NLP → R2G → Parquet under `root`; seconds per stage, counts."""
    t0 = time.perf_counter()
    data = Path(path).read_bytes()
    ing = ingest_bytes(data, f"{TENANT}/{Path(path).name}", TENANT, RawStore(Path(root)))
    t1 = time.perf_counter()
    annotations, stats = annotate_messages(ing.messages, NlpCache(Path(root) / "cache" / "nlp.sqlite"),
                                           workers=annotate_workers)
    t2 = time.perf_counter()
    # as in Dagster: file_annotations stores them with the partition, file_graph (another step) reads them back
    part = Path(root) / "lake" / "parts" / Path(path).stem
    part.mkdir(parents=True, exist_ok=True)
    write_table(annotations_table(annotations), part / "annotations.parquet", ANNOTATIONS)
    annotations = annotations_from_table(read_table(part / "annotations.parquet", ANNOTATIONS))
    t2a = time.perf_counter()
    nodes, edges = partition_graph(ing.messages, annotations)
    t3 = time.perf_counter()
    write_table(ing.messages, part / "messages.parquet", MESSAGES)
    write_table(ing.raw_chunks, part / "raw_chunks.parquet", RAW_CHUNKS)
    write_table(nodes, part / "nodes.parquet", NODES)
    write_table(edges, part / "edges.parquet", EDGES)
    t4 = time.perf_counter()
    return {"chunk": t1 - t0, "nlp": t2 - t1, "annotations": t2a - t2, "r2g": t3 - t2a, "parquet": t4 - t3,
            "messages": ing.messages.num_rows, "nlp_misses": stats.misses, "nodes": nodes.num_rows,
            "edges": edges.num_rows}


def lake_sha256(root: Path) -> str:
    """sha256 over the partition Parquet files (name + bytes): equal runs write equal lakes."""
    h = hashlib.sha256()
    for p in sorted((root / "lake" / "parts").rglob("*.parquet")):
        h.update(str(p.relative_to(root)).encode("utf-8") + b"\0" + p.read_bytes())
    return h.hexdigest()


def pipeline(paths: list[Path], workers: int, mode: str, root: Path,
             pool: ProcessPoolExecutor | None) -> list[dict[str, float]]:
    """(b) over `paths` into the lake at `root`; mode "1" (here), "files" (over `pool`) or "annotate" (annotate's pool)."""
    if mode == "files":  # largest first: fewer idle workers at the end of a round
        order = sorted(paths, key=lambda p: -p.stat().st_size)
        return list(pool.map(run_file, [str(p) for p in order], [str(root)] * len(order)))
    return [run_file(str(p), str(root), workers if mode == "annotate" else 1) for p in paths]


# ---------------------------------------------------------------- runs

@dataclass
class Run:
    """One measured configuration, accumulated over the rounds."""
    kind: str        # "a" raw spaCy | "b" pipeline
    workers: int
    mode: str        # a: 1 | n_process | split;  b: 1 | files | annotate
    seconds: float = 0.0
    busy: float | None = 0.0
    by_lang: dict[str, float] = field(default_factory=lambda: {"en": 0.0, "zh": 0.0})
    stages: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(("messages", "nlp_misses", "nodes", "edges"), 0))
    root: Path | None = None
    memo: list[int] = field(default_factory=lambda: [0, 0])   # HMM memo hits, misses (runs in this process)

    @property
    def label(self) -> str:
        if self.workers == 1:
            return "1 process"
        return {"n_process": f"n_process={self.workers}", "split": f"{self.workers} processes split",
                "files": f"{self.workers} processes (files)", "annotate": f"annotate pool {self.workers}"}[self.mode]


def plan(counts: list[int]) -> list[Run]:
    runs = []
    for w in counts:
        runs += [Run("a", w, "1" if w == 1 else "n_process")] + ([Run("a", w, "split")] if w > 1 else [])
        runs += [Run("b", w, "1" if w == 1 else "files")] + ([Run("b", w, "annotate")] if w > 1 else [])
    return runs


def measure(corpus: Corpus, paths: list[Path], runs: list[Run], rounds: int, work: Path) -> None:
    """Every run over every round's files, run after run, round after round (a drift in machine speed hits all alike).

    Each run starts with a cold HMM memo in every process it uses; model loading and
    worker start-up happen before the first round and are not timed.
    """
    pools = {w: warm_pool(w) for w in {r.workers for r in runs if r.mode in ("split", "files")}}
    for r in runs:
        if r.mode == "annotate":
            _each_worker(worker_pool(r.workers), r.workers, "warm")
        if r.kind == "b":
            r.root = work / f"lake_{r.mode}_{r.workers}"
            shutil.rmtree(r.root, ignore_errors=True)
            r.root.mkdir(parents=True)
    size = -(-len(paths) // rounds)
    try:
        for k in range(0, len(paths), size):
            idx = list(range(k, min(k + size, len(paths))))
            texts = corpus.texts_of(idx)
            for r in runs:
                pool = pools.get(r.workers)
                clear_hmm_memo()
                if r.mode in ("split", "files"):
                    _each_worker(pool, r.workers, "clear")
                elif r.mode == "annotate":
                    _each_worker(worker_pool(r.workers), r.workers, "clear")
                b0, t0 = cpu_busy_seconds(), time.perf_counter()
                if r.kind == "a":
                    for lang, sec in raw_spacy(texts, r.workers, r.mode, pool).items():
                        r.by_lang[lang] += sec
                else:
                    for row in pipeline([paths[i] for i in idx], r.workers, r.mode, r.root, pool):
                        for key in STAGES:
                            r.stages[key] += row[key]
                        for key in r.counts:
                            r.counts[key] += int(row[key])
                t1, b1 = time.perf_counter(), cpu_busy_seconds()
                if r.workers == 1:
                    hits, misses = hmm_memo_stats()
                    r.memo[0] += hits
                    r.memo[1] += misses
                r.seconds += t1 - t0
                r.busy = None if r.busy is None or b0 is None or b1 is None else r.busy + (b1 - b0)
    finally:
        for pool in pools.values():
            pool.shutdown()
        shutdown_workers()


# ---------------------------------------------------------------- report

def _rate(n: float, seconds: float) -> str:
    return f"{n / seconds:,.0f}" if seconds > 0 else "inf"


def _busy(r: Run) -> str:
    return "n/a" if r.busy is None else f"{r.busy / r.seconds:.2f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=100_000, help="corpus size (default 100000)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--zh-share", type=float, default=0.5, help="share of Chinese conversations (default 0.5)")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2],
                    help="process counts to measure (default: 1 2); 1 is always measured")
    ap.add_argument("--rounds", type=int, default=4, help="interleaving rounds (default 4)")
    ap.add_argument("--keep", type=Path, help="write the corpus and lakes here and keep them (default: a temp dir)")
    args = ap.parse_args(argv)
    counts = sorted({1, *(w for w in args.workers if w >= 1)})

    t0 = time.perf_counter()
    corpus = generate_corpus(args.messages, args.seed, args.zh_share)
    work = args.keep or Path(tempfile.mkdtemp(prefix="memctl_bench_ingest_"))
    paths = write_inbox(corpus, work / "inbox")
    words = word_counts(corpus)
    texts = corpus.texts
    n, w_all = corpus.n_messages, words["en"] + words["zh"]
    distinct = len(set(texts["en"]) | set(texts["zh"]))
    print(f"corpus: {n} messages ({len(texts['en'])} en, {len(texts['zh'])} zh) in {len(paths)} files, "
          f"{distinct / n:.1%} distinct texts, {sum(len(d) for _, d in corpus.files):,} bytes, seed {args.seed}, "
          f"generated in {time.perf_counter() - t0:.1f} s")
    print(f"corpus sha256={corpus_sha256(corpus)}")
    print(f"words: {w_all:,} ({words['en']:,} en whitespace tokens, {words['zh']:,} zh jieba tokens)")
    english()("Warm up.")
    chinese()("热身。")

    runs = plan(counts)
    rounds = max(1, min(args.rounds, len(paths)))
    t0 = time.perf_counter()
    measure(corpus, paths, runs, rounds, work)
    hits, misses = runs[0].memo
    print(f"measured in {time.perf_counter() - t0:.0f} s: {len(runs)} runs interleaved over {rounds} rounds of files; "
          f"jieba HMM memo {hits / max(1, hits + misses):.1%} hits in the 1-process raw run")

    print(f"\n== (a) raw spaCy: nlp.pipe over the same texts, same pipeline objects, batch_size {BATCH_SIZE}")
    raw = [r for r in runs if r.kind == "a"]
    for r in raw:
        print(f"  {r.label:<22} {r.seconds:8.1f} s  {_rate(n, r.seconds):>7} msg/s  {_rate(w_all, r.seconds):>8} words/s"
              f"   (en {_rate(len(texts['en']), r.by_lang['en'])} msg/s, zh {_rate(len(texts['zh']), r.by_lang['zh'])} "
              f"msg/s; busy cores {_busy(r)})")

    print("\n== (b) pipeline: read+chunk → NLP (fresh cache) → annotations Parquet → R2G → Parquet, end to end")
    pipe = [r for r in runs if r.kind == "b"]
    for r in pipe:
        st = "  ".join(f"{k} {r.stages[k]:.1f}" for k in STAGES)
        print(f"  {r.label:<22} {r.seconds:8.1f} s  {_rate(n, r.seconds):>7} msg/s  {_rate(w_all, r.seconds):>8} words/s"
              f"   stages s: {st}")
        print(f"  {'':<22} {r.counts['nlp_misses']} texts annotated, {r.counts['nodes']:,} nodes, "
              f"{r.counts['edges']:,} edges; busy cores {_busy(r)}")
    shas = {lake_sha256(r.root) for r in pipe}
    print(f"  lakes identical across runs: {'yes' if len(shas) == 1 else 'NO'} ({sorted(shas)[0][:16]})")

    one_a, one_b = raw[0], pipe[0]
    s1 = one_b.stages
    print(f"\n1 process: pipeline/raw = {one_a.seconds / one_b.seconds:.2f}; on top of raw spaCy: NLP wrapper "
          f"{s1['nlp'] - one_a.seconds:+.1f} s, annotations Parquet round trip {s1['annotations']:.1f} s, "
          f"R2G {s1['r2g']:.1f} s, chunk {s1['chunk']:.1f} s, parquet {s1['parquet']:.1f} s")
    for w in counts[1:]:
        a_w = min((r for r in raw if r.workers == w), key=lambda r: r.seconds)
        b_w = min((r for r in pipe if r.workers == w), key=lambda r: r.seconds)
        print(f"{w} processes: pipeline/raw = {a_w.seconds / b_w.seconds:.2f} ({b_w.label} / {a_w.label})")
    best_a, best_b = min(raw, key=lambda r: r.seconds), min(pipe, key=lambda r: r.seconds)
    print(f"best: pipeline {best_b.label} {_rate(n, best_b.seconds)} msg/s, "
          f"raw spaCy {best_a.label} {_rate(n, best_a.seconds)} msg/s")
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    print(f"ratio pipeline/raw_spacy={best_a.seconds / best_b.seconds:.2f} messages={n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
