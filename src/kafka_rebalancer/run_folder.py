"""The run folder: one per DAG run and cluster; every stage owns one sub-folder of it.

A stage writes into a hidden staging folder and renames it into place only when everything is written, so a
reader never sees a half-written stage, and a retried stage simply redoes its own folder (README: Artifacts of a run).
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from kafka_rebalancer.errors import RunFolderError
from kafka_rebalancer.model.schemas import TableSchema

SNAPSHOT, PLAN, VALIDATION, EXECUTE, VERIFY = "snapshot", "plan", "validation", "execute", "verify"
APPROVAL, REPORT = "approval", "report"
_PRODUCED_BY = {SNAPSHOT: "snapshot", PLAN: "plan", VALIDATION: "validate", VERIFY: "verify"}


class RunFolder:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).resolve()

    def __repr__(self) -> str:
        return f"RunFolder({self.path})"

    def stage_path(self, name: str) -> Path:
        return self.path / name

    def has(self, name: str) -> bool:
        return self.stage_path(name).is_dir()

    def require(self, name: str) -> Path:
        """The completed stage folder, or a clear error saying which step to run first."""
        path = self.stage_path(name)
        if not path.is_dir():
            step = _PRODUCED_BY.get(name.split("/")[0], name)
            raise RunFolderError(f"{self.path} has no complete '{name}' stage; run the '{step}' step first")
        return path

    @contextmanager
    def stage(self, name: str) -> Iterator[Path]:
        """Write a stage atomically: yields a staging folder that replaces `name` only if the block succeeds."""
        final = self.stage_path(name)
        final.parent.mkdir(parents=True, exist_ok=True)
        staging = final.parent / f".{final.name}.staging-{uuid.uuid4().hex[:8]}"
        staging.mkdir()
        try:
            yield staging
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        if final.exists():
            retired = final.parent / f".{final.name}.retired-{uuid.uuid4().hex[:8]}"
            final.rename(retired)
            staging.rename(final)
            shutil.rmtree(retired, ignore_errors=True)
        else:
            staging.rename(final)


ROW_GROUP_ROWS = 65_536  # small enough that Spark can read a large table with every core


def write_table(folder: Path, schema: TableSchema, frame: pd.DataFrame) -> Path:
    path = folder / f"{schema.name}.parquet"
    pq.write_table(schema.to_arrow_table(frame), path, row_group_size=ROW_GROUP_ROWS)
    return path


def read_table(folder: Path, schema: TableSchema) -> pd.DataFrame:
    """A table written by write_table or by Spark (a folder of part files), checked against its schema."""
    import pyarrow as pa

    path = folder / f"{schema.name}.parquet"
    if not path.exists():
        raise RunFolderError(f"missing table {path}")
    as_written = (f"expected the '{schema.name}' table as the step that wrote it left it (truncated or corrupt? "
                  "re-run that step)")
    try:
        table = pq.read_table(path)
        names = table.column_names
    except (OSError, pa.ArrowException, ValueError) as exc:  # ValueError: a damaged name that is not UTF-8
        raise RunFolderError(f"{path}: not a readable Parquet file ({exc}), {as_written}") from None
    missing = [n for n in schema.names if n not in names]
    if missing:
        raise RunFolderError(f"{path}: columns {missing} missing (schema '{schema.name}')")
    columns = []
    for field in schema.arrow():
        if len(table.schema.get_all_field_indices(field.name)) > 1:
            raise RunFolderError(f"{path}: column {field.name}: given twice, expected one column of that name")
        column = table.column(field.name)
        if not field.nullable and column.null_count:
            raise RunFolderError(f"{path}: column {field.name}: {column.null_count} empty value(s), expected a "
                                 f"value ({field.type}) in every row")
        try:
            columns.append(column.cast(field.type))
        except pa.ArrowException as exc:
            raise RunFolderError(f"{path}: column {field.name}: {column.type} values that do not convert ({exc}), "
                                 f"expected {field.type}") from None
    try:
        return pa.Table.from_arrays(columns, schema=schema.arrow()).to_pandas()
    except (pa.ArrowException, ValueError) as exc:  # e.g. text that is not UTF-8: damaged bytes inside the file
        raise RunFolderError(f"{path}: values that cannot be read ({exc}), {as_written}") from None


def write_json(path: Path, obj: Any) -> None:
    """JSON with stable formatting (plans are compared byte for byte)."""
    text = json.dumps(obj, indent=2, sort_keys=False, ensure_ascii=False) + "\n"
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    tmp.replace(path)


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise RunFolderError(f"missing file {path}") from None
