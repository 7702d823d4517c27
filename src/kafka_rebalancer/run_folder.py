"""The run folder: one per DAG run and cluster; every stage owns one sub-folder of it.

A stage writes into a hidden staging folder and renames it into place only when everything is written, so a
reader never sees a half-written stage, and a retried stage simply redoes its own folder (README: Artifacts of a run).

Each stage also records every file it wrote, with its size and sha256 (`files.json`), and a reader checks a stage
against that record before it trusts a byte of it (`require`, `completed`): a file edited, cut short or lost after it
was written is refused with the step that makes it again, before Spark or Kafka is involved. This catches damage and
edits made outside the product, not someone who rewrites the record too.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from kafka_rebalancer.errors import RunFolderError, one_line
from kafka_rebalancer.model.run_actions import Action, run_action
from kafka_rebalancer.model.schemas import TableSchema

log = logging.getLogger(__name__)

SNAPSHOT, PLAN, VALIDATION, EXECUTE, VERIFY = "snapshot", "plan", "validation", "execute", "verify"
APPROVAL, REPORT = "approval", "report"
FORECAST = "forecast"  # the capacity forecast, written by the plan step after its plan (issue 55)
_PRODUCED_BY = {SNAPSHOT: "snapshot", PLAN: "plan", FORECAST: "plan", VALIDATION: "validate", VERIFY: "verify",
                APPROVAL: "approve", REPORT: "report", "after_snapshot": "verify",
                "current": run_action(Action.EXECUTE_REVIEWED).command,
                "review": run_action(Action.EXECUTE_REVIEWED).command}
FILES_RECORD = "files.json"  # the integrity record of a stage: every file's size and sha256, written last
NOTIFICATIONS_RECORD = "notifications.json"  # what the run's messages did per channel (notify.outbox)
# What to do about a stage whose files changed since they were written: the step that writes it again.
_REMEDY = {SNAPSHOT: "take a new snapshot (a new run: `kafka-rebalancer snapshot`, or trigger the DAG again)",
           PLAN: "plan again (`kafka-rebalancer plan --run-id <run>`), then validate",
           FORECAST: "plan again (`kafka-rebalancer plan --run-id <run>`): the plan step writes the forecast",
           VALIDATION: "validate again (`kafka-rebalancer validate --run-id <run>`)",
           APPROVAL: "the decision no longer holds: plan and approve again in a new run",
           REPORT: "rebuild it (`kafka-rebalancer report <run>`)",
           VERIFY: "verify again (`kafka-rebalancer verify --run-id <run>`)",
           "after_snapshot": "verify again (`kafka-rebalancer verify --run-id <run>`)"}
_OTHER_REMEDY = "start a new run: this stage is the product's own record of what it did"


class RunFolder:
    def __init__(self, path: str | Path, *, strict: bool = True) -> None:
        """`strict=False` only for the brake (cancel): a stage that changed since it was written is a warning, so
        what was started can always be stopped."""
        self.path = Path(path).resolve()
        self.strict = strict
        self._checked: set[str] = set()  # stages whose files matched their record in this process
        self.rows_checked: set[str] = set()  # record-less stages whose rows a reader checked in this process

    def __repr__(self) -> str:
        return f"RunFolder({self.path})"

    def stage_path(self, name: str) -> Path:
        return self.path / name

    def has(self, name: str) -> bool:
        return self.stage_path(name).is_dir()

    def require(self, name: str) -> Path:
        """The completed stage folder, its files as the step wrote them; else a clear error saying which step to
        run (first, or again)."""
        path = self.stage_path(name)
        if not path.is_dir():
            step = _PRODUCED_BY.get(name.split("/")[0], name)
            raise RunFolderError(f"{self.path} has no complete '{name}' stage; run the '{step}' step first")
        if name not in self._checked:
            try:
                check_files(path, name)
            except RunFolderError as exc:
                if self.strict:
                    raise
                log.warning("%s; read as it is, to stop what the run started", exc)
            self._checked.add(name)
        return path

    def completed(self, name: str) -> Path | None:
        """The stage folder checked as `require` does, or None when the stage has not been written."""
        return self.require(name) if self.has(name) else None

    def check_stages(self) -> None:
        """Every stage the run has written (its execution journal and report aside) against its record: what a
        reader of the whole run (`show`, `report`) checks before it trusts any of it."""
        for folder in sorted(self.path.iterdir()) if self.path.is_dir() else []:
            if folder.is_dir() and not folder.name.startswith(".") and folder.name not in (EXECUTE, REPORT):
                self.require(folder.name)

    def recorded(self, name: str) -> bool:
        """Whether the stage carries an integrity record (stages written before records began do not)."""
        return (self.stage_path(name) / FILES_RECORD).is_file()

    @contextmanager
    def stage(self, name: str) -> Iterator[Path]:
        """Write a stage atomically: yields a staging folder that replaces `name` only if the block succeeds."""
        final = self.stage_path(name)
        final.parent.mkdir(parents=True, exist_ok=True)
        staging = final.parent / f".{final.name}.staging-{uuid.uuid4().hex[:8]}"
        staging.mkdir()
        try:
            yield staging
            write_record(staging)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        self._checked.discard(name)
        if final.exists():
            retired = final.parent / f".{final.name}.retired-{uuid.uuid4().hex[:8]}"
            final.rename(retired)
            staging.rename(final)
            shutil.rmtree(retired, ignore_errors=True)
        else:
            staging.rename(final)


def write_record(folder: Path) -> None:
    """The stage's integrity record of the files in `folder`, written once the step has written them all."""
    write_json(folder / FILES_RECORD, {"files": _describe_files(folder)})


