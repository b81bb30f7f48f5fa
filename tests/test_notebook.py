"""recall/recall.ipynb runs top to bottom on a fresh lake: trace table, evidence picture, citations, DuckDB query.

One real execution per module, in a kernel of this interpreter (the venv's ipykernel),
with MEMCTL_DATA pointing at a temp folder that holds only a copy of the sample inbox.
"""

from __future__ import annotations

import base64
import html
import re
import shutil
import struct
import sys
from pathlib import Path

import nbformat
import polars as pl
import pytest
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

from r2g.lake_graph import read_lake_table
from raw_store.lake import Lake

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "recall" / "recall.ipynb"
EN_LINE = "Oh, and my neighbour Xiaoming played football in Riverside Park on Saturday."
ZH_LINE = "小明在公园里踢足球，晚饭前会回来。"
STAGES = ["keywords", "analyze", "seeds", "vectors", "raw", "session", "expand", "score", "mmr", "cite"]


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("notebook") / "data"
    shutil.copytree(ROOT / "data" / "inbox", root / "inbox")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    km = KernelManager(kernel_name=nb.metadata.kernelspec.name)
    with pytest.MonkeyPatch.context() as mp:  # the kernel inherits this environment
        mp.setenv("MEMCTL_DATA", str(root))
        mp.setenv("DAGSTER_HOME", str(root / "dagster_home"))
        client = NotebookClient(nb, km=km, timeout=120, resources={"metadata": {"path": str(NOTEBOOK.parent)}})
        client.execute()
    return nb, km, Lake(root)


def _outputs(nb, cell_id: str) -> list:
    return next(c for c in nb.cells if c.get("id") == cell_id).outputs


def _tables(outputs: list) -> list[list[dict[str, str]]]:
    """Every HTML table among the outputs, as rows of {column: cell text}; polars' quotes around strings dropped."""
    tables = []
    for out in outputs:
        markup = out.get("data", {}).get("text/html")
        if not markup or "<tbody>" not in markup:
            continue
        header = [html.unescape(h) for h in re.findall(r"<th>(.*?)</th>", markup, re.S)]
        body = markup.split("<tbody>", 1)[1]
        rows = [
            [html.unescape(cell).strip('"') for cell in re.findall(r"<td>(.*?)</td>", row, re.S)]
            for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)
        ]
        tables.append([dict(zip(header, row)) for row in rows])
    return tables


def test_the_stored_notebook_has_no_outputs() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.outputs == [] and c.execution_count is None for c in code)
    assert nb.metadata.kernelspec.name == "python3"


def test_it_runs_in_this_interpreter_without_errors_or_warnings(executed) -> None:
    nb, km, _ = executed
    assert km.format_kernel_cmd()[0] == sys.executable, km.kernel_spec.argv
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert not [o.text for o in outputs if o.output_type == "stream" and o.name == "stderr"]


def test_the_trace_table_times_every_stage_of_both_questions(executed) -> None:
    nb, _, _ = executed
    [table] = _tables(_outputs(nb, "trace"))
    assert [row["stage"] for row in table] == STAGES
    assert all(float(row[f"ms_{lang}"]) >= 0 for row in table for lang in ("en", "zh"))
    assert {row["stage"]: int(row["n_en"]) for row in table}["mmr"] == 5


def test_the_evidence_subgraph_is_an_embedded_png(executed) -> None:
    nb, _, _ = executed
    images = [
        base64.b64decode(o.data["image/png"])
        for o in _outputs(nb, "evidence-graph")
        if "image/png" in o.get("data", {})
    ]
    assert len(images) == 1
    png = images[0]
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
    width, height = struct.unpack(">II", png[16:24])
    assert width >= 800 and height >= 400 and len(png) > 20_000


@pytest.mark.parametrize(
    "table_index, line, msg_id, speaker",
    [
        (0, EN_LINE, "L7", "Melanie"),
        (1, ZH_LINE, "m1", "妈妈"),
    ],
    ids=["en", "zh"],
)
def test_the_citations_quote_the_original_line(
    executed, table_index: int, line: str, msg_id: str, speaker: str
) -> None:
    nb, _, _ = executed
    tables = _tables(_outputs(nb, "citations"))
    assert len(tables) == 2
    cited = [row for row in tables[table_index] if row["excerpt"] == line]
    assert cited, tables[table_index]
    row = cited[0]
    assert int(row["rank"]) <= 3
    assert (row["msg_id"], row["speaker"], row["verified"]) == (msg_id, speaker, "true")
    assert row["conv_id"] and row["ts"]


def test_the_duckdb_query_counts_the_lake(executed) -> None:
    nb, _, lake = executed
    by_type, top_entities = _tables(_outputs(nb, "duckdb"))
    nodes = pl.from_arrow(read_lake_table(lake, "nodes")).filter(pl.col("tenant") == "demo")
    expected = dict(nodes.group_by("type").len().iter_rows())
    assert {row["type"]: int(row["nodes"]) for row in by_type} == expected
    entities = nodes.filter(pl.col("type") == "Entity")
    assert len(top_entities) == min(5, entities.height)
    assert int(top_entities[0]["mentions"]) == entities["mentions"].max()


def test_a_persons_facts_are_drawn_on_a_timeline(executed) -> None:
    nb, _, lake = executed
    outputs = _outputs(nb, "timeline")
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == 1
    [table] = _tables(outputs)
    nodes = pl.from_arrow(read_lake_table(lake, "nodes")).filter(pl.col("tenant") == "demo")
    edges = pl.from_arrow(read_lake_table(lake, "edges")).filter(pl.col("tenant") == "demo")
    # the person with the most statements of their own: every one of them, in time order
    agents = edges.filter(pl.col("type") == "AGENT").join(
        nodes.filter(pl.col("type").is_in(["Fact", "Preference"])).select("id"), left_on="src", right_on="id"
    )
    top = agents.group_by("dst").len().sort(["len", "dst"], descending=[True, False])
    assert len(table) == top["len"].max() >= 3
    said = [row["said"] for row in table]
    assert said == sorted(said)
    assert {row["tier"] for row in table} <= {"short", "mid", "long"}
