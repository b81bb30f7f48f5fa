"""The synthetic chat corpus of bench/ingest.py (and bench/scale.py): deterministic (seeded) English and Chinese
conversations of 50–300 turns, several speakers, names, places, relative times, causes, preferences and plans built
from templates × vocabularies, so ~98 % of the texts are distinct; written as canonical JSONL inbox files."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

TENANT = "bench"
CONVS_PER_FILE = 12  # ~2,000 messages per inbox file (a typical export)

# ---------------------------------------------------------------- vocabularies

# fmt: off
# word tables: kept packed, many words a line (the formatter would put one word per line)
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
# fmt: on


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
        tail = r.choice(
            [
                ", especially on weekends",
                f" more than {r.choice(EN_LIKES)}",
                " since I was a kid",
                f" with {r.choice(EN_NAMES)}",
                f" at {r.choice(EN_PLACES)}",
                f", {r.choice(EN_NAMES)} too",
            ]
        )
        s = f"I {r.choice(['love', 'really like', 'prefer', 'hate', 'enjoy'])} {r.choice(EN_LIKES)}{tail}."
    elif kind == 4:
        s = f"I need to {r.choice(EN_PLANS)} {r.choice(EN_FUTURE)}{r.choice(['', ' before ' + str(r.randint(1, 11)) + ' pm'])}."
    elif kind == 5:
        s = f"{other}, did you {r.choice(['see', 'meet', 'call', 'text'])} {name} {r.choice(EN_TIMES)}?"
    elif kind == 6:
        s = f"{r.choice(EN_REPLIES)} " + r.choice(
            [
                f"I bought {r.choice(EN_THINGS)} {r.choice(EN_TIMES)}.",
                f"Say hi to {name} for me.",
                f"See you {r.choice(EN_FUTURE)}, {other}.",
            ]
        )
    elif kind == 7:
        s = f"We are going to {r.choice(EN_PLACES)} {r.choice(EN_FUTURE)} so I can't {r.choice(EN_PLANS)}."
    elif kind == 8:
        s = f"{name} gave me {r.choice(EN_THINGS)} {r.choice(EN_TIMES)}, it took {r.randint(2, 90)} minutes to get home."
    else:
        s = (
            f"From now on please remind me to {r.choice(EN_PLANS)} every {r.choice(['morning', 'week', 'Monday', 'evening'])}"
            f" at {r.randint(6, 10)}:{r.choice(['00', '15', '30', '45'])}."
        )
    opener = r.choice(EN_OPENERS)
    if opener and s.startswith(("From", "We")):  # "Well, from now on…"; names and "I" keep their capital
        s = s[0].lower() + s[1:]
    s = opener + s
    if r.random() < 0.6:
        s += " " + r.choice(
            [
                f"I was so {r.choice(EN_FEELINGS)}.",
                f"{r.choice(EN_REPLIES)} {r.choice(EN_REPLIES)}",
                f"Maybe {r.choice(EN_NAMES)} will join {r.choice(EN_FUTURE)}.",
                f"It cost {r.randint(5, 300)} dollars.",
                f"{r.choice(EN_NAMES)} said {r.choice(EN_PLACES)} was "
                f"{r.choice(['crowded', 'lovely', 'closed', 'packed', 'quiet'])}.",
                f"I {r.choice(EN_ACTIVITIES)} {r.choice(EN_TIMES)} too.",
            ]
        )
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
        tail = r.choice(
            [
                "，尤其是周末",
                f"，比{r.choice(ZH_LIKES)}好多了",
                "，从小就这样",
                f"，{r.choice(ZH_NAMES)}也是",
                f"，常和{r.choice(ZH_NAMES)}一起",
            ]
        )
        s = f"我{r.choice(['喜欢', '很喜欢', '讨厌', '最爱', '不喜欢'])}{r.choice(ZH_LIKES)}{tail}。"
    elif kind == 4:
        s = (
            f"我{r.choice(ZH_FUTURE)}要{r.choice(ZH_PLANS)}"
            f"{r.choice(['', '，' + str(r.randint(1, 11)) + '点之前', '，' + r.choice(ZH_FEELINGS)])}。"
        )
    elif kind == 5:
        s = f"{other}，你{r.choice(ZH_TIMES)}{r.choice(['见到', '碰到', '联系', '找过'])}{name}了吗？"
    elif kind == 6:
        s = r.choice(ZH_REPLIES) + r.choice(
            [
                f"我{r.choice(ZH_TIMES)}买了{r.choice(ZH_THINGS)}。",
                f"替我向{name}问好。",
                f"{other}，{r.choice(ZH_FUTURE)}见。",
            ]
        )
    elif kind == 7:
        s = f"我们{r.choice(ZH_FUTURE)}去{r.choice(ZH_PLACES)}，所以没法{r.choice(ZH_PLANS)}了。"
    elif kind == 8:
        s = f"{name}{r.choice(ZH_TIMES)}送了我{r.choice(ZH_THINGS)}，回家花了{r.randint(2, 90)}分钟。"
    else:
        s = (
            f"以后{r.choice(['每天早上', '每周', '每个周一', '晚上'])}{r.randint(6, 10)}点"
            f"{r.choice(['', '半', '一刻', '十分'])}提醒我{r.choice(ZH_PLANS)}。"
        )
    s = r.choice(ZH_OPENERS) + s
    if r.random() < 0.6:
        s += r.choice(
            [
                f"我{r.choice(ZH_FEELINGS)}。",
                r.choice(ZH_REPLIES) + r.choice(ZH_REPLIES),
                f"也许{r.choice(ZH_NAMES)}{r.choice(ZH_FUTURE)}也来。",
                f"花了{r.randint(5, 300)}块钱。",
                f"{r.choice(ZH_NAMES)}说{r.choice(ZH_PLACES)}{r.choice(['人很多', '很漂亮', '关门了', '很安静'])}。",
                f"我{r.choice(ZH_TIMES)}也{r.choice(ZH_ACTIVITIES)}了。",
            ]
        )
    return s


@dataclass
class Corpus:
    files: list[tuple[str, bytes]]  # (source_file, canonical JSONL bytes)
    file_texts: list[dict[str, list[str]]]  # per file: lang → its message texts, in file order

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


def generate_corpus(
    n_messages: int, seed: int = 7, zh_share: float = 0.5, convs_per_file: int = CONVS_PER_FILE
) -> Corpus:
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
            lines.append(
                json.dumps(
                    {
                        "conv_id": conv_id,
                        "msg_id": f"m{k}",
                        "speaker": r.choice(speakers),
                        "role": "user",
                        "ts": ts.isoformat(),
                        "text": text,
                    },
                    ensure_ascii=False,
                ).encode("utf-8")
            )
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
