"""The `memctl` command line on small hand-made lakes: help texts, `stats`, `verify --json` (no Dagster run)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pyarrow as pa
import pytest

from assets.cli import _parser, main
from r2g.lake_graph import table_schema
from raw_store.cas import RawStore
from raw_store.lake import Lake
from raw_store.tables import write_import


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {"memctl": parser, **{f"memctl {name}": p for name, p in subs.choices.items()}}


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]


@pytest.mark.parametrize("name", sorted(_commands(_parser())))
def test_every_argument_of_every_command_says_what_it_does(name: str) -> None:
    parser = _commands(_parser())[name]
    missing = [a.option_strings or a.dest for a in _options(parser) if not (a.help or "").strip()]
    assert missing == [], f"{name}: arguments without help"
    assert parser.description, f"{name}: no description"


@pytest.mark.parametrize("name", sorted(_commands(_parser())))
def test_every_default_worth_knowing_is_in_the_help(name: str) -> None:
    parser = _commands(_parser())[name]
    text = " ".join(parser.format_help().split())  # argparse wraps lines
    for a in _options(parser):
        if a.option_strings and a.default not in (None, False, ""):
            assert f"(default: {a.default})" in text, (name, a.option_strings)


def test_recall_help_names_k_tenant_and_their_defaults(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        main(["recall", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--k N number of results (default: 10)" in text
    assert "--tenant TENANT the tenant" in text and "`memctl stats` lists them" in text
    assert "(default: False)" not in text and "(default: None)" not in text


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Lake:
    monkeypatch.setenv("MEMCTL_DATA", str(tmp_path))
    return Lake(tmp_path)


def _table(lake: Lake, name: str, rows: list[dict]) -> None:
    schema = table_schema(name)
    write_import(
        lake,
        {name: (pa.Table.from_pylist(rows, schema=pa.schema([schema.field(k) for k in rows[0]])), schema)},
        key=name,
    )


def test_stats_lists_the_tenants_by_name_with_their_counts(lake: Lake, capsys: pytest.CaptureFixture) -> None:
    _table(lake, "messages", [{"tenant": "demo"}] * 3 + [{"tenant": "research"}])
    _table(lake, "nodes", [{"tenant": "demo", "type": "Fact"}, {"tenant": "research", "type": "Entity"}] * 2)
    _table(lake, "rejects", [{"tenant": "research", "reason": "E_READ_EMPTY"}])
    assert main(["stats"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == ("tenants (2): demo (3 messages, 2 nodes), research (1 messages, 2 nodes, 1 rejects)")
    assert "messages          4 rows  demo=3, research=1" in out
    assert main(["stats", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["tenants"] == {
        "demo": {"raw_chunks": 0, "messages": 3, "nodes": 2, "edges": 0, "rejects": 0},
        "research": {"raw_chunks": 0, "messages": 1, "nodes": 2, "edges": 0, "rejects": 1},
    }
    assert stats["tables"]["messages"]["by_tenant"] == {"demo": 3, "research": 1}


def _store_two_blobs(lake: Lake) -> Path:
    store = RawStore(lake.root)
    store.put("demo", b"Ann: hello\n")
    bad = lake.root / store.put("demo", b"Bob: hi there\n").path
    (bad.parent / ".raw_leftover.tmp").write_bytes(b"half")  # a killed writer's temp file
    return bad


def test_verify_json_on_a_healthy_store_quarantines_nothing(lake: Lake, capsys: pytest.CaptureFixture) -> None:
    RawStore(lake.root).put("demo", b"Ann: hello\n")
    assert main(["verify", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["quarantined"] == [] and report["removed"] == [] and report["corrupt"] == []
    assert report["checked"] == report["total"] == 1 and report["dry_run"] is False


def test_verify_json_lists_what_it_moved_and_a_dry_run_moves_nothing(lake: Lake, capsys: pytest.CaptureFixture) -> None:
    bad = _store_two_blobs(lake)
    bad.write_bytes(b"not zstd")
    rel = bad.relative_to(lake.root).as_posix()
    assert main(["verify", "--json", "--dry-run"]) == 1
    dry = json.loads(capsys.readouterr().out)
    assert [c["path"] for c in dry["corrupt"]] == [rel] and len(dry["partial"]) == 1
    assert dry["quarantined"] == [] and dry["removed"] == [] and dry["dry_run"] is True and bad.exists()
    assert main(["verify", "--json"]) == 1
    done = json.loads(capsys.readouterr().out)
    assert done["quarantined"] == [rel] and done["removed"] == dry["partial"] and not bad.exists()
    assert (lake.root / "quarantine" / rel).exists()


# In its own process: which modules a process has imported is the point, and this worker's are not fresh.
_BUILD_IMPORTS = """
import sys
from assets.cli import main
from jobs.communities import CommunityConfig, _leiden

