"""bench/ingest.py: deterministic synthetic corpus (bench/ingest_corpus.py), and a small end-to-end run that keeps its
last-line contract."""

import re
import subprocess
import sys
from pathlib import Path

from bench.ingest_corpus import corpus_sha256, generate_corpus

ROOT = Path(__file__).resolve().parent.parent
RATE = re.compile(
    r"^  (1 process|n_process=\d+|\d+ processes (?:split|\(files\))|annotate pool \d+)\s+"
    r"([\d.]+) s\s+([\d,]+) msg/s\s+([\d,]+) words/s"
)


def test_corpus_is_deterministic_bilingual_and_mostly_distinct() -> None:
    one, two = generate_corpus(3000, seed=7), generate_corpus(3000, seed=7)
    assert one.files == two.files and one.n_messages == 3000
    assert generate_corpus(3000, seed=8).files != one.files
    texts = one.texts["en"] + one.texts["zh"]
    assert len(one.texts["en"]) > 500 and len(one.texts["zh"]) > 500
    assert len(set(texts)) / len(texts) > 0.95  # the NLP cache must not turn the benchmark into lookups
    lines = [ln for _, data in one.files for ln in data.decode("utf-8").splitlines()]
    assert len(lines) == 3000


def test_the_generator_stays_importable_from_bench_ingest(tmp_path: Path) -> None:
    """Outside checks import generate_corpus and write_inbox from bench.ingest, with these signatures."""
    import inspect

    from bench import ingest

    assert ingest.generate_corpus is generate_corpus
    assert list(inspect.signature(ingest.generate_corpus).parameters) == [
        "n_messages",
        "seed",
        "zh_share",
        "convs_per_file",
    ]
    assert list(inspect.signature(ingest.write_inbox).parameters) == ["corpus", "inbox"]
    paths = ingest.write_inbox(ingest.generate_corpus(200, seed=3), tmp_path / "inbox")
    assert paths and all(p.is_file() and p.is_relative_to(tmp_path / "inbox") for p in paths)


def test_small_run_prints_both_measurements_and_the_contract_line() -> None:
    out = subprocess.run(
        # one round: the interleaving guards long runs against a drifting machine; here each round re-spawned
        # spaCy's n_process workers, ~8 CPU-s of this test's ~37
        [sys.executable, "bench/ingest.py", "--messages", "300", "--rounds", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    m = re.fullmatch(r"ratio pipeline/raw_spacy=(\d+\.\d\d) messages=(\d+)", lines[-1])
    assert m, lines[-1]
    assert float(m.group(1)) > 0 and int(m.group(2)) == 300
    rows = {r.group(1): r for r in map(RATE.match, lines) if r}
    assert {"1 process", "n_process=2", "2 processes split", "2 processes (files)", "annotate pool 2"} <= set(rows)
    for r in rows.values():
        assert (
            float(r.group(2)) > 0 and float(r.group(3).replace(",", "")) > 0 and float(r.group(4).replace(",", "")) > 0
        )
    assert "lakes identical across runs: yes" in out.stdout  # worker counts never change the output
    sha = re.search(r"corpus sha256=([0-9a-f]{64})", out.stdout).group(1)
    assert sha == corpus_sha256(generate_corpus(300, seed=7))
