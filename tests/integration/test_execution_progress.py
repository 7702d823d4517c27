"""Execution progress and stall reporting on the session's real local Kafka cluster (README: Execution, issue 37).

Each test gets a fresh topic with data and a validated plan of known moves (the snapshot is real; the plan is
written by hand), executed for real under a replication throttle:

- progress: moves copying a few MiB a second, one at a time onto broker 6; while they run, `kafka-rebalancer status`
  and the runs page's status column show where the execution stands, and afterwards the execution log's estimates
  at 25/50/75 % of the bytes predicted the real end and the task log carried the progress line;
- stall: a move under a throttle of 1 KiB/s, which Kafka lets copy one fetch and then nothing for seconds: the
  stall is named in the execution log, the task log, the move timeout's error and the report's timeline; the failed
  execution is no longer shown in progress, and the cluster is left clean (the executor clears its throttle,
  `cancel` stops the reassignment).
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from bench.execute import produce_bulk, wait_in_sync
from bench.execute_figures import estimate_errors, last_attempt, wall_span
from kafka_rebalancer.cli import main as cli_main
from kafka_rebalancer.errors import ExecutionError
from kafka_rebalancer.kafka_admin import ClusterAdmin, KafkaConnection
from kafka_rebalancer.report.overview import list_runs
from kafka_rebalancer.report.run_report import collect, write_report
from tests.integration.conftest import (
    BROKERS,
    PlannedMoves,
    assert_untouched_by_execution,
    execution_log,
    planned_run,
    reset_cluster,
    wait_until,
)
from tools.demo_workload import TopicSpec, create_topics

pytestmark = [pytest.mark.kafka]

MiB = 2**20
# Progress: five partitions of PARTITION_BYTES, each gaining a replica on RECEIVER, one move at a time (each is 20 %
# of the bytes: the 25/50/75 % points fall on distinct moves). The throttle-bound minimum is 25 s; Kafka copies one
# partition at about 0.7 of the throttle here, so the moves take about 35 s.
PARTITIONS, PARTITION_BYTES, THROTTLE, RECEIVER = 5, 20 * MiB, 4 * MiB, 6
# Stall: the first fetch copies one record batch (0.75 MiB), then the 1 KiB/s quota holds the follower back for about
# 11 s (the quota's window): a stall of STALL_AFTER_S, ended by the move timeout before the next fetch. That needs
# the quotas of brokers 1 (serving) and 3 (receiving) idle for the last 11 s, as they are after the progress test
# (its copies onto broker 6 served by broker 1 come first); back to back, a stall's first fetch came only at 7 s.
STALL_BYTES, STALL_THROTTLE, STALL_AFTER_S, STALL_TIMEOUT_S = 8 * MiB, 1024, 3, 8
# The estimate's predicted finish against the real one: a sane bound (make bench-execute measures the tight figure).
ESTIMATE_BOUND = 0.5


@contextmanager
def planned_moves(kafka_cluster: Any, tmp_path: Path, prefix: str, assignment: list[list[int]],
                  targets: list[list[int]], partition_bytes: int, execution: dict[str, Any]) -> Iterator[PlannedMoves]:
    """A topic with `assignment` filled with partition_bytes per partition (fast: acks=1, then every ISR complete),
    and a validated plan moving partition p to targets[p]; the topic and whatever the test left are removed after."""
    bootstrap = kafka_cluster.load().bootstrap_servers
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    create_topics(bootstrap, [TopicSpec(topic, assignment, [])])
    try:
        produce_bulk(bootstrap, {(topic, p): partition_bytes for p in range(len(assignment))})
        with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
            wait_in_sync(admin, timeout_s=120)
        moves = [(topic, p, old, new) for p, (old, new) in enumerate(zip(assignment, targets, strict=True))]
        yield planned_run(bootstrap, tmp_path, f"{prefix}-{topic}", topic, moves, execution)
    finally:
        reset_cluster(bootstrap, [topic])


@pytest.fixture
def bulk(kafka_cluster: Any, tmp_path: Path) -> Iterator[PlannedMoves]:
    # Partition p on brokers p+1 and the next of 1-5; its follower moves to RECEIVER, its leader serves the copy.
    assignment = [[p + 1, (p + 1) % 5 + 1] for p in range(PARTITIONS)]
    with planned_moves(kafka_cluster, tmp_path, "progress", assignment, [[old[0], RECEIVER] for old in assignment],
                       PARTITION_BYTES, {"max_moves_per_broker": 1, "poll_interval_s": 0.5,
                                         "move_timeout_s": 150}) as planned:
        yield planned


@pytest.fixture
def stalling(kafka_cluster: Any, tmp_path: Path,
             caplog: pytest.LogCaptureFixture) -> Iterator[tuple[PlannedMoves, ExecutionError]]:
    """A move stalled for real: the execution failed on the move timeout. Now and then a reassignment the executor
    starts under its 1 KiB/s throttle is not throttled at all (8 MiB, or 64 MiB, copied whole in under a second: 3
    runs in 20 here, once with every broker reporting the throttle before the move started); such a run leaves
    nothing to stall, and a fresh topic is tried, 3 at most."""
    caplog.set_level(logging.INFO, logger="kafka_rebalancer")
    with ExitStack() as stack:
        for attempt in range(3):
            planned = stack.enter_context(planned_moves(
                kafka_cluster, tmp_path / f"attempt-{attempt}", "stall", [[1, 2]], [[1, 3]], STALL_BYTES,
                {"tune_throttle": False, "stall_after_s": STALL_AFTER_S, "poll_interval_s": 0.5,
                 "move_timeout_s": STALL_TIMEOUT_S}))
            try:
                result = planned.execute(STALL_THROTTLE)
            except ExecutionError as failure:
                yield planned, failure
                return
            assert result["completed"] == 1, result  # copied whole, unthrottled
        raise AssertionError("Kafka copied the move unthrottled 3 times in a row: no stall to observe")


def in_background(planned: PlannedMoves, throttle: int) -> tuple[ThreadPoolExecutor, Future]:
    pool = ThreadPoolExecutor(1, thread_name_prefix="executor")
    return pool, pool.submit(planned.execute, throttle)


def stop_background(planned: PlannedMoves, pool: ThreadPoolExecutor, future: Future) -> None:
    """A test that failed while the executor runs: cancel it (it starts nothing more and exits) and wait for it."""
    if not future.done():
        planned.cancel()
    pool.shutdown(wait=True)


def wait_for_estimate(planned: PlannedMoves, future: Future, fraction: float) -> None:
    def reached() -> bool:
        return any(e["action"] == "estimate" and e["done_fraction"] >= fraction for e in execution_log(planned.run))

    wait_until(lambda: future.done() or reached(), 150, f"an estimate at {fraction:.0%} of the bytes", poll_s=0.2)
    assert reached(), f"the execution ended with no estimate at {fraction:.0%} of the bytes: {future.result()}"


def status_lines(planned: PlannedMoves, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """`kafka-rebalancer status`, in process (the CLI's entry point), its lines about executions in progress."""
    capsys.readouterr()
    code = cli_main(["status", "--config", str(planned.config_path), "--bootstrap-servers", planned.bootstrap])
    out = capsys.readouterr()
    assert code == 0, out.err[-3000:]
    return [line for line in out.out.splitlines() if line.startswith("executing:")]


def page_status(planned: PlannedMoves) -> str:
    """The run's cell in the runs page's status column (the CLI's `runs` too)."""
    return {r.run_id: r for r in list_runs(planned.config.run_root, planned.config.cluster.name)}[
        planned.run.path.name].status


def recorded_percentages(planned: PlannedMoves) -> set[int]:
    return {round(100 * e["done_fraction"]) for e in execution_log(planned.run) if e["action"] == "estimate"}


def test_progress_is_shown_while_executing_and_the_estimates_predict_the_end(
        bulk: PlannedMoves, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> None:
    caplog.set_level(logging.INFO, logger="kafka_rebalancer")
    pool, future = in_background(bulk, THROTTLE)
    try:
        wait_for_estimate(bulk, future, 0.25)
        lines = status_lines(bulk, capsys)
        shown_on_page = page_status(bulk)
        assert not future.done(), "the execution ended before status was read: the test's moves are too quick"
        result = future.result(timeout=180)
    finally:
        stop_background(bulk, pool, future)
    run_id = bulk.run.path.name
    where = re.compile(r"(\d+) % of the bytes at \d\d:\d\d:\d\d, finish about \d\d:\d\d UTC")
    assert len(lines) == 1 and lines[0].startswith(f"executing: run {run_id}, pool all: "), lines
    shown = where.search(lines[0])
    assert shown and 25 <= int(shown.group(1)) < 100 and int(shown.group(1)) in recorded_percentages(bulk), lines
    page = re.fullmatch(rf"executing or failed \(all: {where.pattern}\)", shown_on_page)
    assert page and 25 <= int(page.group(1)) < 100, shown_on_page
    assert result["completed"] == PARTITIONS and result["skipped"] == []
    assert status_lines(bulk, capsys) == []  # finished: no longer in progress

    entries = last_attempt(execution_log(bulk.run))
    started, finished = wall_span(entries)
    errors = estimate_errors(entries, finished - started)
    assert {"0", "25", "50", "75"} <= set(errors), errors
    for point in ("25", "50", "75"):
        assert abs(errors[point]["error"]) <= ESTIMATE_BOUND, (point, errors, finished - started)
    assert_progress_logged(caplog, sum(e["bytes"] for e in entries if e["action"] == "started"))


def assert_progress_logged(caplog: pytest.LogCaptureFixture, total_bytes: int) -> None:
    """The task log's progress line (every 10 s and at the end): moves and MiB done of the total."""
    shape = re.compile(r"progress all: (\d+)/(\d+) moves, ([\d.]+) of ([\d.]+) MiB, \d+s elapsed, ")
    logged = [m.groups() for r in caplog.records if r.name == "kafka_rebalancer.execute.progress"
              if (m := shape.match(r.getMessage()))]
    total = f"{total_bytes / MiB:.1f}"
    assert logged and all(t == str(PARTITIONS) and of == total for _, t, _, of in logged), logged
    assert any(int(done) < PARTITIONS for done, _, _, _ in logged), f"no progress line while moving: {logged}"
    assert logged[-1] == (str(PARTITIONS), str(PARTITIONS), total, total), logged


def test_a_stalled_move_is_named_in_the_log_the_timeout_and_the_report(
        stalling: tuple[PlannedMoves, ExecutionError], caplog: pytest.LogCaptureFixture,
        capsys: pytest.CaptureFixture[str]) -> None:
    stalled_run, failure = stalling
    name = f"{stalled_run.topic}-0"
    message = str(failure)
    assert f"not complete after {STALL_TIMEOUT_S}s: ['{name}']" in message, message
    assert f"stalled (no bytes copied for {STALL_AFTER_S}s): ['{name}']" in message, message

    entries = execution_log(stalled_run.run)
    started = [e for e in entries if e["action"] == "started"]
    assert [(e["topic"], e["partition"], e["old"], e["new"]) for e in started] == [
        (stalled_run.topic, 0, [1, 2], [1, 3])]
    stalled = [e for e in entries if e["action"] == "stalled"]
    assert stalled and {(e["topic"], e["partition"]) for e in stalled} == {(stalled_run.topic, 0)}, entries
    assert all(STALL_AFTER_S <= e["since_s"] < STALL_TIMEOUT_S and e["copied_bytes"] < STALL_BYTES for e in stalled)
    timeout = [e for e in entries if e["action"] == "timeout"]
    assert [(e["stuck"], e["stalled"]) for e in timeout] == [([name], [name])], entries
    assert any(r.levelno == logging.WARNING and r.getMessage().startswith(f"{name}: no bytes copied for")
               for r in caplog.get_records("setup")), "the stall was not named in the task log"
    # The executor cleared its throttle on its way out; the reassignment it leaves is what `cancel` is for.
    assert entries[-1]["action"] == "throttle_cleared", entries[-3:]
    with ClusterAdmin(KafkaConnection(stalled_run.bootstrap)) as admin:
        assert admin.throttle_configs(BROKERS, [stalled_run.topic]) == {}
    # Failed: no longer in progress, so neither `status` nor the runs page show its last estimate as where it stands.
    assert status_lines(stalled_run, capsys) == []
    assert page_status(stalled_run) == "executing or failed"

    view = collect(stalled_run.run).executions[0]
    assert view.state == "failed: moves stuck past the move timeout"
    marked = [m for m in view.markers if m.group == "problem" and m.label.startswith(f"stalled {name} ")]
    assert len(marked) == len(stalled) and "since_s=" in marked[0].label, view.markers
    assert f"stalled {name} (copied_bytes=" in write_report(stalled_run.run).read_text()

    cancelled = stalled_run.cancel()
    assert cancelled["throttles_cleared"] and cancelled["still_in_progress"] == [], cancelled
    assert_untouched_by_execution(stalled_run.bootstrap, [stalled_run.topic])
