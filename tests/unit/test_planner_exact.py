"""The exact polish: a small pool's plan made smaller by a MILP, keeping every rule, edge and budget, and put
back as the planner made it when the check apart from the MILP disagrees."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from kafka_rebalancer.model.resources import DISK, LEADER_COUNT, NETWORK_OUT, REPLICA_COUNT, Resource
from kafka_rebalancer.plan.balance.model import PoolModel, base_load_column
from kafka_rebalancer.plan.balance.planner import Budgets, ExactLimits, Planner
from kafka_rebalancer.plan.balance.planner.exact import EXACT, OUTSIDE_SLACK, ExactPolish
from kafka_rebalancer.plan.balance.planner.state import REPLICA
from kafka_rebalancer.plan.changes import partition_changes
from kafka_rebalancer.snapshot.synthetic import SyntheticSpec, generate
from tests.unit.test_planner import bands_of

OFF = ExactLimits(max_columns=0)
DISK_COUNT = [DISK, REPLICA_COUNT]
WITH_ROLES = [REPLICA_COUNT, LEADER_COUNT, DISK, NETWORK_OUT]


def generated(seed: int, resources: list[Resource]) -> tuple[PoolModel, pd.DataFrame]:
    """Six brokers on three racks, 150 partitions of RF 3, one hot broker."""
    tables, _ = generate(SyntheticSpec(n_brokers=6, n_racks=3, n_pools=1, n_partitions=150, replication_factor=3,
                                       hot_brokers_per_pool=1, seed=seed))
    replicas = tables.replicas.merge(tables.partitions[["topic", "partition", "replication_factor", "bytes_in_per_s",
                                                        "bytes_out_per_s", "cpu_leader_cores", "cpu_follower_cores"]],
                                     on=["topic", "partition"]).assign(movable=True)
    return PoolModel(tables.brokers.assign(excluded=False), replicas, resources), tables.partitions


def planned(seed: int, resources: list[Resource], budgets: Budgets | None = None,
            exact: ExactLimits | None = None) -> tuple[Planner, pd.DataFrame]:
    model, partitions = generated(seed, resources)
    planner = Planner(model, bands_of(model), [r.name for r in resources], budgets or Budgets(10_000), exact=exact)
    planner.run()
    return planner, partitions


def copied(model: PoolModel) -> int:
    return int(model.r_size[model.r_broker != model.original_broker].sum())


def assert_rules_and_bands_kept(planner: Planner, greedy: Planner, partitions: pd.DataFrame) -> None:
    m = planner.model
    for p in range(len(m.p_start)):
        rows = np.arange(m.p_start[p], m.p_start[p] + m.p_count[p])
        now, before = m.r_broker[rows], m.original_broker[rows]
        assert len(set(now.tolist())) == len(rows) and m.eligible[now].all()
        assert len(set(m.rack[now].tolist())) >= len(set(m.rack[before].tolist()))
    # Every broker inside its edges, or no further out than the greedy plan left it (hot network_out here), but for
    # OUTSIDE_SLACK; one the greedy plan fixed into the band short of its target band inside the band (the polish
    # is solved again with the band's edges for those).
    eligible = np.flatnonzero(m.eligible)
    before, after = greedy.acceptance.status(eligible), planner.acceptance.status(eligible)
    usage, acceptance = m.usage[eligible], planner.acceptance
    in_band = (usage >= acceptance.lower - 1e-9) & (usage <= acceptance.limit + 1e-9)
    released = greedy.acceptance.short_of_target()[eligible]
    assert np.where(released, in_band, after <= before + np.where(before > 1e-9, OUTSIDE_SLACK, 0) + 1e-9).all()
    # The log replays to the model's final assignment, led by the first replica (as the executor elects).
    moves = pd.DataFrame([{"broker_pool": "p", "seq": mv.seq, "action": mv.action, "topic": m.r_topic[mv.replica],
                           "partition": m.r_partition[mv.replica], "source_broker": m.broker_ids[mv.source],
                           "target_broker": m.broker_ids[mv.target], "size_bytes": 0} for mv in planner.plan.moves])
    replayed = {(c.topic, c.partition): c.new_replicas
                for c in partition_changes(partitions, moves).itertuples(index=False)}
    for p in np.flatnonzero(m.p_touched):
        rows = np.arange(m.p_start[p], m.p_start[p] + m.p_count[p])
        final = [int(m.broker_ids[b]) for b in m.r_broker[rows][np.argsort(m.r_position[rows])]]
        key = (m.r_topic[rows[0]], int(m.r_partition[rows[0]]))
        assert list(replayed.get(key, final)) == final
        assert m.r_is_leader[rows[m.r_position[rows] == 0][0]]


@pytest.mark.parametrize(("seed", "resources"), [(1, DISK_COUNT), (4, DISK_COUNT), (1, WITH_ROLES),
                                                 (2, WITH_ROLES)])
def test_the_polish_copies_less_and_keeps_every_rule_and_band(seed: int, resources: list[Resource]) -> None:
    greedy, _ = planned(seed, resources, exact=OFF)
    polished, partitions = planned(seed, resources)
    assert copied(polished.model) < copied(greedy.model)
    # The counters follow the new log: its replica moves' bytes, which are the copies but for a replica taken
    # away and brought home where its partition's leadership moved too (kept for the replay: `drop_round_trips`).
    m = polished.model
    assert polished.state.moved_bytes == sum(int(m.r_size[mv.replica]) for mv in polished.plan.moves
                                             if mv.action == REPLICA)
    home = {mv.replica for mv in polished.plan.moves
            if mv.action == REPLICA and m.r_broker[mv.replica] == m.original_broker[mv.replica]}
    assert polished.state.moved_bytes - copied(m) == sum(int(m.r_size[mv.replica]) for mv in polished.plan.moves
                                                          if mv.action == REPLICA and mv.replica in home)
    assert any(mv.resource == EXACT for mv in polished.plan.moves)
    assert_rules_and_bands_kept(polished, greedy, partitions)


@pytest.mark.parametrize("budgets", [Budgets(44), Budgets(10_000, max_moves_per_broker=35)])
def test_the_polish_keeps_the_budgets(budgets: Budgets) -> None:
    # Unbounded, the polish of this pool makes 49 replica moves (the greedy plan 44) and the busiest broker
    # takes part in 40 (the greedy plan in 35): both budgets bind.
    greedy, _ = planned(1, DISK_COUNT, budgets, exact=OFF)
    polished, _ = planned(1, DISK_COUNT, budgets)
    assert polished.state.replica_moves <= budgets.max_replica_moves
    if budgets.max_moves_per_broker is not None:
        assert polished.state.broker_moves.max() <= budgets.max_moves_per_broker
    assert copied(polished.model) < copied(greedy.model)


@pytest.mark.parametrize("exact", [OFF, None])
def test_the_polish_keeps_an_add_brokers_roles(exact: ExactLimits | None) -> None:
    # Brokers 1 and 3 are new and empty: only they may receive, and only the others may give.
    tables, _ = generate(SyntheticSpec(n_brokers=6, n_racks=3, n_pools=1, n_partitions=150, replication_factor=3,
                                       hot_brokers_per_pool=1, empty_brokers_per_pool=2, seed=1))
    new = {1, 3}
    brokers = tables.brokers.assign(excluded=False, receives=tables.brokers["broker_id"].isin(new),
                                    gives=~tables.brokers["broker_id"].isin(new))
    model = PoolModel(brokers, tables.replicas.assign(movable=True), DISK_COUNT)
    planner = Planner(model, bands_of(model), ["disk", "replica_count"], Budgets(10_000), exact=exact)
    planner.run()
    ids = model.broker_ids
    assert planner.plan.moves and all(int(ids[mv.source]) not in new and int(ids[mv.target]) in new
                                      for mv in planner.plan.moves)
    # The polish is exercised: it copies 11% less. RF 3 on 3 racks, it is solved rack by rack and places 14
    # partitions again (solved whole it placed 89 again, for the same bytes to a millionth).
    assert (sum(mv.resource == EXACT for mv in planner.plan.moves) > 10) == (exact is None)


def test_a_polish_the_check_rejects_leaves_the_planners_plan() -> None:
    class Rejected(ExactPolish):
        def _kept(self, *_: object) -> bool:
            return False

    planner, _ = planned(1, WITH_ROLES, exact=OFF)
    m = planner.model
    brokers, leaders, log = m.r_broker.copy(), m.r_is_leader.copy(), list(planner.plan.moves)
    load, moved_bytes = m.load.copy(), planner.state.moved_bytes
    assert not Rejected(planner.state, planner.constraints).run()
    assert (m.r_broker == brokers).all() and (m.r_is_leader == leaders).all() and planner.plan.moves == log
    assert np.allclose(m.load, load) and planner.state.moved_bytes == moved_bytes


def test_a_pool_over_the_size_limit_keeps_the_planners_plan() -> None:
    greedy, _ = planned(1, DISK_COUNT, exact=OFF)
    limited, _ = planned(1, DISK_COUNT, exact=ExactLimits(max_columns=6))  # one partition's columns
    assert limited.plan.moves == greedy.plan.moves


def test_a_polish_stopped_by_its_time_limit_keeps_the_planners_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    # What HiGHS holds when time stops it depends on the machine's speed and load: the same snapshot must plan the
    # same everywhere, so only work limits may end a polish that is used.
    import highspy

    greedy, _ = planned(1, DISK_COUNT, exact=OFF)
    polished, _ = planned(1, DISK_COUNT)
    assert polished.plan.moves != greedy.plan.moves
    monkeypatch.setattr(highspy.Highs, "getModelStatus", lambda self: highspy.HighsModelStatus.kTimeLimit)
    stopped, _ = planned(1, DISK_COUNT)
    assert stopped.plan.moves == greedy.plan.moves


def test_the_polish_counts_the_load_another_pool_plans_on_a_broker() -> None:
    # The most used broker also carries a replica another pool plans and that stays (`PoolModel.base_load`): the
    # MILP counts it as fixed load, so its polish passes the check and keeps every broker inside its edges.
    greedy_model, partitions = generated(1, DISK_COUNT)
    brokers = pd.DataFrame({"broker_id": greedy_model.broker_ids, "rack": greedy_model.rack_names, "alive": True,
                            "excluded": False, "disk_capacity_bytes": greedy_model.capacity[:, 0]})
    busiest = int(np.argmax(greedy_model.usage[:, 0]))
    brokers[base_load_column("disk")] = np.where(np.arange(len(brokers)) == busiest,
                                                 0.1 * greedy_model.capacity[busiest, 0], 0.0)
    tables, _ = generate(SyntheticSpec(n_brokers=6, n_racks=3, n_pools=1, n_partitions=150, replication_factor=3,
                                       hot_brokers_per_pool=1, seed=1))

    def plan(exact: ExactLimits | None) -> Planner:
        model = PoolModel(brokers, tables.replicas.assign(movable=True), DISK_COUNT)
        planner = Planner(model, bands_of(model), ["disk", "replica_count"], Budgets(10_000), exact=exact)
        planner.run()
        return planner

    greedy, polished = plan(OFF), plan(None)
    assert any(mv.resource == EXACT for mv in polished.plan.moves)
    assert copied(polished.model) < copied(greedy.model)
    assert_rules_and_bands_kept(polished, greedy, partitions)


def test_a_pool_whose_racks_are_apart_is_polished_rack_by_rack() -> None:
    # RF 3 on 3 racks weighted (1.5, 1, 0.5): a replica never changes rack, so each rack's disk total is fixed, and
    # brokers of the racks holding too little or too much for their edges end outside the disk band. Held to their
    # bytes, the whole pool's MILP found nothing better than the greedy plan within its limits (5.37 GB copied);
    # rack by rack, with those brokers OUTSIDE_SLACK apart, 4.14 GB (23 % less), in under a second.
    tables, _ = generate(SyntheticSpec(n_brokers=9, n_racks=3, n_pools=1, n_partitions=60, replication_factor=3,
                                       hot_brokers_per_pool=1, rack_weights=(1.5, 1.0, 0.5),
                                       size_distribution="lognormal", seed=7))
    replicas = tables.replicas.merge(tables.partitions[["topic", "partition", "replication_factor"]],
                                     on=["topic", "partition"]).assign(movable=True)
    resources = [DISK, REPLICA_COUNT, LEADER_COUNT]

    def plan(exact: ExactLimits | None) -> Planner:
        model = PoolModel(tables.brokers.assign(excluded=False), replicas, resources)
        planner = Planner(model, bands_of(model), [r.name for r in resources], Budgets(10_000), exact=exact)
        planner.run()
        return planner

    greedy, polished = plan(OFF), plan(None)
    assert len(polished.plan.infeasible)  # no plan brings every broker into its band
    assert copied(polished.model) < 0.8 * copied(greedy.model)
    assert polished.polish.racks_apart(polished.polish.free_partitions()) == [0, 1, 2]
    assert_rules_and_bands_kept(polished, greedy, tables.partitions)
    # The leader's replica keeps its role on its rack: leaders per rack as the greedy plan left them.
    m, g = polished.model, greedy.model
    # The slack notwithstanding, no broker ends further outside the band than before the plan (as validated).
    start = m.base_load.copy()
    np.add.at(start, m.original_broker, np.where(m.original_leader[:, None], m.r_lead, m.r_follow))
    acceptance = polished.acceptance

    def outside_band(usage: np.ndarray) -> np.ndarray:
        return np.maximum(np.maximum(acceptance.lower - usage, usage - acceptance.upper), 0.0)[m.eligible]

    assert (outside_band(m.usage) <= outside_band(m.usage_at(slice(None), start)) + 1e-9).all()
    assert (np.bincount(m.rack[m.r_broker[m.r_is_leader]], minlength=3)
            == np.bincount(g.rack[g.r_broker[g.r_is_leader]], minlength=3)).all()


def test_a_pool_whose_partitions_miss_a_rack_is_polished_whole() -> None:
    # RF 2 on 3 racks: a replica may change rack, the racks are no problems of their own.
    model, _ = generated(1, DISK_COUNT)
    polish = Planner(model, bands_of(model), ["disk", "replica_count"], Budgets(10_000)).polish
    assert polish.racks_apart(polish.free_partitions()) == [0, 1, 2]
    rf2 = SyntheticSpec(n_brokers=6, n_racks=3, n_pools=1, n_partitions=150, replication_factor=2, seed=1)
    tables, _ = generate(rf2)
    model = PoolModel(tables.brokers.assign(excluded=False), tables.replicas.assign(movable=True), DISK_COUNT)
    polish = Planner(model, bands_of(model), ["disk", "replica_count"], Budgets(10_000)).polish
    assert polish.racks_apart(polish.free_partitions()) is None