def _describe_files(folder: Path) -> dict[str, dict[str, Any]]:
    """Every file under `folder` (Spark's part files too) by its path relative to it: size and sha256."""
    out = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        relative = path.relative_to(folder).as_posix()
        if relative != FILES_RECORD:
            with path.open("rb") as handle:
                digest = hashlib.file_digest(handle, "sha256").hexdigest()
            out[relative] = {"bytes": path.stat().st_size, "sha256": digest}
    return out


def check_files(folder: Path, name: str) -> None:
    """Refuse (RunFolderError) a stage whose files differ from its record: a file changed, missing, or added (a
    reader such as Spark would read it too). A stage without a record was written before records began: a
    warning, and its readers check what they read (the snapshot's rows, for one)."""
    record_path = folder / FILES_RECORD
    remedy = _REMEDY.get(name.split("/")[0], _OTHER_REMEDY)
    step = f"the {_PRODUCED_BY.get(name.split('/')[0], name)} step"
    if not record_path.exists():
        log.warning("%s: no integrity record (%s): written before records began, so edits since cannot be "
                    "detected; its readers check the rows they can", folder, FILES_RECORD)
        return
    try:
        record = json.loads(record_path.read_bytes())
        files = record["files"]
        expected = {str(k): (int(v["bytes"]), str(v["sha256"])) for k, v in files.items()}
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise RunFolderError(f"{record_path}: not a readable integrity record ({type(exc).__name__}: {exc}), "
                             f"expected the {FILES_RECORD} {step} wrote; {remedy}") from None
    found = _describe_files(folder)
    for relative, (size, digest) in expected.items():
        path = folder / relative
        if relative not in found:
            raise RunFolderError(f"{path}: missing, {step} wrote it ({size:,} bytes); {remedy}")
        now = found[relative]
        if (now["bytes"], now["sha256"]) != (size, digest):
            what = (f"{now['bytes']:,} bytes, written as {size:,}" if now["bytes"] != size
                    else "same size, other content")
            raise RunFolderError(f"{path}: changed since {step} wrote it ({what}); {remedy}")
    added = sorted(set(found) - set(expected))
    if added:
        raise RunFolderError(f"{folder / added[0]}: not written by {step} (a file added since, and a reader "
                             f"would read it); remove it, or {remedy}")


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
        raise RunFolderError(f"{path}: not a readable Parquet file ({one_line(exc)}), {as_written}") from None
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
            raise RunFolderError(f"{path}: column {field.name}: {column.type} values that do not convert "
                                 f"({one_line(exc)}), expected {field.type}") from None
    try:
        return pa.Table.from_arrays(columns, schema=schema.arrow()).to_pandas()
    except (pa.ArrowException, ValueError) as exc:  # e.g. text that is not UTF-8: damaged bytes inside the file
        raise RunFolderError(f"{path}: values that cannot be read ({one_line(exc)}), {as_written}") from None


def write_json(path: Path, obj: Any) -> None:
    """JSON with stable formatting (plans are compared byte for byte)."""
    text = json.dumps(obj, indent=2, sort_keys=False, ensure_ascii=False) + "\n"
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    tmp.replace(path)


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except FileNotFoundError:
        raise RunFolderError(f"missing file {path}") from None
    except (ValueError, OSError) as exc:  # ValueError: not JSON, or not UTF-8 text
        raise RunFolderError(f"{path}: not readable JSON ({one_line(exc)}), expected the file as the step that wrote "
                             "it left it (damaged? run that step again)") from None
