"""bench/locomo_recall.py runs end to end on a small LoCoMo-layout file and keeps its last-line contract."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_locomo_bench_prints_both_rows_and_the_contract_line() -> None:
    sample = ROOT / "data" / "inbox" / "research" / "garden_club.json"
    out = subprocess.run(
        [sys.executable, "bench/locomo_recall.py", "--data", str(sample)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert "== memctl" in lines and "== baseline" in lines
    m = re.fullmatch(r"overall R@5 memctl=([\d.]+) baseline=([\d.]+) R@10 memctl=([\d.]+) baseline=([\d.]+)", lines[-1])
    assert m, lines[-1]
    # two questions whose three evidence turns share words with them: memctl ranks all of them in its top 5
    assert float(m.group(1)) == 100.0
