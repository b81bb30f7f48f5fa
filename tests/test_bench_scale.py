"""bench/scale.py's measuring: a command that outgrows --rss-limit-gb is stopped, and what it did is kept."""

import sys
from datetime import timedelta

import pytest

from bench.ingest_corpus import generate_corpus, write_inbox
from bench.scale import RunFailed, covered_seconds, next_day, run_command, small_file
from raw_store.readers import read_bytes

GROW = (
    "import time\nblocks = []\nfor _ in range(200):\n    blocks.append(bytearray(16 << 20))\n    time.sleep(0.05)\n"
    "print('finished')\n"
)


def test_a_command_past_the_rss_limit_is_stopped_with_its_samples() -> None:
    with pytest.raises(RunFailed) as failed:
        run_command("grow", [sys.executable, "-c", GROW], {}, rss_limit=200 << 20)
    run = failed.value.run
    assert "past 0.2 GB" in str(failed.value)
    assert run.peak_tree_rss > 200 << 20 and "finished" not in run.stdout  # killed long before its 10 s, 3.2 GB end
    times = [t for t, _ in run.samples]
    assert times == sorted(times) and run.samples[-1][1] > 200 << 20


def test_a_command_within_the_limit_runs_to_its_end() -> None:
    # alive long enough to be sampled (the sampler's first look can come after a quick command has exited)
    live = "import time; print('done', flush=True); time.sleep(1.0)"
    run = run_command("small", [sys.executable, "-c", live], {}, rss_limit=2 << 30)
    assert run.stdout.strip() == "done" and 0 < run.peak_tree_rss < 2 << 30 and run.samples


def test_a_failing_command_raises_with_its_error() -> None:
    with pytest.raises(RunFailed, match="failed \\(3\\)"):
        run_command("bad", [sys.executable, "-c", "import sys; sys.exit(3)"], {})


def test_the_small_append_is_two_turns_one_english_one_chinese_read_as_two_messages(tmp_path) -> None:
    path = small_file(tmp_path, seed=9)
    read = read_bytes(path.read_bytes(), path.name, "bench")
    assert not read.rejects and len(read.messages) == 2
    han = [any("\u4e00" <= ch <= "\u9fff" for ch in m.text) for m in read.messages]
    assert han == [False, True]
    assert {m.conv_id for m in read.messages} == {"small_append"}
    assert small_file(tmp_path, seed=9).read_bytes() == path.read_bytes()  # the same file for the same seed


def test_the_daily_run_is_as_of_the_day_after_the_newest_message_of_the_inbox(tmp_path) -> None:
    corpus = generate_corpus(300, seed=4, zh_share=0.3)
    write_inbox(corpus, tmp_path / "inbox")
    small_file(tmp_path / "inbox", seed=5)
    newest = max(
        m.ts
        for f in (tmp_path / "inbox").rglob("*.jsonl")
        for m in read_bytes(f.read_bytes(), f.name, "bench").messages
    )
    assert next_day(tmp_path / "inbox") == (newest.date() + timedelta(days=1)).isoformat()


def test_the_seconds_the_runs_cover_count_overlapping_runs_once() -> None:
    assert covered_seconds([]) == 0
    assert covered_seconds([(10.0, 12.0)]) == 2
    # two file runs side by side (a cluster), one inside another, then the lake run after a gap
    assert covered_seconds([(14.0, 20.0), (10.0, 13.0), (11.0, 15.0), (11.5, 12.0), (22.0, 23.5)]) == 11.5
