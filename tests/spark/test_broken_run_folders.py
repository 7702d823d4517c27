"""Every command that reads a run folder, given one changed or damaged after it was written: exit 2 with one line
naming the file (or the same result as before the change), before Spark starts or Kafka is contacted; never a
traceback. The run folder is a real one (snapshot, plan on the session's Spark, validation, a dry-run decision)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_rebalancer import cli
from kafka_rebalancer.approve.approval import write_decision
from kafka_rebalancer.config import load_config
from kafka_rebalancer.kafka_admin import KafkaConnection
from kafka_rebalancer.plan.job import run_plan
from kafka_rebalancer.run_folder import FILES_RECORD, SNAPSHOT, RunFolder, read_json
from kafka_rebalancer.snapshot import write_snapshot
from kafka_rebalancer.snapshot.synthetic import SyntheticSpec, generate
from kafka_rebalancer.validate.suite import validate_plan
from tests.helpers import write_config

pytestmark = pytest.mark.spark

RUN_ID = "broken"
STAGES = ("snapshot", "plan", "validation", "approval")


@dataclass(frozen=True)
class PlannedRun:
    config_path: Path
    run_dir: Path  # where every test's copy lives (run id RUN_ID)
    pristine: Path  # the run as the steps wrote it


@pytest.fixture(scope="module")
def planned_run(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> PlannedRun:
    root = tmp_path_factory.mktemp("broken-runs")
    tables, body = generate(SyntheticSpec(n_brokers=6, n_racks=3, n_pools=2, n_partitions=120, seed=23))
    config_path = write_config(root / "config.yaml", {**body, "run_root": str(root / "runs")})
    config = load_config(config_path)
    run = RunFolder(config.run_dir(RUN_ID))
    write_snapshot(run, tables, {"cluster": config.cluster.name})
    summary = run_plan(spark, config, run)
    validate_plan(config, run)
    write_decision(run, summary["plan_hash"], "dry-run", "tester", "dry run")
    pristine = root / "pristine"
    shutil.copytree(run.path, pristine)
    return PlannedRun(config_path, run.path, pristine)


def fresh_copy(planned: PlannedRun, source: Path | None = None) -> Path:
    shutil.rmtree(planned.run_dir, ignore_errors=True)
    shutil.copytree(source or planned.pristine, planned.run_dir)
    return planned.run_dir


# -- every command, as a process: the first line and the exit code ----------------------------------------------

def command_lines(planned: PlannedRun) -> dict[str, list[str]]:
    """Each command that reads the run, with a Kafka address nothing listens on (it must not get that far)."""
    config, kafka = ["--config", str(planned.config_path)], ["--bootstrap-servers", "127.0.0.1:1"]
    return {
        "plan": ["plan", *config, "--run-id", RUN_ID],
        "validate": ["validate", *config, "--run-id", RUN_ID],
        "execute": ["execute", *config, "--run-id", RUN_ID, *kafka],
        "verify": ["verify", *config, "--run-id", RUN_ID, *kafka],
        "show": ["show", *config, RUN_ID],
        "report": ["report", *config, RUN_ID],
        "execute-reviewed": ["execute-reviewed", *config, "--run-id", RUN_ID, *kafka],
    }


def run_cli(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafka_rebalancer.cli", *args], capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("damage", ["edited", "truncated", "missing"])
def test_every_command_refuses_a_changed_snapshot_with_one_line(planned_run: PlannedRun, damage: str) -> None:
    folder = fresh_copy(planned_run) / SNAPSHOT
    replicas = folder / "replicas.parquet"
    if damage == "edited":  # one replica on a broker the snapshot does not have, as pandas would write it
        frame = pd.read_parquet(replicas)
        frame.loc[0, "broker_id"] = 999
        frame.to_parquet(replicas)
        reason = "changed since the snapshot step wrote it ("
    elif damage == "truncated":
        replicas.write_bytes(replicas.read_bytes()[: replicas.stat().st_size // 2])
        reason = "changed since the snapshot step wrote it ("
    else:
        replicas.unlink()
        reason = "missing, the snapshot step wrote it ("
    for name, args in command_lines(planned_run).items():
        result = run_cli(args)
        assert result.returncode == 2, (name, result.stderr)
        assert result.stderr.splitlines()[0].startswith(f"error: {replicas}: {reason}"), (name, result.stderr)
        assert "take a new snapshot" in result.stderr.splitlines()[0]
        assert "Traceback" not in result.stderr and result.stdout == "", name


def test_the_brake_reads_a_changed_run_with_a_warning(planned_run: PlannedRun) -> None:
    """cancel must stop what a run started whatever happened to its files: it warns and goes on to the cluster
    (here nothing answers: exit 3)."""
    replicas = fresh_copy(planned_run) / SNAPSHOT / "replicas.parquet"
    replicas.write_bytes(replicas.read_bytes()[:100])
    result = run_cli(["cancel", "--config", str(planned_run.config_path), "--run-id", RUN_ID, "--pool", "pool-0",
                      "--bootstrap-servers", "127.0.0.1:1"])
    assert result.returncode == 3, result.stderr
    assert f"{replicas}: changed since the snapshot step wrote it" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_run_written_before_records_began_is_read_with_a_warning_and_its_rows_checked(
        planned_run: PlannedRun) -> None:
    run_dir = fresh_copy(planned_run)
    for stage in STAGES:
        (run_dir / stage / FILES_RECORD).unlink()
    show = run_cli(command_lines(planned_run)["show"])
    assert show.returncode == 0, show.stderr
    assert f"{run_dir / SNAPSHOT}: no integrity record ({FILES_RECORD}): written before records began" in show.stderr
    replicas = run_dir / SNAPSHOT / "replicas.parquet"
    frame = pd.read_parquet(replicas)
    frame.loc[0, "size_bytes"] = -1
    frame.to_parquet(replicas)
    plan = run_cli(command_lines(planned_run)["plan"])
    assert plan.returncode == 2
    assert plan.stderr.splitlines()[-1].startswith(f"error: {replicas}: row 1 (")
    assert "size_bytes is -1, expected an integer >= 0" in plan.stderr


def test_an_unexpected_fault_is_one_line_with_the_traceback_in_a_file(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def fault(args: Any) -> int:
        return {}["no such key"]

    monkeypatch.setattr(cli, "_dispatch", fault)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert cli.main(["runs", "--config", "config.yaml"]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("kafka-rebalancer runs: unexpected error: KeyError: 'no such key' (full traceback "
                               f"in {tmp_path / 'kafka-rebalancer-errors'}/")
    written = next((tmp_path / "kafka-rebalancer-errors").iterdir()).read_text()
    assert "Traceback (most recent call last)" in written and "in fault" in written


def test_plan_prints_its_totals_as_a_sentence(planned_run: PlannedRun) -> None:
    fresh_copy(planned_run)
    result = run_cli(command_lines(planned_run)["plan"])
    assert result.returncode == 0, result.stderr
    line = result.stdout.strip()
    assert "{" not in line and " partitions change: " in line and " replica moves (" in line, line


def test_show_piped_keeps_each_line_whole(planned_run: PlannedRun) -> None:
    run_dir = fresh_copy(planned_run)
    result = run_cli(command_lines(planned_run)["show"])
    assert result.returncode == 0, result.stderr
    lines = [line.rstrip() for line in result.stdout.splitlines()]
    assert f"folder {run_dir}; plan {read_json(run_dir / 'plan' / 'summary.json')['plan_hash']}" in lines
    pools = read_json(run_dir / "plan" / "summary.json")["pools"].values()
    for pool in pools:  # each pool's table header, one column per resource, whole on its line however wide
        header = [f"{resource} (band)" for resource in pool["resources"]]
        assert any(line.startswith("broker") and all(h in line for h in header) for line in lines), header
    assert max(map(len, lines)) > 150


# -- property: any change to any file, every command --------------------------------------------------------------

class ReachedSpark(Exception):
    pass


class ReachedKafka(Exception):
    pass


def _no_spark(master: str) -> Any:
    raise ReachedSpark


def _no_kafka(self: Any) -> Any:
    raise ReachedKafka


@pytest.fixture
def stopped_at_the_edges(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Spark and Kafka replaced by markers: a command that passed its checks stops there, so a result says how far
    it got (and nothing reaches the session's Spark or a cluster)."""
    monkeypatch.setattr(cli, "_spark", _no_spark)
    monkeypatch.setattr(KafkaConnection, "confluent_config", _no_kafka)
    monkeypatch.setattr(KafkaConnection, "kafka_python_config", _no_kafka)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    yield


