"""recall.query_tokens: r2g's search tokens token for token, without jieba's dictionary in memory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from r2g.tokens import search_tokens as r2g_search_tokens
from recall.diversify import mmr_tokens
from recall.query_tokens import LazyFreq, _lazy_tokenizer, search_tokens
from recall_fixtures import puppy_lake

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT.parent / "shared" / "eval"


def _texts() -> list[str]:
    out = [
        "小明在公园里踢足球",
        "以后优先用中文回答",
        "我今天不开心，因为昨晚没睡好",
        "AT&T 和 c# 还有 Zoë 的咖啡馆",
        "子昂打排位时电脑蓝屏 VIDEO_TDR_FAILURE nvlddmkm.sys",
        "Where did Xiaoming play football?",
        "",
        "。。。",
    ]
    for name in ("zh_dev.json", "locomo_dev.json"):
        if (EVAL / name).exists():
            for sample in json.loads((EVAL / name).read_text("utf-8"))[:2]:
                out += [qa["question"] for qa in sample["qa"]]
                out += [
                    t["text"]
                    for k, v in sample["conversation"].items()
                    if k.startswith("session_") and isinstance(v, list)
                    for t in v
                ]
    return out


def test_tokens_equal_r2g_search_tokens() -> None:
    texts = _texts()
    assert sum(1 for t in texts if any("\u4e00" <= c <= "\u9fff" for c in t)) > 100 or len(texts) == 8
    assert [search_tokens(t) for t in texts] == [r2g_search_tokens(t) for t in texts]


def test_the_lazy_table_is_jiebas_dictionary() -> None:
    import jieba

    jieba.initialize()
    lazy = _lazy_tokenizer()
    assert isinstance(lazy.FREQ, LazyFreq) and lazy.total == jieba.dt.total
    for word in ("足球", "踢", "公园里", "AT&T", "c#", "中华人民共和国", "中华人", "zzzz", "", "足球场上的"):
        assert (word in lazy.FREQ) == (word in jieba.dt.FREQ), word
        assert lazy.FREQ.get(word) == jieba.dt.FREQ.get(word), word


def test_a_recall_process_never_loads_jiebas_dictionary(tmp_path: Path) -> None:
    lake = puppy_lake(tmp_path)
    code = (
        "import sys, json\n"
        "from raw_store.lake import Lake\n"
        "from recall import recall\n"
        "lake = Lake(__import__('pathlib').Path(sys.argv[1]))\n"
        "en = recall('Biscuit agility contest', 't', lake=lake)\n"
        "english_only = 'jieba' not in sys.modules or not sys.modules['jieba'].dt.initialized\n"
        "zh = recall('小明在哪里踢足球 puppy', 't', lake=lake)\n"
        "print(json.dumps([bool(en), english_only, not sys.modules['jieba'].dt.initialized]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(lake.root)], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [True, True, True]


@pytest.mark.parametrize("text", ["Ann: Biscuit won", "小明踢足球", "我 ok 卡拉OK"])
def test_mmr_compares_search_tokens(text: str) -> None:
    assert mmr_tokens(text) == frozenset(r2g_search_tokens(text))
