"""Materialization metadata shared by the assets: row count, column schema, markdown preview."""

from typing import Sequence

import dagster as dg
import pyarrow as pa


def table_metadata(table: pa.Table, preview_columns: Sequence[str] = (), rows: int = 5) -> dict:
    """Row count, column schema and a small markdown preview of `table`."""
    schema = dg.TableSchema(columns=[dg.TableColumn(f.name, str(f.type)) for f in table.schema])
    meta = {"dagster/row_count": table.num_rows, "dagster/column_schema": schema}
    cols = [c for c in preview_columns if c in table.column_names]
    if cols and table.num_rows:
        meta["preview"] = dg.MetadataValue.md(markdown_table(table.select(cols).slice(0, rows).to_pylist(), cols))
    return meta


def markdown_table(rows: list[dict], cols: Sequence[str], width: int = 60) -> str:
    def cell(v: object) -> str:
        s = "" if v is None else str(v)
        s = s.replace("|", "\\|").replace("\n", " ")
        return s if len(s) <= width else s[: width - 1] + "…"

    head = "| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n"
    return head + "".join("| " + " | ".join(cell(r.get(c)) for c in cols) + " |\n" for r in rows)

