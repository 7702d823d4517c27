"""Cordoning a drain's brokers (KIP-1066) against a fake admin: before the moves, confirmed by the brokers, a dead
broker or an old metadata.version recorded and passed over, idempotent, undone by cancel and by reverting the
drain's override (the real cluster is in tests/integration/test_cordoned_drain.py)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest

from kafka_rebalancer.errors import RebalancerError
from kafka_rebalancer.execute.cordon import (
    CONFIRM_TIMEOUT_S,
    cordon_drained,
    cordon_report,
    drained_brokers,
    metadata_version_name,
    revert_override,
    uncordon_drained,
    uncordon_hint,
    uncordon_reverted,
)
from kafka_rebalancer.execute.log import ExecutionLog
from kafka_rebalancer.kafka_admin import (
    BrokerCordon,
    BrokerInfo,
    ClusterAdmin,
    KafkaConnection,
    PartitionInfo,
)
from kafka_rebalancer.operations.overrides import OverrideStore, PoolOverride
from kafka_rebalancer.operations.request import make_request, run_config, write_request
from kafka_rebalancer.run_folder import RunFolder
from kafka_rebalancer.snapshot import capture, write_snapshot
from tests.helpers import fake_admin, write_config

BODY = {"cluster": {"name": "c1"}, "pools": {"a": {"brokers": [1, 2, 3]}, "b": {"brokers": [4, 5, 6]}},
        "topic_pools": [{"topics": "*", "pool": "a"}], "resources": {"disk": {}, "replica_count": {}},
        "execution": {"poll_interval_s": 1}}


class FakeAdmin:
    """Brokers 1-6 running unless `dead`; a cordon set in a broker's config is reported by the broker after
    `report_after` further reads (never, with None)."""

    def __init__(self, level: int | None = 30, report_after: int | None = 0, dead: Iterable[int] = ()) -> None:
        self.level, self.report_after, self.dead = level, report_after, set(dead)
        self.config: dict[int, str] = {}
        self.reads_left: dict[int, int] = {}
        self.calls: list[tuple[str, list[int]]] = []

    def live_broker_ids(self) -> frozenset[int]:
        return frozenset(range(1, 7)) - self.dead

    def metadata_version(self) -> int | None:
        return self.level

    def cordon(self, broker_ids: Iterable[int]) -> dict[int, str]:
        ids = sorted(broker_ids)
        self.calls.append(("cordon", ids))
        failed = {b: "timed out" for b in ids if b in self.dead}
        for b in ids:
            if b not in failed:
                self.config[b] = "*"
                self.reads_left[b] = self.report_after if self.report_after is not None else 10**9
        return failed

    def uncordon(self, broker_ids: Iterable[int]) -> dict[int, str]:
        ids = sorted(broker_ids)
        self.calls.append(("uncordon", ids))
        for b in ids:
            self.config.pop(b, None)
        return {}

    def cordoned_brokers(self, broker_ids: Iterable[int] | None = None) -> dict[int, BrokerCordon]:
        ids = set(range(1, 7) if broker_ids is None else broker_ids) - self.dead
        out = {}
        for b in sorted(ids & set(self.config)):
            reported = self.reads_left[b] <= 0
            self.reads_left[b] -= 1
            out[b] = BrokerCordon(b, self.config[b], 1 if reported else 0, 1)
        return out


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    return write_config(tmp_path / "config.yaml", {**BODY, "run_root": str(tmp_path / "runs")})


def request_run(config_path: Path, name: str, **params: Any) -> RunFolder:
    base = run_config(config_path)
    run = RunFolder(base.run_dir(name))
    write_request(run, make_request(base, **params))
    return run


def drain_run(config_path: Path, brokers: list[int], name: str = "drain") -> RunFolder:
    return request_run(config_path, name, action="drain-brokers", brokers=brokers, reason="disk failing")


def xlog(run: RunFolder, pool: str = "a") -> ExecutionLog:
    return ExecutionLog(run.stage_path(f"execute/{pool}") / "execution_log.jsonl", pool, "h")


def events(run: RunFolder, pool: str = "a") -> list[dict[str, Any]]:
    return [{k: v for k, v in e.items() if k not in ("ts", "pool", "plan_hash")} for e in xlog(run, pool).read()]


def fake_time() -> tuple[Callable[[float], None], Callable[[], float], list[float]]:
    now, slept = [0.0], []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds
    return sleep, lambda: now[0], slept


def cordon(config_path: Path, admin: FakeAdmin, run: RunFolder, pool: str = "a") -> tuple[list[int], list[float]]:
    sleep, clock, slept = fake_time()
    confirmed = cordon_drained(run_config(config_path, run), admin, run, xlog(run, pool), sleep=sleep, clock=clock)
    return confirmed, slept


def test_a_drain_cordons_its_brokers_and_waits_until_they_report_it(config_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    run = drain_run(config_path, [3, 4])
    admin = FakeAdmin(report_after=2)
    with caplog.at_level(logging.INFO, logger="kafka_rebalancer.execute.cordon"):
        confirmed, slept = cordon(config_path, admin, run)
    assert confirmed == [3, 4] and admin.config == {3: "*", 4: "*"}
    assert admin.calls == [("cordon", [3, 4])]
    assert events(run) == [{"action": "cordon_requested", "brokers": [3, 4]},
                           {"action": "cordoned", "brokers": [3, 4], "already": [], "unconfirmed": []}]
    # Two reads without the broker's report, each followed by a poll interval, then the heartbeat's round trip.
    assert slept == [1, 1, 1.0]
    assert sum("waiting for broker(s) [3, 4] to report their cordon" in m for m in caplog.messages) == 2


def test_a_dead_broker_is_recorded_and_the_others_are_cordoned(config_path: Path,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    run = drain_run(config_path, [3, 5])
    admin = FakeAdmin(dead=[5])
    with caplog.at_level(logging.WARNING, logger="kafka_rebalancer.execute.cordon"):
        confirmed, _ = cordon(config_path, admin, run)
    assert confirmed == [3] and admin.calls == [("cordon", [3])]
    assert events(run)[0] == {"action": "cordon_skipped", "brokers": [5], "reason": "not running"}
    assert any("cannot cordon broker(s) [5]: not running" in m for m in caplog.messages)


def test_a_broker_that_dies_before_its_cordon_is_recorded_as_failed(config_path: Path) -> None:
    run = drain_run(config_path, [3, 5])
    admin = FakeAdmin()
    admin.live_broker_ids = lambda: frozenset(range(1, 7))  # type: ignore[method-assign]
    admin.dead = {5}  # listed as running, but does not answer
    confirmed, _ = cordon(config_path, admin, run)
    assert confirmed == [3]
    assert {"action": "cordon_failed", "errors": {"5": "timed out"}} in events(run)
    assert events(run)[-1] == {"action": "cordoned", "brokers": [3], "already": [], "unconfirmed": []}


def test_an_old_metadata_version_is_named_and_the_drain_goes_on_uncordoned(config_path: Path,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    run = drain_run(config_path, [3])
    admin = FakeAdmin(level=29)
    with caplog.at_level(logging.WARNING, logger="kafka_rebalancer.execute.cordon"):
        assert cordon(config_path, admin, run)[0] == []
    assert admin.calls == [] and admin.config == {}
    assert events(run) == [{"action": "cordon_unsupported", "brokers": [3], "metadata_version": "4.2-IV1",
                            "needed": "4.3-IV0"}]
    [warning] = [m for m in caplog.messages if "not cordoning" in m]
    assert "metadata.version is 4.2-IV1, cordoning needs 4.3-IV0 or later" in warning and "\n" not in warning


def test_a_retried_task_or_the_next_pool_finds_the_brokers_cordoned(config_path: Path) -> None:
    run = drain_run(config_path, [3])
    admin = FakeAdmin()
    cordon(config_path, admin, run, "a")
    assert cordon(config_path, admin, run, "a")[0] == [3]
    confirmed, slept = cordon(config_path, admin, run, "b")
    assert confirmed == [3] and slept == []
    assert admin.calls == [("cordon", [3])]  # set once
    assert events(run, "b") == [{"action": "cordoned", "brokers": [3], "already": [3], "unconfirmed": []}]


def test_an_unconfirmed_cordon_is_waited_for_a_bounded_time_then_recorded(config_path: Path,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    run = drain_run(config_path, [3])
    admin = FakeAdmin(report_after=None)
    with caplog.at_level(logging.WARNING, logger="kafka_rebalancer.execute.cordon"):
        confirmed, slept = cordon(config_path, admin, run)
    assert confirmed == [] and sum(slept) == pytest.approx(CONFIRM_TIMEOUT_S)
    assert events(run)[-1] == {"action": "cordoned", "brokers": [], "already": [], "unconfirmed": [3]}
    assert any("did not report their cordon within 30s" in m for m in caplog.messages)


def test_only_a_drain_cordons(config_path: Path) -> None:
    run = request_run(config_path, "rebalance", action="rebalance-pool", broker_pool="a")
    admin = FakeAdmin()
    assert cordon(config_path, admin, run)[0] == [] and admin.calls == [] and events(run) == []
    nightly = RunFolder(run_config(config_path).run_dir("nightly"))
    assert drained_brokers(nightly) == []


def test_an_execute_reviewed_run_of_a_drain_drains_its_brokers(config_path: Path) -> None:
    reviewed = drain_run(config_path, [2], name="reviewed")
    run = RunFolder(run_config(config_path).run_dir("execute"))
    request = make_request(run_config(config_path), action="execute-reviewed", reviewed_run_id="reviewed")
    drain = make_request(run_config(config_path), action="drain-brokers", brokers=[2], reason="x")
    # as snapshot.reviewed adopts it: the reviewed run's override and scope
    write_request(run, request.model_copy(update={"override": drain.override, "scope": drain.scope}))
    assert drained_brokers(run) == drained_brokers(reviewed) == [2]


def test_cancel_uncordons_what_its_run_cordoned_and_nothing_else(config_path: Path) -> None:
    run = drain_run(config_path, [3, 4])
    admin = FakeAdmin()
    admin.cordon([4])  # cordoned by someone else before the drain
    admin.calls.clear()
    cordon(config_path, admin, run)
    assert admin.calls == [("cordon", [3])]
    assert uncordon_drained(admin, run, xlog(run, "b")) == [3]
    assert admin.config == {4: "*"}
    assert events(run, "b") == [{"action": "uncordoned", "brokers": [3], "failed": {}}]
    assert uncordon_drained(admin, run, xlog(run, "b")) == []  # the next pool's cancel: nothing left to do


def test_cancel_records_a_dead_broker_that_keeps_its_cordon(config_path: Path) -> None:
    run = drain_run(config_path, [3, 4])
    admin = FakeAdmin()
    cordon(config_path, admin, run)
    admin.dead = {4}
    assert uncordon_drained(admin, run, xlog(run)) == [3]
    assert {"action": "uncordon_skipped", "brokers": [4], "reason": "not running"} in events(run)


def test_cancel_of_a_run_that_cordoned_nothing_changes_nothing(config_path: Path) -> None:
    run = drain_run(config_path, [3])
    admin = FakeAdmin(level=29)
    cordon(config_path, admin, run)
    admin.config[3] = "*"  # an operator's own cordon
    admin.reads_left[3] = 0
    assert uncordon_drained(admin, run, xlog(run)) == [] and admin.config == {3: "*"}


def override(id_: int, brokers: list[int], kind: str = "drain-brokers") -> PoolOverride:
    return PoolOverride(id=id_, kind=kind, brokers=brokers, requested_by="ann", created_at="now",  # type: ignore
                        reason="r", run_id=f"run-{id_}", broker_pool=None if kind == "drain-brokers" else "a")


def test_reverting_a_drain_uncordons_its_brokers_unless_another_drain_holds_them() -> None:
    admin = FakeAdmin(dead=[6])
    admin.cordon([3, 4, 5])
    line = uncordon_reverted(admin, override(1, [3, 4, 6]), [override(2, [4])])
    assert admin.config == {4: "*", 5: "*"}
    assert line.startswith("uncordoned broker(s) 3: new partitions may land on them again; ")
    assert "broker(s) 6 not running, any cordon stays; once they run: kafka-configs" in line
    assert "--entity-name 6 --delete-config cordoned.log.dirs" in line
    assert line.endswith("broker(s) 4 stay cordoned: another active drain holds them")
    assert uncordon_reverted(FakeAdmin(), override(3, [2]), []) == "broker(s) 2 were not cordoned"


def test_reverting_an_override_uncordons_a_drain_and_stands_when_the_cluster_cannot_be_asked(
        config_path: Path) -> None:
    """The one revert the CLI and the overrides DAG share (execute.cordon.revert_override)."""
    store = OverrideStore.of(run_config(config_path))
    for o in (override(1, [3]), override(2, [4]), override(3, [7], kind="add-brokers")):
        store.record(o.model_copy(update={"from_pools": {b: None for b in o.brokers}}))
    admin = FakeAdmin()
    admin.cordon([3])
    reverted, line = revert_override(store, 1, "bob", lambda: nullcontext(admin))
    assert reverted.state == "reverted" and line is not None and line.startswith("uncordoned broker(s) 3")

    def unreachable() -> nullcontext[Any]:
        raise RebalancerError("no broker answered within 5 s")
    reverted, line = revert_override(store, 2, "bob", unreachable)
    assert reverted.state == "reverted" and line == (
        "broker(s) 4 may still be cordoned: the cluster could not be asked (no broker answered within 5 s); "
        "later: " + uncordon_hint([4]))
    assert revert_override(store, 3, "bob", unreachable)[1] is None  # an addition: nothing to uncordon
    assert [o.state for o in store.read()] == ["reverted"] * 3


def test_the_report_names_each_cordon_and_whether_the_broker_confirms_it() -> None:
    admin = FakeAdmin(report_after=1)
    assert cordon_report(admin) == "cordoned brokers: none"
    assert cordon_report(FakeAdmin(level=29)) == ("cordoned brokers: none (metadata.version 4.2-IV1 cannot cordon; "
                                                  "4.3-IV0 or later can)")
    admin.cordon([5, 2])
    assert cordon_report(admin) == (
        "cordoned brokers: broker 2 (cordoned.log.dirs=*, not confirmed: the broker reports 0 of 1 log dir(s) "
        "cordoned), broker 5 (cordoned.log.dirs=*, not confirmed: the broker reports 0 of 1 log dir(s) cordoned)")
    assert cordon_report(admin) == ("cordoned brokers: broker 2 (cordoned.log.dirs=*, confirmed), "
                                    "broker 5 (cordoned.log.dirs=*, confirmed)")


def test_metadata_versions_are_named_as_kafka_names_them() -> None:
    assert [metadata_version_name(v) for v in (7, 21, 29, 30, 31, 99, None)] == [
        "3.3-IV3", "3.9-IV0", "4.2-IV1", "4.3-IV0", "4.4-IV0", "feature level 99", "unknown (not reported)"]
    assert BrokerCordon(1, "*", 2, 2).confirmed and not BrokerCordon(1, "*", 1, 2).confirmed
    assert not BrokerCordon(1, "*", 0, 0).confirmed  # every log dir offline: nothing reports the cordon


def log_dir(cordoned: bool, error_code: int = 0, path: str = "/d1") -> dict[str, Any]:
    return {"error_code": error_code, "log_dir": path, "topics": [], "total_bytes": 10, "usable_bytes": 5,
            "is_cordoned": cordoned}


class FakeKafkaPython:
    """kafka-python's answer to DescribeLogDirs v5, which carries each log dir's IsCordoned."""

    def describe_log_dirs(self, topic_partitions: Any = None, brokers: Any = None) -> list[dict[str, Any]]:
        return [{"broker": 1, "log_dirs": [log_dir(True), log_dir(True, path="/d2")]},
                {"broker": 2, "log_dirs": [log_dir(True), log_dir(False, path="/d2")]},  # one still takes partitions
                {"broker": 3, "log_dirs": [log_dir(True), log_dir(False, error_code=57, path="/d2")]},  # one offline
                {"broker": 4, "log_dirs": [log_dir(False, error_code=57)]}]

    def close(self) -> None:
        return None


def test_a_broker_is_cordoned_when_every_log_dir_it_can_use_is() -> None:
    with ClusterAdmin(KafkaConnection("127.0.0.1:9", request_timeout_s=1)) as admin:
        admin._legacy = FakeKafkaPython()
        dirs = admin.describe_log_dirs([1, 2, 3, 4])
    assert {b: d["cordoned"] for b, d in dirs.items()} == {1: True, 2: False, 3: True, 4: False}


def test_the_snapshot_manifest_lists_the_cordoned_brokers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = fake_admin([BrokerInfo(b, None, "h", 1) for b in (1, 2, 3)],
                      [PartitionInfo("t", 0, [1, 2], [1, 2], 1)], {("t", 0): 100})

    class Cordoned(base):  # type: ignore[misc, valid-type]
        def describe_log_dirs(self, broker_ids: list[int]) -> dict[int, dict[str, Any]]:
            return {b: {**d, "cordoned": b == 3} for b, d in super().describe_log_dirs(broker_ids).items()}

    monkeypatch.setattr("kafka_rebalancer.snapshot.ClusterAdmin", Cordoned)
    path = write_config(tmp_path / "c.yaml", {**BODY, "run_root": str(tmp_path / "runs"),
                                              "capacity": {"default": {"disk_bytes": 1000}}})
    tables, manifest = capture(run_config(path), KafkaConnection("127.0.0.1:9"))
    assert manifest["cordoned_brokers"] == [3]
    written = write_snapshot(RunFolder(tmp_path / "run"), tables, manifest)
    assert written["cordoned_brokers"] == [3]
    monkeypatch.setattr("kafka_rebalancer.snapshot.ClusterAdmin", base)
    assert capture(run_config(path), KafkaConnection("127.0.0.1:9"))[1]["cordoned_brokers"] == []
