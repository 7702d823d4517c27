"""Each action's promise on small placements: kept, broken (no excuse), cannot (the plan said why), exempt; and
which pool a drain or demotion gives the partitions no pool balances."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from kafka_rebalancer.model.reassignment import Reassignment
from kafka_rebalancer.operations.request import make_request, run_config
from kafka_rebalancer.plan.promises import BROKEN, CANNOT, EXEMPT, KEPT, Excuses, placement_after, promise_rows
from kafka_rebalancer.snapshot.evacuation import NO_POOL, as_planned, held_pools, stranded
from tests.helpers import write_config

BODY = {"cluster": {"name": "c1"}, "pools": {"a": {"brokers": [1, 2, 3]}, "b": {"brokers": [4, 5, 6]}},
        "topic_pools": [{"topics": "orders*", "pool": "a"}, {"topics": "clicks*", "pool": "b"}],
        "resources": {"disk": {}, "replica_count": {}}}


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    return write_config(tmp_path / "config.yaml", {**BODY, "run_root": str(tmp_path / "runs")})


def _placement(*rows: tuple[str, int, list[int], int]) -> pd.DataFrame:
    return pd.DataFrame([(t, p, r, leader, r) for t, p, r, leader in rows],
                        columns=["topic", "partition", "replicas", "leader", "isr"])


NO_STATUS = pd.DataFrame(columns=["broker_id", "resource", "counted", "inside", "usage", "lower", "upper"])


def test_a_drain_is_kept_only_when_the_broker_holds_nothing(config_path: Path) -> None:
    request = make_request(run_config(config_path), action="drain-brokers", brokers=[3], reason="r")
    config = run_config(config_path)
    empty = promise_rows(request, config, _placement(("orders", 0, [1, 2], 1)), NO_STATUS, [1, 2, 3], Excuses())
    assert list(empty["verdict"]) == [KEPT]
    left = _placement(("orders", 0, [1, 3], 3), ("__consumer_offsets", 4, [3, 2], 2))
    rows = promise_rows(request, config, left, NO_STATUS, [1, 2, 3],
                        Excuses(partitions={("__consumer_offsets", 4): NO_POOL}))
    verdicts = dict(zip(rows["topic"], rows["verdict"], strict=True))
    assert verdicts == {"orders": BROKEN, "__consumer_offsets": CANNOT}
    detail = rows.loc[rows["topic"] == "orders", "detail"].iloc[0]
    assert detail == "orders-0 still has a replica on broker 3 (its leader)"
    # An exclusion is no excuse for a drain.
    skipped = pd.DataFrame({"topic": ["orders"], "partition": [0], "reason": ["excluded topic (config ...)"]})
    no_notes = pd.DataFrame(columns=["broker_id", "resource", "note"])
    no_proofs = pd.DataFrame(columns=["resource", "brokers", "proof"])
    excuses = Excuses.of_plan(skipped, no_notes, no_proofs, 0)
    assert promise_rows(request, config, left, NO_STATUS, [1, 2, 3], excuses)["verdict"].tolist()[0] == BROKEN


def test_isolation_both_ways_with_excluded_topics_exempt(config_path: Path) -> None:
    request = make_request(run_config(config_path), action="isolate-topics", topics=["orders*"], broker_pool="b",
                           reason="r")
    config = run_config(config_path)
    placement = _placement(("orders", 0, [4, 5], 4), ("orders", 1, [1, 5], 5), ("clicks", 0, [4, 6], 4),
                           ("__consumer_offsets", 0, [1, 4], 1))
    rows = promise_rows(request, config, placement, NO_STATUS, range(1, 7), Excuses())
    broken = rows[rows["verdict"] == BROKEN]
    assert list(zip(broken["topic"], broken["broker_id"], strict=True)) == [("orders", 1)]
    assert "__consumer_offsets" not in set(rows["topic"].dropna())


def test_demotion_names_what_cannot_be_handed_over(config_path: Path) -> None:
    request = make_request(run_config(config_path), action="demote-brokers", brokers=[2])
    config = run_config(config_path)
    placement = _placement(("orders", 0, [2, 1], 2), ("orders", 1, [2], 2), ("orders", 2, [1, 2], 1))
    rows = promise_rows(request, config, placement, NO_STATUS, [1, 2, 3], Excuses())
    assert dict(zip(rows["partition"], rows["verdict"], strict=True)) == {0: BROKEN, 1: EXEMPT}


def test_an_added_broker_outside_its_band_breaks_the_promise_unless_a_note_says_why(config_path: Path) -> None:
    request = make_request(run_config(config_path), action="add-brokers", brokers=[7], broker_pool="a", reason="r")
    config = run_config(config_path)
    status = pd.DataFrame({"broker_id": [7, 7], "resource": ["disk", "replica_count"], "counted": [True, True],
                           "inside": [False, True], "usage": [0.1, 10.0], "lower": [0.4, 9.0], "upper": [0.6, 11.0]})
    assert promise_rows(request, config, _placement(), status, [7], Excuses())["verdict"].tolist() == [BROKEN]
    noted = Excuses(brokers={(7, "disk"): "capacity threshold"})
    assert promise_rows(request, config, _placement(), status, [7], noted)["verdict"].tolist() == [CANNOT]


def test_placement_after_a_plan_leads_with_the_first_replica() -> None:
    before = _placement(("orders", 0, [1, 2], 1), ("orders", 1, [2, 3], 2))
    after = placement_after(before, [Reassignment("orders", 0, [3, 2])])
    assert after.loc[0, "replicas"] == [3, 2] and after.loc[0, "leader"] == 3 and after.loc[1, "leader"] == 2


def test_held_partitions_get_the_pool_a_drain_or_demotion_needs(config_path: Path) -> None:
    base = run_config(config_path)
    brokers = pd.DataFrame({"broker_id": [1, 2, 3, 4, 5, 6], "broker_pool": ["a", "a", "a", "b", "b", "b"]})
    partitions = pd.DataFrame({
        "topic": ["__consumer_offsets", "orphan", "orders", "__other"], "partition": [0, 0, 0, 0],
        "replicas": [[3, 4], [5, 3], [3, 1], [4, 5]], "leader": [3, 5, 3, 4],
        "topic_pool": [None, None, "a", None], "excluded": [True, False, False, True]})
    drain = make_request(base, action="drain-brokers", brokers=[3], reason="r")
    held = held_pools(partitions, brokers, drain)
    # Both held partitions on broker 3 go to the pool it leaves; a partition of a pool is that pool's already.
    assert list(zip(held["topic"], held["run_pool"], strict=True)) == [("__consumer_offsets", "a"), ("orphan", "a")]
    planned = as_planned(partitions, brokers, drain)
    assert planned["topic_pool"].tolist() == ["a", "a", "a", None]
    assert planned["excluded"].tolist() == [True, True, False, True]
    demote = make_request(base, action="demote-brokers", brokers=[4])
    assert held_pools(partitions, brokers, demote)[["topic", "run_pool"]].values.tolist() == [["__other", "b"]]
    nowhere = brokers.assign(broker_pool=[None, "a", "a", "b", "b", "b"])
    drain_1 = make_request(base, action="drain-brokers", brokers=[1], reason="r")
    odd = partitions.assign(replicas=[[1, 4], [5, 3], [3, 1], [4, 5]])
    assert stranded(odd, nowhere, drain_1.model_copy(update={"scope": drain_1.scope.model_copy(
        update={"drained": {1: None}})})) == [("__consumer_offsets", 0)]
