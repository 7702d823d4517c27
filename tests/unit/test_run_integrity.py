"""A stage's integrity record: written with the stage, checked by every reader, refused on any difference."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from kafka_rebalancer.errors import RunFolderError
from kafka_rebalancer.report.overview import list_runs
from kafka_rebalancer.run_folder import FILES_RECORD, PLAN, SNAPSHOT, VALIDATION, RunFolder, read_json, write_json


def written(tmp_path: Path, stage: str = PLAN) -> RunFolder:
    run = RunFolder(tmp_path / "cluster" / "run-1")
    with run.stage(stage) as out:
        write_json(out / "summary.json", {"plan_hash": "abc"})
        (out / "plan.json").write_text('{"version": 1, "partitions": []}\n')
        (out / "moves.parquet").mkdir()  # a table as Spark writes it: a folder of part files
        (out / "moves.parquet" / "part-00000.parquet").write_bytes(b"PAR1 rows PAR1")
    return run


def test_the_record_lists_every_file_with_its_size_and_sha256(tmp_path: Path) -> None:
    run = written(tmp_path)
    record = read_json(run.stage_path(PLAN) / FILES_RECORD)["files"]
    assert sorted(record) == ["moves.parquet/part-00000.parquet", "plan.json", "summary.json"]
    assert record["plan.json"]["bytes"] == len('{"version": 1, "partitions": []}\n')
    assert len(record["plan.json"]["sha256"]) == 64
    assert run.require(PLAN) == run.stage_path(PLAN)


@pytest.mark.parametrize(("change", "message"), [
    (lambda p: (p / "plan.json").write_text('{"version": 1, "partitions": [] }\n'),
     "plan.json: changed since the plan step wrote it (34 bytes, written as 33); plan again"),
    (lambda p: (p / "plan.json").write_text('{"version": 1, "partitions": []}\r'),
     "plan.json: changed since the plan step wrote it (same size, other content); plan again"),
    (lambda p: (p / "moves.parquet" / "part-00000.parquet").unlink(),
     "moves.parquet/part-00000.parquet: missing, the plan step wrote it (14 bytes); plan again"),
    (lambda p: (p / "moves.parquet" / "part-00001.parquet").write_bytes(b"PAR1 more PAR1"),
     "moves.parquet/part-00001.parquet: not written by the plan step (a file added since, and a reader would read "
     "it); remove it, or plan again"),
    (lambda p: (p / FILES_RECORD).write_text("{not json"),
     "files.json: not a readable integrity record (JSONDecodeError: "),
    (lambda p: (p / FILES_RECORD).write_text('{"files": {"plan.json": {"bytes": 33}}}'),
     "files.json: not a readable integrity record (KeyError: 'sha256')"),
])
def test_a_change_since_the_stage_was_written_is_refused(tmp_path: Path, change: object, message: str) -> None:
    run = written(tmp_path)
    change(run.stage_path(PLAN))  # type: ignore[operator]
    with pytest.raises(RunFolderError) as err:
        run.require(PLAN)
    assert str(err.value).startswith(f"{run.stage_path(PLAN)}/{message}")
    assert "\n" not in str(err.value)


def test_each_stage_names_the_step_that_writes_it_again(tmp_path: Path) -> None:
    for stage, remedy in ((SNAPSHOT, "take a new snapshot"), (VALIDATION, "validate again")):
        run = written(tmp_path / stage, stage)
        (run.stage_path(stage) / "plan.json").write_text("edited\n")
        with pytest.raises(RunFolderError, match=remedy):
            run.require(stage)


def test_a_stage_without_a_record_is_read_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    run = written(tmp_path)
    (run.stage_path(PLAN) / FILES_RECORD).unlink()
    with caplog.at_level(logging.WARNING):
        assert run.require(PLAN) == run.stage_path(PLAN)
    assert f"{run.stage_path(PLAN)}: no integrity record (files.json): written before records began" in caplog.text
    assert not run.recorded(PLAN)


def test_the_brake_reads_a_changed_stage_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    run = written(tmp_path)
    (run.stage_path(PLAN) / "plan.json").write_text("edited\n")
    with caplog.at_level(logging.WARNING):
        assert RunFolder(run.path, strict=False).require(PLAN) == run.stage_path(PLAN)
    assert "plan.json: changed since the plan step wrote it" in caplog.text
    assert "read as it is, to stop what the run started" in caplog.text


def test_a_rewritten_stage_is_checked_against_its_new_record(tmp_path: Path) -> None:
    run = written(tmp_path)
    run.require(PLAN)
    with run.stage(PLAN) as out:  # a retried plan step
        (out / "plan.json").write_text("the new plan\n")
    (run.stage_path(PLAN) / "plan.json").write_text("edited after the retry\n")
    with pytest.raises(RunFolderError, match="changed since the plan step wrote it"):
        run.require(PLAN)


def test_check_stages_covers_every_stage_but_the_journal_and_the_report(tmp_path: Path) -> None:
    run = written(tmp_path)
    with run.stage("after_snapshot") as out:
        (out / "brokers.parquet").write_bytes(b"rows")
    (run.path / "execute" / "all").mkdir(parents=True)
    (run.path / "execute" / "all" / "execution_log.jsonl").write_text("{}\n")  # appended to as it runs: no record
    run.check_stages()
    (run.stage_path("after_snapshot") / "brokers.parquet").write_bytes(b"other rows")
    with pytest.raises(RunFolderError, match=r"after_snapshot/brokers\.parquet: changed since the verify step"):
        RunFolder(run.path).check_stages()


def test_a_run_with_an_unreadable_record_is_still_listed(tmp_path: Path) -> None:
    written(tmp_path / "runs")
    bad = RunFolder(tmp_path / "runs" / "cluster" / "run-2")
    with bad.stage(PLAN) as out:
        (out / "summary.json").write_text("{cut sho")
    runs = {r.run_id: r.status for r in list_runs(tmp_path / "runs")}
    assert runs == {"run-1": "no snapshot", "run-2": "unreadable (RunFolderError)"}


def test_read_json_names_a_damaged_file(tmp_path: Path) -> None:
    path = tmp_path / "decision.json"
    path.write_bytes(b'{"state": "appro\xff"}')
    with pytest.raises(RunFolderError) as err:
        read_json(path)
    assert str(err.value).startswith(f"{path}: not readable JSON (")
    path.write_text(json.dumps({"state": "approved"}))
    assert read_json(path) == {"state": "approved"}
