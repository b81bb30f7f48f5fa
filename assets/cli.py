"""`memctl` command line: materialize, recall, sql, stats, forget, verify, ui.

User mistakes end in one clear line on stderr and exit code 2, never a traceback.
Dagster is imported only by the commands that run it, so `recall`/`sql` start fast.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import NoReturn

from assets.ui import run_process_group, ui_command
from raw_store.lake import Lake, lake_root


class UserError(Exception):
    """A mistake the user can fix; printed as one line."""


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        if args.data:
            os.environ["MEMCTL_DATA"] = str(lake_root(args.data))
        lake = Lake.from_env()
    except ValueError as e:  # e.g. $MEMCTL_STORAGE_OPTIONS that is not JSON
        print(f"memctl: {e}", file=sys.stderr)
        return 2
    try:
        if (
            lake.remote
            and args.func in (cmd_recall, cmd_tools, cmd_sql, cmd_forget)
            and not getattr(args, "parquet", 0)
        ):
            _refresh_index(lake)
        return args.func(args, lake)
    except UserError as e:
        print(f"memctl: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("memctl: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # output piped into e.g. `head`: stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def entry() -> NoReturn:
    """The `memctl` program: main(), then the process ends without the interpreter's teardown, which frees every
    module and object one by one (~1 s after a build, 0.4 s of it Dagster's modules) for nothing: every table is
    written, fsynced and renamed, and the Dagster instance closed, before main() returns. The libraries' exit
    handlers still run, the streams are flushed, then os._exit. An exception out of main() ends it the usual way."""
    code = main()
    atexit._run_exitfuncs()  # as Python's exit would first: logging, the annotate worker pool, multiprocessing
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:  # the reader is gone (`| head`): as main() treats it
            code = code or 141
        except (OSError, ValueError):  # closed or failing stream: nothing more can be said on it
            pass
    os._exit(code)


class _HelpFormatter(argparse.HelpFormatter):
    """Every option's help ends in its default, when it has one worth saying (not None/False/"")."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (
            action.option_strings
            and "%(default)" not in text
            and action.default not in (None, False, "", argparse.SUPPRESS)
        ):
            text += " (default: %(default)s)"
        return text


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="memctl", description="Chat logs → memory graph → cited recall.", formatter_class=_HelpFormatter
    )
    p.add_argument("--data", metavar="DIR", help="data directory (default: $MEMCTL_DATA, else ./data)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=text, description=text, formatter_class=_HelpFormatter)

    tenant_help = "the tenant{}: the first folder under inbox/ (required{}; `memctl stats` lists them)"

    m = command("materialize", "ingest $MEMCTL_DATA/inbox through the Dagster assets (only what changed)")
    m.add_argument("--quiet", action="store_true", help="no progress bar")
    m.add_argument(
        "--full",
        action="store_true",
        help="recompute every lake-wide step from the partitions and compact the indexes (also $MEMCTL_FULL=1)",
    )
    m.set_defaults(func=cmd_materialize)

    r = command("recall", "what do we know about QUERY, with citations")
    r.add_argument("query", help="a question or keywords, in any language the lake holds")
    r.add_argument("--tenant", required=True, help=tenant_help.format("", ""))
    r.add_argument("--k", type=int, default=10, metavar="N", help="number of results")
    r.add_argument("--depth", type=int, default=1, help="graph expansion depth (0–2)")
    r.add_argument("--json", action="store_true", help="print the results as JSON")
    r.add_argument("--trace", action="store_true", help="print every recall stage with its timing (to stderr)")
    r.add_argument(
        "--types",
        nargs="+",
        metavar="TYPE",
        help="only these node types (Episode Fact Entity Preference Task Concept RawChunk; default: all)",
    )
    r.add_argument("--since", metavar="DATE", help="only memories of this date/time or later (ISO-8601)")
    r.add_argument("--until", metavar="DATE", help="only memories up to this date (a bare date: its whole day)")
    r.add_argument("--as-of", metavar="DATE", help="only what was known then")
    r.add_argument(
        "--budget-tokens", type=int, metavar="N", help="fit results and citations into N tokens (default: no budget)"
    )
    r.add_argument(
        "--vectors",
        action="store_true",
        help="also search the vector index (stage B: the static embedders, or the one $MEMCTL_VECTORS names)",
    )
    r.add_argument(
        "--no-log",
        action="store_true",
        help="do not record the hits (they feed the memories' access feedback at the next consolidation)",
    )
    r.set_defaults(func=cmd_recall)

    t = command("tools", "print the search_memories tool definition, or run one call of it")
    t.add_argument("arguments", nargs="?", help='a call\'s JSON arguments, e.g. \'{"query": "puppy"}\'')
    t.add_argument("--tenant", help=tenant_help.format(" a call searches", " with arguments"))
    t.set_defaults(func=cmd_tools)

    s = command("sql", "run SQL on lake/memory.duckdb (read-only)")
    s.add_argument("query", help="one SQL statement (DuckDB dialect)")
    s.add_argument("--tenant", help="see only this tenant's rows (a sandbox that cannot reach other tenants)")
    s.add_argument(
        "--parquet",
        action="store_true",
        help="query the lake's Parquet tables where they lie (local or object storage), not the index",
    )
    s.add_argument("--json", action="store_true", help="print the rows as JSON")
    s.set_defaults(func=cmd_sql)

    st = command("stats", "the tenants, row counts per table and tenant, rejects by reason")
    st.add_argument("--json", action="store_true", help="print the counts as JSON")
    st.set_defaults(func=cmd_stats)

    f = command("forget", "forget a node, conversation, speaker, topic, time window or a whole tenant")
    f.add_argument("--tenant", required=True, help=tenant_help.format("", ""))
    which = f.add_mutually_exclusive_group(required=True)
    which.add_argument("--node", metavar="ID", help="one node (an Episode takes its turn with it)")
    which.add_argument("--conv", metavar="ID", help="every message of a conversation")
    which.add_argument("--speaker", metavar="NAME", help="every message by a speaker (case-insensitive)")
    which.add_argument("--topic", metavar="CONCEPT_ID", help="a Concept and every memory ABOUT it")
    which.add_argument("--from", dest="start", metavar="DATE", help="every message from this time (with --to)")
    which.add_argument("--all", action="store_true", help="the whole tenant")
    f.add_argument("--to", dest="end", metavar="DATE", help="end of the time window (a bare date: its whole day)")
    f.add_argument("--reason", default="", help="recorded in the audit and the tombstones")
    f.add_argument("--quiet", action="store_true", help="no progress bar")
    f.set_defaults(func=cmd_forget)

    v = command("verify", "re-hash the raw store; quarantine corrupt blobs (never served again)")
    v.add_argument("--tenant", help="only this tenant's blobs (default: every tenant)")
    v.add_argument("--sample", type=int, metavar="N", help="check a random sample of N blobs (default: all)")
    v.add_argument("--seed", type=int, default=0, help="seed of the sample")
    v.add_argument("--dry-run", action="store_true", help="report only: move nothing")
    v.add_argument("--json", action="store_true", help="print the report as JSON")
    v.set_defaults(func=cmd_verify)

    u = command("ui", "open the Dagster lineage UI on this lake")
    u.add_argument("--port", type=int, default=3000, help="port of the web UI")
    u.add_argument("--host", default="127.0.0.1", help="address the web UI listens on")
    u.set_defaults(func=cmd_ui)
    return p


def _refresh_index(lake: Lake) -> None:
    """A lake on object storage: bring this machine's index cache up to the lake's tables first."""
    from recall.index import ensure_index

    if ensure_index(lake):
        print(f"memctl: index cache rebuilt from {lake.lake} at {lake.index_dir}", file=sys.stderr)


def igraph_for_computing() -> None:
    """Import igraph for this process's lake build without its plotting back-end. With matplotlib installed (the
    notebook's extra), `import igraph` imports matplotlib.pyplot for its drawing module: ~1 of its ~1.2 s, paid by
    every build (communities, checks), a tenth of a small append. The CLI's process never draws, so matplotlib is
    hidden while igraph binds it (igraph keeps a stand-in that says to install matplotlib); a notebook or test that
    calls the jobs itself imports igraph whole, and plots with it."""
    if "igraph" in sys.modules or "matplotlib" in sys.modules:
        return
    sys.modules["matplotlib"] = None  # type: ignore[assignment]  # `import matplotlib` raises ImportError
    try:
        import igraph  # noqa: F401
    finally:
        del sys.modules["matplotlib"]


def lean_build_process() -> None:
    """What a build command's process loads, without what it never uses: igraph's plotting, pyarrow's pandas."""
    igraph_for_computing()
    arrow_without_pandas()


def arrow_without_pandas() -> None:
    """Have pyarrow settle, for this process, that pandas is not there. With pandas installed (a dependency of the
    MiniLM package), pyarrow imports it on its first look at a Python list (`Table.from_pylist`, `pa.array`): ~0.4 s
    of every build, whose tables never become data frames. pyarrow tries that import once and remembers the answer,
    so pandas is hidden while it asks; a later `to_pandas()` asks again and imports pandas, and so can anyone else."""
    if "pandas" in sys.modules:
        return
    import pyarrow as pa

    sys.meta_path.insert(0, _NO_PANDAS)  # (not sys.modules["pandas"] = None: pyarrow's Cython import takes the None)
    try:
        pa.array([0])
    finally:
        sys.meta_path.remove(_NO_PANDAS)


class _NoPandasFinder:
    """An import finder that says pandas is not installed."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError("pandas hidden while pyarrow looks for it", name=name)
        return None


_NO_PANDAS = _NoPandasFinder()


def cmd_materialize(args: argparse.Namespace, lake: Lake) -> int:
    from assets.run import ExecutorConfig, materialize

    lean_build_process()
    if not lake.inbox.is_dir():
        raise UserError(f"no inbox at {lake.inbox} (drop chat logs there, or set MEMCTL_DATA)")
    try:
        ExecutorConfig.from_env()
    except ValueError as e:
        raise UserError(str(e)) from None
    summary = materialize(lake, progress=not args.quiet, full=args.full)
    print(
        f"inbox files: {summary.files}  ingested now: {len(summary.ran)}  "
        + (f"re-derived (code changed): {len(summary.rederived)}  " if summary.rederived else "")
        + f"lake rebuilt: {'yes' if summary.lake_rebuilt else 'no (up to date)'}"
    )
    for key, msg in summary.failed.items():
        print(f"memctl: file {key!r} failed: {msg}", file=sys.stderr)
    if summary.lake_failed:
        print(f"memctl: lake build failed: {summary.lake_failed}", file=sys.stderr)
    if summary.ok:
        _print_counts(lake)
    return 0 if summary.ok else 1


def cmd_recall(args: argparse.Namespace, lake: Lake) -> int:
    from recall.citations import excerpt_window, printable
    from recall.config import RecallConfig
    from recall.engine import query_keywords, recall
    from recall.hits import log_hits
    from recall.store import IndexNotBuilt

    if not args.query.strip():
        raise UserError("empty query")
    if not 0 <= args.depth <= 2:
        raise UserError("--depth must be 0, 1 or 2")
    trace: list | None = [] if args.trace else None
    since, until, as_of = (
        _when(v, flag, end)
        for v, flag, end in (
            (args.since, "--since", False),
            (args.until, "--until", True),
            (args.as_of, "--as-of", True),
        )
    )
    try:
        results = recall(
            args.query,
            args.tenant,
            k=args.k,
            expand_depth=args.depth,
            lake=lake,
            trace=trace,
            types=args.types,
            time_range=(since, until) if since or until else None,
            as_of=as_of,
            budget_tokens=args.budget_tokens,
            config=RecallConfig(vectors_enabled=args.vectors),
        )
    except IndexNotBuilt as e:
        raise UserError(f"{e} (run `memctl materialize` first)") from None
    except ValueError as e:
        raise UserError(str(e)) from None
    if trace is not None:
        for stage in trace:
            detail = stage.get("detail")
            print(
                f"[trace] {stage['stage']:<12} {stage['ms']:8.1f} ms  n={stage.get('n', '')}"
                + (f"  {detail}" if detail else ""),
                file=sys.stderr,
            )
    if not args.no_log:
        log_hits(lake, args.tenant, [r.node_id for r in results], args.query)
    if args.json:
        print(json.dumps([r.to_json() for r in results], ensure_ascii=False, indent=2))
        return 0
    if not results:
        known = _known_tenants(lake)
        if args.tenant not in known:
            names = sorted(known)
            listed = ", ".join(names[:10]) + (f", … {len(names) - 10} more" if len(names) > 10 else "")
            raise UserError(
                f"unknown tenant {args.tenant!r} (known: {listed or 'none'}; "
                "`memctl stats` lists the tenants with their counts)"
            )
        print("no memories found")
    words = query_keywords(args.query)
    for i, r in enumerate(results, 1):
        print(f"{i:>2}. [{r.type}] {printable(r.title)}  (score {r.score:.3f})")
        for c in r.citations:
            where = printable(" ".join(x for x in (c.conv_id, c.msg_id, c.speaker, c.ts) if x))
            # a window around the cited span (a whole message may run to thousands of characters; --json has it)
            print(f'      ↳ {where}: "{excerpt_window(c.excerpt, c.highlight, words)}"')
        for u in r.unavailable:
            print(f"      ↳ citation unavailable: {u['reason']}")
    return 0


def _when(value: str | None, flag: str, end_of_day: bool) -> datetime | None:
    from recall.tools import ToolArgumentError, parse_when

    try:
        return parse_when(value, flag, end_of_day)
    except ToolArgumentError as e:
        raise UserError(str(e)) from None


def cmd_tools(args: argparse.Namespace, lake: Lake) -> int:
    from recall.tools import SEARCH_MEMORIES, search_memories

    if args.arguments is None:
        print(json.dumps([SEARCH_MEMORIES], ensure_ascii=False, indent=2))
        return 0
    if not args.tenant:
        raise UserError("--tenant is required to run a call")
    out = search_memories(args.arguments, tenant=args.tenant, lake=lake)
    print(json.dumps(out, ensure_ascii=False, indent=2))
    return 1 if "error" in out else 0


def cmd_sql(args: argparse.Namespace, lake: Lake) -> int:
    import duckdb

    from recall.store import connect, lake_sql, tenant_sql

    if args.tenant is not None and not args.tenant.strip():
        raise UserError("--tenant must not be empty")
    if args.parquet:
        if args.tenant:
            raise UserError("--parquet reads every tenant's rows: it does not combine with --tenant")
        con = lake_sql(lake)
    elif not lake.duckdb_path.exists():
        raise UserError(f"no index at {lake.duckdb_path} (run `memctl materialize` first)")
    else:
        con = tenant_sql(lake, args.tenant) if args.tenant else connect(lake.duckdb_path, read_only=True)
    try:
        rel = con.sql(args.query)
        if rel is None:  # duckdb's stub says never; it is None for a statement that returns no rows
            return 0  # type: ignore[unreachable]
        cols, rows = rel.columns, rel.fetchall()
    except duckdb.Error as e:
        raise UserError(str(e).splitlines()[0]) from None
    finally:
        con.close()
    if args.json:
        print(json.dumps([dict(zip(cols, r)) for r in rows], ensure_ascii=False, default=str, indent=2))
    else:
        _print_rows(cols, rows)
    return 0


def cmd_forget(args: argparse.Namespace, lake: Lake) -> int:
    from datetime import datetime

    from assets.run import materialize
    from jobs.forget import forget_dir, resolve, save_request
    from jobs.schema import AUDIT
    from raw_store.lake import read_table

    lean_build_process()
    if args.end and not args.start:
        raise UserError("--to goes with --from")
    scope, value = next(
        (s, v)
        for s, v in (
            ("node", args.node),
            ("conv", args.conv),
            ("speaker", args.speaker),
            ("topic", args.topic),
            ("window", args.start),
            ("all", args.all),
        )
        if v
    )
    start = _when(args.start, "--from", end_of_day=False) if scope == "window" else None
    end = _when(args.end, "--to", end_of_day=True) if scope == "window" else None
    if scope == "window" and start and end and end < start:
        raise UserError("--to is before --from")
    if not lake.duckdb_path.exists():
        raise UserError(f"no index at {lake.duckdb_path} (run `memctl materialize` first)")
    if args.tenant not in _known_tenants(lake) and not (lake.inbox / args.tenant).is_dir():
        raise UserError(f"unknown tenant {args.tenant!r}")
    now = datetime.now(UTC).replace(tzinfo=None, microsecond=0)
    try:
        request = resolve(
            lake,
            args.tenant,
            scope,
            value if scope in ("node", "conv", "speaker", "topic") else None,
            start=start,
            end=end,
            reason=args.reason,
            requested_at=now,
        )
    except ValueError as e:
        raise UserError(str(e)) from None
    if (forget_dir(lake) / f"{request.id}.json").exists():
        print(f"already requested: {request.id} (re-applying)")
    else:
        save_request(lake, request)
    summary = materialize(lake, progress=not args.quiet)
    if not summary.ok:
        for key, msg in summary.failed.items():
            print(f"memctl: file {key!r} failed: {msg}", file=sys.stderr)
        print(
            f"memctl: forget {request.id} is recorded but the rebuild failed: {summary.lake_failed}; "
            "run `memctl materialize` again",
            file=sys.stderr,
        )
        return 1
    row = next((r for r in read_table(lake.table("audit"), AUDIT).to_pylist() if r["request_id"] == request.id), None)
    if row is None:
        print(f"memctl: forget {request.id} left no audit row", file=sys.stderr)
        return 1
    print(
        f"forgot {request.id} ({scope}{' ' + str(row['value']) if row['value'] else ''}, tenant {args.tenant}): "
        f"{row['messages']} messages, {len(row['nodes'])} nodes, {row['edges']} edges, "
        f"{len(row['blobs'])} raw blobs deleted"
    )
    return 0


def cmd_verify(args: argparse.Namespace, lake: Lake) -> int:
    from jobs.integrity import verify_store

    if args.sample is not None and args.sample < 1:
        raise UserError("--sample must be at least 1")
    if not lake.raw.is_dir():
        raise UserError(f"no raw store at {lake.raw} (run `memctl materialize` first)")
    out = verify_store(lake, args.tenant, sample=args.sample, seed=args.seed, quarantine=not args.dry_run)
    r = out.report
    partial = r.partial + out.leftovers
    if args.json:
        # what this run did, not what it would have done: lists of paths, empty when nothing moved
        print(
            json.dumps(
                {
                    "total": r.total,
                    "checked": r.checked,
                    "corrupt": r.corrupt,
                    "partial": partial,
                    "dry_run": args.dry_run,
                    "quarantined": [p["path"] for p in r.corrupt] if r.quarantined else [],
                    "removed": partial if r.quarantined else [],
                    "reingest": out.invalidated,
                },
                ensure_ascii=False,
                indent=2,
            )
        )
    else:
        print(f"raw store: {out.summary}")
        for p in r.corrupt:
            where = "quarantined" if r.quarantined else "left in place (--dry-run)"
            print(f"  corrupt  {p['path']}  ({p['problem']}; {where})")
        for rel in partial:
            print(f"  partial  {rel}  ({'removed' if r.quarantined else 'left in place'})")
        if out.invalidated:
            print("  `memctl materialize` re-ingests: " + ", ".join(out.invalidated))
    return 0 if r.ok else 1


def cmd_stats(args: argparse.Namespace, lake: Lake) -> int:
    stats = _stats(lake)
    if args.json:
        print(json.dumps(stats, ensure_ascii=False, indent=2, default=str))
        return 0
    _print_counts(lake, stats)
    return 0


def cmd_ui(args: argparse.Namespace, lake: Lake) -> int:
    from assets.run import prepare_dagster_home

    prepare_dagster_home(lake)
    os.environ["MEMCTL_DATA"] = str(lake.root)
    project = Path(__file__).resolve().parent.parent
    cmd, env = ui_command(project, args.host, args.port)
    print(f"lineage UI on http://{args.host}:{args.port}  (DAGSTER_HOME={os.environ['DAGSTER_HOME']})", flush=True)
    return run_process_group(cmd, cwd=project, env=env)


def _known_tenants(lake: Lake) -> set[str]:
    from recall.store import connect

    con = connect(lake.duckdb_path, read_only=True)
    try:
        return {row[0] for row in con.execute("SELECT tenant FROM tenants").fetchall()}
    finally:
        con.close()


def _stats(lake: Lake) -> dict:
    """{"data", "tenants": {tenant: {table: rows}}, "tables": {table: {"rows", "by_tenant", …}}}."""
    from r2g.lake_graph import counts_by, grouped_counts
    from raw_store.lake import part_dirs

    out: dict = {"data": str(lake.root), "tenants": {}, "tables": {}}
    if not part_dirs(lake):
        return out
    for name, detail in (
        ("raw_chunks", None),
        ("messages", None),
        ("nodes", "type"),
        ("edges", "type"),
        ("rejects", "reason"),
    ):
        counts = grouped_counts(lake, name, ["tenant", *([detail] if detail else [])])
        entry = {"rows": int(counts.get_column("rows").sum()), "by_tenant": counts_by(counts, "tenant")}
        if detail:
            entry[f"by_{detail}"] = counts_by(counts, detail)
        out["tables"][name] = entry
    tenants = sorted({k for entry in out["tables"].values() for k in entry["by_tenant"]})
    out["tenants"] = {k: {name: entry["by_tenant"].get(k, 0) for name, entry in out["tables"].items()} for k in tenants}
    return out


def _print_counts(lake: Lake, stats: dict | None = None) -> None:
    stats = stats or _stats(lake)
    if not stats["tables"]:
        print(f"lake at {lake.lake} is empty (run `memctl materialize`)")
        return
    print(
        f"tenants ({len(stats['tenants'])}): "
        + ", ".join(
            f"{k} ({c.get('messages', 0)} messages, {c.get('nodes', 0)} nodes"
            + (f", {c['rejects']} rejects" if c.get("rejects") else "")
            + ")"
            for k, c in stats["tenants"].items()
        )
    )
    for name, entry in stats["tables"].items():
        extra = entry.get("by_type") or entry.get("by_reason") or {}
        detail = _some(extra)
        print(f"{name:<11}{entry['rows']:>8} rows  " + _some(entry["by_tenant"]) + (f"  [{detail}]" if detail else ""))


def _some(counts: dict[str, int], n: int = 8) -> str:
    """ "a=3, b=1" of the first n entries, then how many more."""
    text = ", ".join(f"{k}={v}" for k, v in list(counts.items())[:n])
    return text + (f", … {len(counts) - n} more" if len(counts) > n else "")


def _print_rows(cols: list[str], rows: list[tuple]) -> None:
    cells = [[("NULL" if v is None else str(v)).replace("\n", " ") for v in r] for r in rows]
    widths = [min(60, max([len(c)] + [len(r[i]) for r in cells])) for i, c in enumerate(cols)]
    fmt = lambda vals: "  ".join(v[:w].ljust(w) for v, w in zip(vals, widths))  # noqa: E731
    print(fmt(cols))
    print("  ".join("-" * w for w in widths))
    for r in cells:
        print(fmt(r))
    print(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")


if __name__ == "__main__":
    entry()
