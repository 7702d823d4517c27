"""bench.same_output's manual runs: each request is one this checkout accepts on the snapshot its run plans (the
snapshot as the run would capture it: the request's pool override applied), the cluster has what each action needs
(spare brokers, two log dirs per broker), and what is compared masks only what differs by nature."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.same_output import comparable, main
from bench.same_output_actions import ACTIONS, REQUESTED, SPARE, action_runs, as_captured, jbod_cluster
from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.operations.overrides import apply_overrides
from kafka_rebalancer.operations.request import check_brokers_in_cluster, make_request


def test_every_action_is_a_request_this_checkout_accepts_on_the_snapshot_its_run_plans(tmp_path: Path) -> None:
    tables, body = jbod_cluster()
    base = RebalancerConfig.model_validate({**body, "run_root": str(tmp_path)})
    runs = action_runs(tables)
    assert tuple(run.name for run in runs) == ACTIONS
    captured = {}
    for run in runs:
        request = make_request(base, **run.params, **REQUESTED)
        assert request.action == run.name
        config = apply_overrides(base, [request.override] if request.override is not None else [])
        captured[run.name] = as_captured(tables, config)
        check_brokers_in_cluster(request, captured[run.name].brokers)
    pools = {name: dict(zip(t.brokers["broker_id"], t.brokers["broker_pool"], strict=True))
             for name, t in captured.items()}
    assert all(pools["demote-brokers"][b] is None for b in SPARE)  # spare: running, in no pool
    assert pools["drain-brokers"][1] is None and pools["demote-brokers"][1] == "pool-0"
    assert {pools["add-brokers"][b] for b in SPARE} == {"pool-0"}
    assert {pools["isolate-topics"][b] for b in SPARE} == {"isolated"}
    drained = captured["drain-brokers"].brokers.set_index("broker_id")
    assert drained.at[1, "disk_capacity_bytes"] == 0 and drained.at[2, "disk_capacity_bytes"] > 0
    isolated = captured["isolate-topics"].partitions
    assert set(isolated.loc[isolated["topic"] == "pool-1.topic-0000", "topic_pool"]) == {"isolated"}


def test_every_broker_has_two_log_dirs_holding_its_replicas_and_the_spare_brokers_hold_nothing() -> None:
    tables, _ = jbod_cluster()
    assert tables.log_dirs is not None and tables.replica_log_dirs is not None
    assert tables.log_dirs.groupby("broker_id").size().to_dict() == dict.fromkeys(range(1, max(SPARE) + 1), 2)
    on_dirs = tables.replica_log_dirs
    assert len(on_dirs) == len(tables.replicas) and not on_dirs["broker_id"].isin(SPARE).any()
    used = on_dirs.groupby(["broker_id", "log_dir"])["size_bytes"].sum()
    for row in tables.log_dirs.itertuples():
        assert row.used_bytes == used.get((row.broker_id, row.log_dir), 0)
    spare = tables.brokers[tables.brokers["broker_id"].isin(SPARE)]
    assert spare["alive"].all() and sorted(spare["rack"]) == sorted(set(tables.brokers["rack"]))


def test_what_is_compared_masks_times_ids_the_run_folder_and_the_plans_duration(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    (run_dir / "plan").mkdir(parents=True)
    summary = run_dir / "plan" / "summary.json"
    summary.write_text(json.dumps({"plan_hash": "h", "plan_seconds": 1.5}))
    assert json.loads(comparable(summary, run_dir)) == {"plan_hash": "h"}
    page = run_dir / "report.html"
    page.write_text(f"{run_dir}/plan at 2026-11-28T13:00:00.123+00:00, 20261128T130000.000000Z "
                    "id 0f8e1c2a-1b2c-4d5e-8f90-123456789abc")
    assert comparable(page, run_dir) == b"<run>/plan at <time>, <time> id <uuid>"


def test_an_unknown_action_is_refused_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--baseline", str(tmp_path), "--scales", "", "--actions", "drain-brokers,drian-brokers"])
    assert exit_info.value.code == 2