def outcome(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Exit code, standard output and the error (the logs go to pytest's handler here: stderr is the error alone)."""
    code = cli.main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err.strip().split(" (full traceback in ")[0]


def mutations(planned: PlannedRun) -> st.SearchStrategy[tuple[str, str, Any]]:
    files = sorted(str(p.relative_to(planned.pristine)) for p in planned.pristine.rglob("*") if p.is_file())
    kinds = st.sampled_from(["truncate", "flip", "delete", "append", "junk", "duplicate_row", "negative_cell",
                             "add_file", "whitespace"])
    return st.tuples(st.sampled_from(files), kinds, st.integers(0, 2**31))


def mutate(run_dir: Path, relative: str, kind: str, n: int) -> None:
    path = run_dir / relative
    data = path.read_bytes()
    if kind == "truncate":
        path.write_bytes(data[: n % max(len(data), 1)])
    elif kind == "flip" and data:
        i = n % len(data)
        path.write_bytes(data[:i] + bytes([data[i] ^ (1 + n % 255)]) + data[i + 1:])
    elif kind == "delete":
        path.unlink()
    elif kind == "append":
        path.write_bytes(data + n.to_bytes(4, "little"))
    elif kind == "junk":
        path.write_bytes(b"not what was written " + n.to_bytes(4, "little"))
    elif kind == "add_file":
        (path.parent / f"part-{n}.parquet").write_bytes(data)
    elif kind == "whitespace":
        path.write_bytes(data + b"\n")
    elif path.suffix == ".parquet":
        frame = pq.read_table(path).to_pandas()
        if len(frame) and kind == "duplicate_row":
            frame = pd.concat([frame, frame.iloc[[n % len(frame)]]], ignore_index=True)
        elif len(frame):
            numeric = [c for c in frame.columns if pd.api.types.is_numeric_dtype(frame[c])
                       and not pd.api.types.is_bool_dtype(frame[c])]
            if numeric:
                frame.loc[n % len(frame), numeric[n % len(numeric)]] = -1
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)


def assert_refused_or_unchanged(result: tuple[int, str, str], before: tuple[int, str, str], run_dir: Path,
                                relative: str, kind: str) -> None:
    """Exit 2 naming the changed file, or as before. A changed record may name any file of its stage, and an added
    file is named itself."""
    if result == before:
        return
    code, _, line = result
    assert code == 2, (relative, kind, result)
    whole_stage = relative.endswith(FILES_RECORD) or kind == "add_file"
    named = str(run_dir / relative.split("/")[0]) if whole_stage else str(run_dir / relative)
    assert line.startswith("error: ") and "\n" not in line and named in line, (relative, kind, line)


PROPERTY = settings(max_examples=30, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture(scope="module")
def results_before() -> dict[str, tuple[int, str, str]]:
    return {}


def check_every_command(planned: PlannedRun, source: Path, capsys: pytest.CaptureFixture[str],
                        before: dict[str, tuple[int, str, str]], relative: str, kind: str,
                        original: Path | None = None, names: tuple[str, ...] | None = None) -> None:
    """Each command on a copy of `source` against its result on a copy of `original` (the pristine run)."""
    for name, args in command_lines(planned).items():
        if names is not None and name not in names:
            continue
        if name not in before:
            fresh_copy(planned, original)
            before[name] = outcome(args, capsys)
        fresh_copy(planned, source)
        assert_refused_or_unchanged(outcome(args, capsys), before[name], planned.run_dir, relative, kind)


@PROPERTY
@given(change=st.data())
def test_property_any_change_to_a_recorded_run(planned_run: PlannedRun, stopped_at_the_edges: None,
                                               capsys: pytest.CaptureFixture[str],
                                               results_before: dict[str, tuple[int, str, str]],
                                               tmp_path: Path, change: st.DataObject) -> None:
    relative, kind, n = change.draw(mutations(planned_run))
    changed = tmp_path / "changed"
    shutil.rmtree(changed, ignore_errors=True)
    shutil.copytree(planned_run.pristine, changed)
    mutate(changed, relative, kind, n)
    check_every_command(planned_run, changed, capsys, results_before, relative, kind)


@pytest.fixture(scope="module")
def legacy_results_before() -> dict[str, tuple[int, str, str]]:
    return {}


@PROPERTY
@given(change=st.data())
def test_property_any_change_to_a_snapshot_without_a_record(
        planned_run: PlannedRun, stopped_at_the_edges: None, capsys: pytest.CaptureFixture[str],
        legacy_results_before: dict[str, tuple[int, str, str]], tmp_path: Path, change: st.DataObject) -> None:
    """Written before records began: the row checks stand between a changed snapshot and the planner (`plan`)
    or the executor (`execute`)."""
    legacy = tmp_path / "legacy"
    if not legacy.exists():
        shutil.copytree(planned_run.pristine, legacy)
        for stage in STAGES:
            (legacy / stage / FILES_RECORD).unlink()
    tables = sorted(f"{SNAPSHOT}/{p.name}" for p in (legacy / SNAPSHOT).glob("*.parquet"))
    relative = change.draw(st.sampled_from(tables))
    kind = change.draw(st.sampled_from(["truncate", "flip", "junk", "duplicate_row", "negative_cell"]))
    n = change.draw(st.integers(0, 2**31))
    changed = tmp_path / "changed"
    shutil.rmtree(changed, ignore_errors=True)
    shutil.copytree(legacy, changed)
    mutate(changed, relative, kind, n)
    check_every_command(planned_run, changed, capsys, legacy_results_before, relative, kind, legacy,
                        ("plan", "execute"))


def test_the_markers_stop_commands_that_passed_their_checks(planned_run: PlannedRun, stopped_at_the_edges: None,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """The property tests' "same result" is a real one: on the run as written, plan gets to Spark, execute and
    verify get to Kafka, and the rest succeed."""
    reached = {}
    for name, args in command_lines(planned_run).items():
        fresh_copy(planned_run)
        reached[name] = outcome(args, capsys)
    assert reached["plan"][2].endswith("unexpected error: ReachedSpark: ")
    for name in ("execute", "verify", "execute-reviewed"):
        assert reached[name][2].endswith("unexpected error: ReachedKafka: "), (name, reached[name])
    for name in ("validate", "show", "report"):
        assert reached[name][0] == 0, (name, reached[name])