assert main(["--data", sys.argv[1], "materialize"]) == 2  # no inbox: a user error, after the build's imports
assert "igraph" in sys.modules and "matplotlib" not in sys.modules, "igraph drew matplotlib in"
assert _leiden(4, [(0, 1), (2, 3)], [1, 1], CommunityConfig())[0] == [0, 0, 1, 1]  # igraph computes as before
import matplotlib.pyplot  # and matplotlib is still there for whoever wants it
import pyarrow as pa
t = pa.Table.from_pylist([{"a": 1, "b": "x"}])  # pyarrow's first look at Python lists imported pandas
assert pa.array([1, None]).to_pylist() == [1, None] and "pandas" not in sys.modules, "pyarrow drew pandas in"
import importlib.util
if importlib.util.find_spec("pandas") is not None:  # (installed here: the MiniLM package's dependency)
    assert type(t.to_pandas()).__name__ == "DataFrame"  # asked for, pyarrow imports pandas after all
print("ok")
"""


def test_a_build_imports_igraph_without_matplotlib_and_arrow_without_pandas_and_leaves_both_importable(
    tmp_path: Path,
) -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    out = subprocess.run(
        [sys.executable, "-c", _BUILD_IMPORTS, str(tmp_path / "data")],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
    assert "no inbox" in out.stderr


# `memctl ui` runs `dg dev` through assets.ui.run_process_group; these stand-ins make the same process shapes in a second.
_WRAPPER = (
    "import os, sys; from pathlib import Path; from assets.ui import run_process_group; "
    "sys.exit(run_process_group(sys.argv[2:], Path('.'), dict(os.environ), grace=float(sys.argv[1])))"
)
_STUBBORN = (
    "import signal, subprocess, sys, time\n"
    "for s in (signal.SIGINT, signal.SIGTERM): signal.signal(s, signal.SIG_IGN)\n"
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"  # inherits SIG_IGN
    "print('ready', flush=True); time.sleep(600)\n"
)
_POLITE = "import time\nprint('ready', flush=True)\ntime.sleep(600)\n"  # Python's default: SIGINT stops it


def _start(grace: float, child: str) -> tuple:
    """The wrapper started as `memctl ui &` from a script starts: with SIGINT ignored."""
    import shlex
    import subprocess
    import sys

    cmd = shlex.join([sys.executable, "-c", _WRAPPER, str(grace), sys.executable, "-c", child])
    proc = subprocess.Popen(
        ["sh", "-c", f"trap '' INT; exec {cmd}"],
        cwd=Path(__file__).resolve().parent.parent,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stdout.readline() == b"ready\n"
    import psutil

    return proc, psutil.Process(proc.pid).children(recursive=True)


def _stop(proc, family: list, within: float) -> int:
    import os
    import signal
    import subprocess

    import psutil

    try:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=within)
        _, alive = psutil.wait_procs(family, timeout=within)
        assert alive == [], alive
        return code
    finally:
        for p in family:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def test_sigterm_stops_the_child_group_at_once_even_when_started_with_sigint_ignored() -> None:
    import time

    proc, family = _start(grace=30, child=_POLITE)
    assert len(family) == 1
    started = time.monotonic()
    assert _stop(proc, family, within=10) == 128 + 15
    assert time.monotonic() - started < 10  # the child got a SIGINT it did not ignore, long before the grace


def test_sigterm_kills_children_that_ignore_it_after_the_grace() -> None:
    proc, family = _start(grace=1, child=_STUBBORN)
    assert len(family) == 2  # the child and its grandchild, both ignoring SIGINT and SIGTERM
    assert _stop(proc, family, within=15) == 128 + 15


# entry() in its own process: what the process gives out at its end is the point.
_ENTRY = """
import atexit, sys
import assets.cli as cli

def main():
    for i in range(int(sys.argv[2])):
        print(f"line {i:05}")  # lines of 11 bytes: the last few hundred still in stdout's buffer at the end
    print("said", file=sys.stderr, end="")
    return int(sys.argv[1])

class Torn:
    def __del__(self):
        print(" and torn down", file=sys.stderr, end="")  # at the interpreter's teardown, as __main__ is cleared


torn = Torn()
cli.main = main
atexit.register(lambda: print(", handled", file=sys.stderr, end=""))  # the libraries' exit handlers still run
cli.entry()
"""


def _buffered() -> dict[str, str]:
    """This environment, without $PYTHONUNBUFFERED (set on some machines): the child's stdout must buffer."""
    import os

    return {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


@pytest.mark.parametrize("code", [0, 3])
def test_the_program_ends_with_mains_code_and_all_its_output_but_without_the_interpreters_teardown(code: int) -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    out = subprocess.run(
        [sys.executable, "-c", _ENTRY, str(code), "20000"], cwd=root, env=_buffered(), capture_output=True, timeout=120
    )
    assert out.returncode == code
    assert out.stdout == "".join(f"line {i:05}\n" for i in range(20_000)).encode() and out.stderr == b"said, handled"


def test_the_program_ends_141_when_its_reader_is_gone_before_its_output_is_flushed() -> None:
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    read, write = os.pipe()
    os.close(read)  # nobody will ever read: the flush at the end meets a broken pipe
    try:
        out = subprocess.run(
            [sys.executable, "-c", _ENTRY, "0", "100"],
            cwd=root,
            env=_buffered(),
            stdout=write,
            stderr=subprocess.PIPE,
            timeout=120,
        )
    finally:
        os.close(write)
    assert out.returncode == 141 and out.stderr == b"said, handled"
