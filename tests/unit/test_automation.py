"""The watcher's events and what they start: a pool's broker missing past the grace period is lost once per
outage, one back inside it is a flap that starts nothing; a new broker a pool's claim takes is added to that pool,
one no claim takes only reported; events of one pool and action make one run, a pool in its cooldown starts
nothing, a rule that is off neither; the state survives a restart (a file), a cut line of the events log is
skipped."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_rebalancer.automation.decide import REPORTED, STARTED, SUPPRESSED, decide
from kafka_rebalancer.automation.events_log import append_events, load_state, read_events, save_state
from kafka_rebalancer.automation.watch import BROKER_ADDED, BROKER_BACK, BROKER_LOST, BROKER_UNCLAIMED, observe
from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.errors import RunFolderError


def body(tmp_path: Path, **automation: object) -> dict:
    return {"cluster": {"name": "c"}, "run_root": str(tmp_path),
            "pools": {"a": {"brokers": [1, 2, 3], "claim": {"broker_ids": ["7-9"]}},
                      "b": {"brokers": [4, 5], "claim": {"racks": ["rack-b*"]}}},
            "automation": {"broker_lost": {"mode": "approve", "grace_period_s": 60},
                           "broker_added": {"mode": "execute", "settle_s": 0}, "cooldown_s": 600, **automation}}


def config(tmp_path: Path, **automation: object) -> RebalancerConfig:
    return RebalancerConfig.model_validate(body(tmp_path, **automation))


def registered(*brokers: int, racks: dict[int, str] | None = None) -> dict[int, str | None]:
    return {b: (racks or {}).get(b, "rack-a") for b in brokers}


def test_a_broker_missing_past_the_grace_period_is_lost_once_and_one_back_inside_it_starts_nothing(
        tmp_path: Path) -> None:
    cfg = config(tmp_path)
    state = load_state(cfg)
    assert observe(state, registered(1, 2, 3, 4, 5), 0.0, cfg) == []
    assert observe(state, registered(1, 3, 4, 5), 10.0, cfg) == []  # broker 2 missing: down from now
    assert observe(state, registered(1, 3, 4, 5), 50.0, cfg) == []  # 40 s, inside the grace period
    back = observe(state, registered(1, 2, 3, 4, 5), 55.0, cfg)  # a flap
    assert [(e.kind, e.broker_id) for e in back] == [(BROKER_BACK, 2)] and "inside the grace period" in back[0].observed
    observe(state, registered(1, 3, 4, 5), 100.0, cfg)
    save_state(cfg, state)
    state = load_state(cfg)  # a triggerer restart in the middle of the outage keeps when it began
    lost = observe(state, registered(1, 3, 4, 5), 170.0, cfg)
    assert [(e.kind, e.broker_id, e.broker_pool) for e in lost] == [(BROKER_LOST, 2, "a")]
    assert "not registered for 70s (grace period 60s)" in lost[0].observed
    assert observe(state, registered(1, 3, 4, 5), 400.0, cfg) == []  # once per outage
    again = observe(state, registered(1, 2, 3, 4, 5), 500.0, cfg)
    assert [e.kind for e in again] == [BROKER_BACK] and "reported lost before" in again[0].observed


def test_a_new_broker_goes_to_the_pool_whose_claim_takes_it_and_one_no_claim_takes_is_only_reported(
        tmp_path: Path) -> None:
    cfg = config(tmp_path)
    state = load_state(cfg)
    events = observe(state, registered(1, 2, 3, 4, 5, 8, 12, 20, racks={12: "rack-b2", 20: "rack-x"}), 0.0, cfg)
    assert [(e.kind, e.broker_id, e.broker_pool) for e in events] == [
        (BROKER_ADDED, 8, "a"), (BROKER_ADDED, 12, "b"), (BROKER_UNCLAIMED, 20, None)]
    assert observe(state, registered(1, 2, 3, 4, 5, 8, 12, 20), 10.0, cfg) == []  # once while it stays


def test_what_the_events_start_one_run_per_pool_and_action_none_in_cooldown_or_off(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    state = load_state(cfg)
    observe(state, registered(1, 2, 3, 4, 5), 0.0, cfg)
    observe(state, registered(3, 5), 10.0, cfg)
    events = observe(state, registered(3, 5, 7, 30), 100.0, cfg)
    runs, records = decide(events, cfg, {"b": 80.0}, 100.0)
    assert [(r.action, r.broker_pool, r.brokers, r.mode) for r in runs] == [("drain-brokers", "a", (1, 2), "approve")]
    assert runs[0].reason().startswith("automation: broker 1 of pool a not registered for 90s")
    decisions = {(r["kind"], r["broker_id"]): (r["decision"], r.get("why", "")) for r in records}
    assert decisions[(BROKER_LOST, 1)][0] == decisions[(BROKER_LOST, 2)][0] == STARTED
    assert decisions[(BROKER_LOST, 4)] == (SUPPRESSED, "pool b's last automatic run started 20s ago, inside the "
                                                       "cooldown of 600s")
    # Broker 7 (pool a's claim): pool a's drain starts on this look, so its add-brokers waits.
    assert decisions[(BROKER_ADDED, 7)] == (SUPPRESSED, "another automatic run for pool a starts on the same look")
    assert decisions[(BROKER_UNCLAIMED, 30)][0] == REPORTED
    off = config(tmp_path, broker_lost={"mode": "off"})
    runs, records = decide([e for e in events if e.kind == BROKER_LOST], off, {}, 100.0)
    assert runs == [] and {r["why"] for r in records} == {"automation.broker_lost.mode is off"}


def test_the_events_log_skips_a_cut_line_and_a_broken_state_file_is_named(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    append_events(cfg, [{"kind": BROKER_LOST, "broker_id": 2}])
    log = tmp_path / "c" / ".automation" / "events.jsonl"
    log.write_text(log.read_text() + '{"kind": "bro')
    assert read_events(cfg) == [{"kind": BROKER_LOST, "broker_id": 2}]
    (tmp_path / "c" / ".automation" / "watch_state.json").write_text("[1, 2")
    with pytest.raises(RunFolderError, match=r"watch_state.json: not a readable watch state"):
        load_state(cfg)


def test_the_events_command_lists_what_was_seen_and_decided_newest_first(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    from kafka_rebalancer.cli import main

    cfg = config(tmp_path)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(body(tmp_path)))
    assert main(["events", "--config", str(path)]) == 0
    assert "no events recorded" in capsys.readouterr().out
    append_events(cfg, [{"kind": BROKER_LOST, "broker_id": 2, "broker_pool": "a", "at": 0, "decision": "observed",
                         "observed": "broker 2 of pool a not registered for 70s"},
                        {"kind": BROKER_LOST, "broker_id": 2, "broker_pool": "a", "at": 60, "decision": STARTED,
                         "action": "drain-brokers", "why": "drain-brokers of broker(s) [2] in pool a"}])
    assert main(["events", "--config", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["1970-01-01 00:01:00 broker_lost      broker 2 pool a: started drain-brokers: drain-brokers of "
                     "broker(s) [2] in pool a",
                     "1970-01-01 00:00:00 broker_lost      broker 2 pool a: observed: broker 2 of pool a not "
                     "registered for 70s"]


def test_an_event_held_back_is_raised_again_at_its_retry_time_if_it_still_holds(tmp_path: Path) -> None:
    from kafka_rebalancer.automation.events_log import defer_events, take_retries

    cfg = config(tmp_path)
    state = load_state(cfg)
    observe(state, registered(1, 2, 3, 4, 5), 0.0, cfg)
    lost = observe(state, registered(1, 2, 3, 5, 8), 100.0, cfg) + observe(state, registered(1, 2, 3, 5, 8), 200.0, cfg)
    assert [(e.kind, e.broker_id) for e in lost] == [(BROKER_ADDED, 8), (BROKER_LOST, 4)]
    runs, records = decide(lost, cfg, {}, 200.0, held={"b": "run r1 of kafka_rebalance_nightly (since t)",
                                                       "a": "run r1 of kafka_rebalance_nightly (since t)"})
    assert runs == []
    assert {(r["kind"], r["why"], r["retry_at"]) for r in records} == {
        (BROKER_LOST, "pool b is held by run r1 of kafka_rebalance_nightly (since t)", 800.0),
        (BROKER_ADDED, "pool a is held by run r1 of kafka_rebalance_nightly (since t)", 800.0)}
    defer_events(cfg, records)
    assert take_retries(cfg, 799.0) == []
    assert observe(state, registered(1, 2, 3, 5, 8), 799.0, cfg) == []  # reported once per outage
    due = take_retries(cfg, 800.0)
    assert due == [(BROKER_ADDED, 8), (BROKER_LOST, 4)] and take_retries(cfg, 900.0) == []
    for kind, broker in due:
        state.forget(kind, broker)
    # Broker 8 joined pool a meanwhile (its add-brokers ran): only the lost broker, still gone, comes back.
    joined = config(tmp_path)
    joined.pools["a"].brokers.append(8)
    again = observe(state, registered(1, 2, 3, 5, 8), 800.0, joined)
    assert [(e.kind, e.broker_id) for e in again] == [(BROKER_LOST, 4)]
    runs, _ = decide(again, joined, {"b": 150.0}, 800.0)
    assert [(r.action, r.brokers) for r in runs] == [("drain-brokers", (4,))]


def test_a_run_holds_its_pools_until_it_releases_them_or_ends(tmp_path: Path) -> None:
    from kafka_rebalancer.holds.claims import claim_pools, claimed_pools, release_pools

    cfg = config(tmp_path)
    live = {"nightly-1", "auto-1"}

    def is_live(dag_id: str, run_id: str) -> bool:
        return run_id in live

    assert claim_pools(cfg, "nightly", "nightly-1", ["a", "b"], is_live, exclusive=False) == []
    (holder,) = claim_pools(cfg, "manual", "auto-1", ["b"], is_live, exclusive=True)  # refused: b is held
    assert holder.run_id == "nightly-1" and set(claimed_pools(cfg, is_live)) == {"a", "b"}
    assert claim_pools(cfg, "manual", "auto-1", ["b"], is_live, exclusive=False) == []  # a person's run: both hold
    assert release_pools(cfg, "nightly-1") and not release_pools(cfg, "nightly-1")
    assert {p: c.run_id for p, c in claimed_pools(cfg, is_live).items()} == {"b": "auto-1"}
    live.discard("auto-1")  # killed before its report: the claim is stale and goes
    assert claimed_pools(cfg, is_live) == {} and not list((tmp_path / "c" / ".claims").glob("*.json"))
    assert claim_pools(cfg, "manual", "auto-2", ["b"], is_live, exclusive=True) == []
    assert claimed_pools(cfg, is_live, but="auto-2") == {}


def test_a_cli_command_holds_the_pools_while_its_process_runs(tmp_path: Path) -> None:
    import json
    import socket
    import subprocess
    import sys
    from dataclasses import replace
    from datetime import UTC, datetime, timedelta

    from kafka_rebalancer.holds.claims import claimed_pools, claims_dir, command_holds_pools

    cfg = config(tmp_path)

    def nobody(dag_id: str, run_id: str) -> bool:  # no Airflow run is live
        return False

    with command_holds_pools(cfg, "drain", None, cfg.pools) as claim:
        assert set(claimed_pools(cfg, nobody)) == {"a", "b"}
        assert claim.describe().startswith(f"kafka-rebalancer drain (pid {claim.pid} on {socket.gethostname()}, ")
        # Killed before it released its claim: stale once its process is gone.
        ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
        killed = replace(claim, pid=int(ended.stdout), broker_pools=("a",))
        (claims_dir(cfg) / killed.file_name()).write_text(json.dumps(killed.__dict__))
        assert {p: c.pid for p, c in claimed_pools(cfg, nobody).items()} == {"a": claim.pid, "b": claim.pid}
        assert not (claims_dir(cfg) / killed.file_name()).exists()
    assert claimed_pools(cfg, nobody) == {}  # released when the command ended
    # On another machine the process cannot be checked: held a day at most.
    elsewhere = replace(claim, host="another-host")
    (claims_dir(cfg) / elsewhere.file_name()).write_text(json.dumps(elsewhere.__dict__))
    assert set(claimed_pools(cfg, nobody)) == {"a", "b"}
    old = replace(elsewhere, since=(datetime.now(UTC) - timedelta(days=1, seconds=1)).isoformat(timespec="seconds"))
    (claims_dir(cfg) / old.file_name()).write_text(json.dumps(old.__dict__))
    assert claimed_pools(cfg, nobody) == {}


def test_only_the_run_the_events_decision_named_is_automatic_and_only_with_its_parameters(tmp_path: Path) -> None:
    from kafka_rebalancer.airflow.tasks import automatic_mode

    cfg = config(tmp_path)
    append_events(cfg, [{"kind": BROKER_ADDED, "broker_id": 8, "broker_pool": "a", "decision": STARTED,
                         "action": "add-brokers", "mode": "execute", "run_id": "automatic__a__t__1f2e",
                         "brokers": [8]}])

    def context(run_id: str, **params: object) -> dict:
        return {"run_id": run_id, "params": {"action": "add-brokers", "broker_pool": "a", "brokers": [8], **params}}

    assert automatic_mode(cfg, context("automatic__a__t__1f2e")) == "execute"
    assert automatic_mode(cfg, context("automatic__a__t__1f2e", broker_pool=None)) == "execute"  # as a drain asks
    assert automatic_mode(cfg, context("automatic__a__t__1f2e", broker_pool="b")) is None
    assert automatic_mode(cfg, context("manual__2026-11-27")) is None  # a person's trigger, same parameters
    assert automatic_mode(cfg, context("automatic__a__t__0000")) is None  # an id the decision did not choose
    assert automatic_mode(cfg, context("automatic__a__t__1f2e", brokers=[8, 9])) is None  # other parameters
    assert automatic_mode(cfg, context("automatic__a__t__1f2e", action="rebalance-pool")) is None


def test_out_of_band_pools_and_full_disks_start_a_rebalance_of_their_pool(tmp_path: Path) -> None:
    import pandas as pd

    from kafka_rebalancer.automation.band_check import (
        DISK_OVER_USE,
        POOL_OUT_OF_BAND,
        BandWatch,
        pool_out_of_band_events,
    )
    from kafka_rebalancer.automation.watch import BANDS_DUE

    cfg = config(tmp_path, out_of_band={"mode": "execute", "share": 0.5, "sustained_s": 600, "disk_use": 0.8,
                                        "check_interval_s": 300})
    state = load_state(cfg)
    due = [e.kind for e in observe(state, registered(1, 2, 3, 4, 5), 0.0, cfg)]
    assert due == [BANDS_DUE] and observe(state, registered(1, 2, 3, 4, 5), 200.0, cfg) == []
    assert [e.kind for e in observe(state, registered(1, 2, 3, 4, 5), 300.0, cfg)] == [BANDS_DUE]

    def status(outside: set[int], disk: dict[int, float]) -> pd.DataFrame:
        return pd.DataFrame([{"broker_pool": "a" if b <= 3 else "b", "broker_id": b, "resource": r,
                              "usage": disk.get(b, 0.5) if r == "disk" else 10.0, "counted": True,
                              "inside": not (b in outside and r == "disk")}
                             for b in (1, 2, 3, 4, 5) for r in ("disk", "replica_count")])

    watch = BandWatch()
    assert pool_out_of_band_events(status({1, 2}, {}), watch, 0.0, cfg) == []  # 2 of 3 out: from now on
    assert pool_out_of_band_events(status({1}, {}), watch, 300.0, cfg) == [] and watch.out_since == {}  # 1 of 3
    pool_out_of_band_events(status({1, 2}, {}), watch, 600.0, cfg)
    (event,) = pool_out_of_band_events(status({1, 2}, {}), watch, 1200.0, cfg)  # sustained 600 s
    assert (event.kind, event.broker_id, event.broker_pool) == (POOL_OUT_OF_BAND, None, "a")
    assert "2 of 3 brokers of pool a out of band (disk: brokers [1, 2]), 67% >= 50%, for 600s" in event.observed
    full = pool_out_of_band_events(status(set(), {4: 0.85}), watch, 1300.0, cfg)
    assert [(e.kind, e.broker_id, e.broker_pool) for e in full] == [(DISK_OVER_USE, 4, "b")] and not watch.out_since
    runs, records = decide([event, *full], cfg, {}, 1300.0)
    assert [(r.action, r.broker_pool, r.brokers, r.mode) for r in runs] == [
        ("rebalance-pool", "a", (), "execute"), ("rebalance-pool", "b", (), "execute")]
    assert {r["why"] for r in records} == {"rebalance-pool of pool a", "rebalance-pool of pool b"}
    off = config(tmp_path)
    assert observe(load_state(off), registered(1, 2, 3, 4, 5), 0.0, off) == []  # rule off: no band checks


def test_a_pool_whose_last_rebalance_was_planned_in_the_same_situation_starts_nothing(tmp_path: Path) -> None:
    import pandas as pd

    from kafka_rebalancer.automation.band_check import BandWatch, pool_layouts, pool_out_of_band_events
    from kafka_rebalancer.automation.decide import planned_situations

    cfg = config(tmp_path, out_of_band={"mode": "approve", "share": 0.5, "sustained_s": 0})
    replicas = pd.DataFrame([{"topic": "t", "partition": p, "broker_id": b, "is_leader": i == 0, "size_bytes": 10}
                             for p, brokers in enumerate([[1, 2], [2, 3], [4, 5]]) for i, b in enumerate(brokers)])
    layouts = pool_layouts(replicas, cfg.broker_pool_of())
    grown = pool_layouts(replicas.assign(size_bytes=99), cfg.broker_pool_of())
    assert layouts == grown and set(layouts) == {"a", "b"}  # sizes are no layout
    moved = replicas.copy()
    moved.loc[0, "broker_id"] = 3
    assert pool_layouts(moved, cfg.broker_pool_of())["a"] != layouts["a"]
    assert pool_layouts(moved, cfg.broker_pool_of())["b"] == layouts["b"]

    status = pd.DataFrame([{"broker_pool": "a", "broker_id": b, "resource": "disk", "usage": 0.5, "counted": True,
                            "inside": b == 3} for b in (1, 2, 3)])
    (event,) = pool_out_of_band_events(status, BandWatch(), 0.0, cfg, layouts)
    assert event.situation == f"{layouts['a']} out [1, 2]"
    runs, records = decide([event], cfg, {}, 0.0)
    log = [{**r, "run_id": "automatic__a__1"} for r in records]
    assert [r.action for r in runs] == ["rebalance-pool"] and log[0]["situation"] == event.situation
    # That run planned (and was rejected, or moved nothing): the same situation again starts nothing, for good.
    planned = planned_situations(log, lambda run_id: True)
    runs, records = decide([event], cfg, {}, 5000.0, planned=planned)
    assert runs == [] and records[0]["decision"] == SUPPRESSED and "retry_at" not in records[0]
    assert "it would plan the same again" in records[0]["why"]
    (changed,) = pool_out_of_band_events(status, BandWatch(), 0.0, cfg, pool_layouts(moved, cfg.broker_pool_of()))
    assert [r.broker_pool for r in decide([changed], cfg, {}, 5000.0, planned=planned)[0]] == ["a"]
    # A run that ended before its plan (the cluster unreachable, say) guards nothing.
    assert planned_situations(log, lambda run_id: False) == {}


def test_brokers_of_a_pool_lost_or_added_a_few_looks_apart_are_raised_on_one_look_for_one_run(
        tmp_path: Path) -> None:
    cfg = config(tmp_path)
    state = load_state(cfg)
    observe(state, registered(1, 2, 3, 4, 5), 0.0, cfg)
    observe(state, registered(2, 3, 4, 5), 10.0, cfg)  # broker 1 gone
    assert observe(state, registered(3, 4, 5), 40.0, cfg) == []  # broker 2 (same pool) 30 s later
    assert observe(state, registered(3, 4, 5), 80.0, cfg) == []  # 1 is past its grace period, 2 is not: 1 waits
    lost = observe(state, registered(3, 4, 5), 100.0, cfg)
    assert [(e.kind, e.broker_id) for e in lost] == [(BROKER_LOST, 1), (BROKER_LOST, 2)]
    runs, _ = decide(lost, cfg, {}, 100.0)
    assert [(r.action, r.broker_pool, r.brokers) for r in runs] == [("drain-brokers", "a", (1, 2))]
    # The wait is bounded: a broker lost while another of its pool comes and goes waits one grace period at most.
    state = load_state(config(tmp_path / "bounded"))
    observe(state, registered(1, 2, 3, 4, 5), 0.0, cfg)
    observe(state, registered(2, 3, 4, 5), 10.0, cfg)
    assert observe(state, registered(3, 4, 5), 120.0, cfg) == []  # 2 gone since 120
    assert [e.broker_id for e in observe(state, registered(3, 4, 5), 130.0, cfg)] == [1]

    added = config(tmp_path / "added", broker_added={"mode": "execute", "settle_s": 30})
    state = load_state(added)
    assert observe(state, registered(1, 2, 3, 4, 5, 7), 0.0, added) == []
    assert observe(state, registered(1, 2, 3, 4, 5, 7, 8), 20.0, added) == []
    assert observe(state, registered(1, 2, 3, 4, 5, 7, 8, 9), 45.0, added) == []  # each new one resets the wait
    events = observe(state, registered(1, 2, 3, 4, 5, 7, 8, 9), 60.0, added)  # 7 has waited twice the settle time
    assert [(e.kind, e.broker_id, e.broker_pool) for e in events] == [(BROKER_ADDED, 7, "a"), (BROKER_ADDED, 8, "a")]
    assert [e.broker_id for e in observe(state, registered(1, 2, 3, 4, 5, 7, 8, 9), 75.0, added)] == [9]


def test_a_pools_events_held_back_at_different_times_are_raised_again_together(tmp_path: Path) -> None:
    from kafka_rebalancer.automation.events_log import defer_events, take_retries

    cfg = config(tmp_path)
    held = [{"kind": BROKER_LOST, "broker_id": 4, "broker_pool": "b", "retry_at": 800.0},
            {"kind": BROKER_LOST, "broker_id": 5, "broker_pool": "b", "retry_at": 950.0},
            {"kind": BROKER_ADDED, "broker_id": 8, "broker_pool": "a", "retry_at": 900.0},
            {"kind": "pool_out_of_band", "broker_id": None, "broker_pool": "a", "retry_at": 700.0}]
    defer_events(cfg, held)  # a pool's own event is not kept: the band check raises it again
    assert take_retries(cfg, 799.0) == []
    assert take_retries(cfg, 800.0) == [(BROKER_LOST, 4), (BROKER_LOST, 5)]  # 5's time has not come: with 4
    assert take_retries(cfg, 850.0, {"a"}) == [(BROKER_ADDED, 8)]  # pool a has a new event: 8 joins it
    assert take_retries(cfg, 10_000.0) == []
