"""What `memctl recall` shows (issue 17), through the real CLI on a lake built by a real Dagster materialize of
the shipped sample logs plus a small inbox this module writes:

- results come in the order of their shown score (Python, --json, human output), and MMR's part is in it;
- no junk node ("[Fact] be", "[Fact] compost bin do", "[Entity] 我会优先", "[Entity] assistant", keyword-list
  rollup titles) is a result;
- a human citation is a window around the cited span, with … marks and no raw control characters; --json keeps
  the whole line;
- a citation whose blob was quarantined says so, in the result, in the human output and in the trace.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from assets.cli import main
from assets.run import materialize
from raw_store.lake import Lake
from recall import RecallConfig, recall
from recall.citations import WINDOW_CHARS, excerpt_window, printable

ROOT = Path(__file__).resolve().parent.parent
FILLER = " ".join(["and then we talked about the weather for a while"] * 20)
LONG_LINE = "Pasted from QQ:\r" + FILLER + " we met the zanzibar ferry captain at noon\r " + FILLER
CHAT = [  # a chat export that names speakers by their role, with small talk that makes no memory
    {
        "conv_id": "trip",
        "msg_id": "t1",
        "speaker": "user",
        "role": "user",
        "ts": "2024-04-01T09:00:00",
        "text": "Alright. I am ok. Can you help me plan a trip to Lisbon?",
    },
    {
        "conv_id": "trip",
        "msg_id": "t2",
        "speaker": "assistant",
        "role": "assistant",
        "ts": "2024-04-01T09:00:05",
        "text": "Sure, I can help. Where would you like to stay in Lisbon?",
    },
    {
        "conv_id": "trip",
        "msg_id": "t3",
        "speaker": "Nora",
        "role": "user",
        "ts": "2024-04-01T09:01:00",
        "text": LONG_LINE,
    },
]
QUERIES = [
    ("demo", "What does Caroline drink instead of coffee?"),
    ("demo", "小明帮我记什么？"),
    ("demo", "以后用中文回答"),
    ("demo", "assistant"),
    ("demo", "Alright, be ok"),
    ("research", "Is the compost bin done?"),
    ("demo", "Lisbon trip assistant"),
]
JUNK_TITLES = {
    "alright",
    "be",
    "ok",
    "do",
    "compost bin do",
    "小明 帮",
    "我会优先",
    "晚饭前会",
    "assistant",
    "user",
    "助手",
    "great",
    "happen",
}


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("recall_output") / "data"
    shutil.copytree(ROOT / "data" / "inbox", root / "inbox")
    (root / "inbox" / "demo" / "trip.jsonl").write_text(
        "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in CHAT), "utf-8"
    )
    saved = {k: os.environ.get(k) for k in ("MEMCTL_DATA", "DAGSTER_HOME")}
    os.environ["MEMCTL_DATA"] = str(root)
    os.environ["DAGSTER_HOME"] = str(root / "dagster_home")
    lk = Lake(root)
    summary = materialize(lk, progress=False)
    assert summary.ok, (summary.failed, summary.lake_failed)
    yield lk
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def _memctl(lk: Lake, *args: str, process: bool = False) -> subprocess.CompletedProcess:
    """`memctl <args>` on `lk`: in this process (assets.cli.main, stdout and stderr captured), or as a subprocess
    with `process` (the output as a terminal-less user gets it; one such call per behaviour is enough)."""
    log = ["--no-log"] if args[0] == "recall" else []
    if not process:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(["--data", str(lk.root), *args, *log])
        assert rc == 0, err.getvalue()
        return subprocess.CompletedProcess(args, rc, out.getvalue(), err.getvalue())
    env = {**os.environ, "MEMCTL_DATA": str(lk.root)}
    done = subprocess.run(
        [sys.executable, "-m", "assets.cli", *args, *log],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done


_HEAD = re.compile(r"^ *\d+\. \[(\w+)\] (.*)  \(score (\d+\.\d{3})\)$")


def _human(stdout: str) -> list[tuple[str, str, float]]:
    return [(m.group(1), m.group(2), float(m.group(3))) for line in stdout.splitlines() if (m := _HEAD.match(line))]


def _is_junk(kind: str, title: str) -> bool:
    return title.strip().lower() in JUNK_TITLES or (kind == "Episode" and " · " in title)


@pytest.mark.parametrize(("tenant", "query"), QUERIES)
def test_results_are_in_score_order_and_none_is_junk(lake, tenant: str, query: str) -> None:
    from recall import recall

    got = json.loads(_memctl(lake, "recall", query, "--tenant", tenant, "--json", "--k", "20").stdout)
    scores = [r["score"] for r in got]
    assert scores == sorted(scores, reverse=True), [(r["title"], r["score"]) for r in got]
    assert all("mmr" in r["breakdown"] for r in got[1:])  # MMR's part is in the score it shows
    assert not [r["title"] for r in got if _is_junk(r["type"], r["title"])]
    human = _human(_memctl(lake, "recall", query, "--tenant", tenant, "--k", "20").stdout)
    assert [(t, s) for t, _, s in human] == [(r["type"], round(r["score"], 3)) for r in got]
    assert [s for _, _, s in human] == sorted((s for _, _, s in human), reverse=True)
    assert not [title for kind, title, _ in human if _is_junk(kind, title)]
    py = recall(query, tenant, k=20, lake=lake)
    assert [r.node_id for r in py] == [r["node_id"] for r in got]
    assert [r.score for r in py] == sorted((r.score for r in py), reverse=True)


def test_a_recall_makes_no_reference_cycles_and_leaves_the_gc_as_it_found_it(lake) -> None:
    """recall.engine pauses the cyclic GC while a query runs: sound only while a query leaves no cycle behind."""
    import gc

    from recall import recall

    for tenant, query in QUERIES:
        recall(query, tenant, k=20, expand_depth=2, lake=lake)  # caches and lazy imports settle first
    gc.collect()
    saved = gc.get_debug()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what a collection finds unreachable is kept in gc.garbage, to name it
    try:
        for tenant, query in QUERIES:
            assert gc.isenabled()
            assert recall(query, tenant, k=20, expand_depth=2, lake=lake)
            assert gc.isenabled()
            assert gc.collect() == 0, sorted({type(o).__name__ for o in gc.garbage})
        gc.disable()
        recall(QUERIES[0][1], QUERIES[0][0], k=5, lake=lake)
        assert not gc.isenabled()  # off before, off after
    finally:
        gc.enable()
        gc.set_debug(saved)
        gc.garbage.clear()


def test_the_answer_is_first_and_its_repeats_say_why_they_rank_low(lake) -> None:
    got = json.loads(
        _memctl(
            lake, "recall", "What does Caroline drink instead of coffee?", "--tenant", "demo", "--json", "--k", "20"
        ).stdout
    )
    assert "green tea" in got[0]["citations"][0]["excerpt"]
    # without session seeds (recall.hop), whose neighbouring turns would push the repeat below the top 20 here
    got = [
        r.to_json()
        for r in recall(
            "What does Caroline drink instead of coffee?",
            "demo",
            k=20,
            lake=lake,
            config=RecallConfig(session_weight=0.0),
        )
    ]
    assert "green tea" in got[0]["citations"][0]["excerpt"]
    repeats = [r for r in got if r["breakdown"]["mmr_similarity"] >= 0.7]
    assert repeats, "the Fact and the Episode of the answering line both match"
    for r in repeats:  # the same line again: MMR took most of its score, and the breakdown says how much
        assert r["breakdown"]["mmr"] < 0 and r["score"] <= got[0]["score"]


def test_no_entity_for_a_role_label_or_a_pronoun_fragment(lake) -> None:
    out = _memctl(lake, "sql", "SELECT title FROM nodes WHERE type = 'Entity'", "--json")
    titles = {r["title"] for r in json.loads(out.stdout)}
    assert not {"assistant", "user", "助手", "我会优先", "晚饭前会"} & titles
    assert {"Nora", "Lisbon", "小明"} <= titles
    rollups = json.loads(_memctl(lake, "sql", "SELECT title FROM nodes WHERE subtype = 'rollup'", "--json").stdout)
    assert rollups and not [r["title"] for r in rollups if " · " in r["title"]]


def test_a_long_line_prints_as_a_window_and_json_keeps_it_whole(lake) -> None:
    out = _memctl(lake, "recall", "zanzibar ferry captain", "--tenant", "demo")
    cited = [line for line in out.stdout.splitlines() if "zanzibar" in line and "↳" in line]
    assert cited, out.stdout
    assert "\r" not in out.stdout and all(len(line) < WINDOW_CHARS + 80 for line in cited)
    assert all('"…' in line and '…"' in line for line in cited)  # cut on both sides
    got = json.loads(_memctl(lake, "recall", "zanzibar ferry captain", "--tenant", "demo", "--json").stdout)
    whole = [c["excerpt"] for r in got for c in r["citations"] if "zanzibar" in c["excerpt"]]
    # the whole message, its line breaks as the raw store holds them (ingest turned the \r into \n)
    assert whole and all(e.startswith("Pasted from QQ:\n") and e.endswith(FILLER) and len(e) > 2000 for e in whole)
    assert {"raw_id", "conv_id", "msg_id", "speaker", "ts", "excerpt"} <= set(got[0]["citations"][0])


def test_a_quarantined_blob_is_named_in_the_result_the_output_and_the_trace(lake, tmp_path: Path) -> None:
    root = tmp_path / "data"
    shutil.copytree(lake.root, root, ignore=shutil.ignore_patterns("dagster_home"))
    copy = Lake(root)
    before = json.loads(_memctl(copy, "recall", "Xiaoming football", "--tenant", "demo", "--json").stdout)
    raw_id = before[0]["citations"][0]["raw_id"]
    blob = next((root / "raw").rglob(f"{raw_id}*.blob.zst"))
    good = blob.read_bytes()
    blob.write_bytes(good[:-3] + bytes(b ^ 0xFF for b in good[-3:]))
    env = {**os.environ, "MEMCTL_DATA": str(root)}
    verify = subprocess.run(
        [sys.executable, "-m", "assets.cli", "verify"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert verify.returncode == 1 and "quarantined" in verify.stdout
    # a new process (this one keeps the chunks it has read and checked)
    got = json.loads(_memctl(copy, "recall", "Xiaoming football", "--tenant", "demo", "--json", process=True).stdout)
    first = got[0]
    assert first["node_id"] == before[0]["node_id"] and first["citations"] == []
    assert first["unavailable"] == [
        {
            "raw_id": raw_id,
            "error": "BlobCorrupt",
            "reason": f"blob {raw_id} quarantined, run `memctl materialize` to repair",
        }
    ]
    human = _memctl(copy, "recall", "Xiaoming football", "--tenant", "demo", "--trace", process=True)
    assert f"↳ citation unavailable: blob {raw_id} quarantined, run `memctl materialize` to repair" in human.stdout
    cite = next(line for line in human.stderr.splitlines() if line.startswith("[trace] cite"))
    assert raw_id in cite and "'unavailable': [{" in cite and "BlobCorrupt" in cite


# ---------------------------------------------------------------- the window itself (no lake)


def test_printable_makes_control_characters_harmless() -> None:
    assert printable("one\rtwo\r\nthree\tfour") == "one two three four"
    assert printable("bell\x07 esc\x1b[2J del\x7f") == "bell\ufffd esc\ufffd[2J del\ufffd"
    assert printable("小明\u2028说") == "小明 说"


def test_a_window_is_centred_on_the_highlight_and_marks_its_cuts() -> None:
    text = "a" * 1000 + "MATCH" + "b" * 1000
    w = excerpt_window(text, (1000, 1005), width=40)
    assert w.startswith("…") and w.endswith("…") and len(w) == 42 and "MATCH" in w
    assert w.index("MATCH") in range(18, 22)
    assert excerpt_window(text, (0, 5), width=40) == "a" * 40 + "…"
    assert excerpt_window(text, (1990, 2005), width=40) == "…" + "b" * 40
    assert excerpt_window("short\rline", (0, 5)) == "short line"


def test_without_a_span_the_window_finds_the_query_words() -> None:
    text = "x " * 500 + "the Zanzibar ferry" + " y" * 500
    w = excerpt_window(text, (0, len(text)), ["zanzibar"], width=60)
    assert "Zanzibar ferry" in w and w.startswith("…") and w.endswith("…")
    assert excerpt_window(text, None, ["nowhere"], width=10) == "x x x x x …"
