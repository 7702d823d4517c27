"""The shapes bench's widened optimum (bench/shapes.py `widened_optimum`): where no plan brings every broker into
its band, the plan is held to the best plan leaving no broker further outside its edges than it does. The plan is
feasible there by construction, so HiGHS gets it as a start; these instances check that it is accepted and that
the optimum never copies more than it."""

from __future__ import annotations

from bench.baselines import evaluate
from bench.optimum_milp import solve_optimum
from bench.shapes import usage_after, widened_optimum
from kafka_rebalancer.model.reassignment import Reassignment
from tests.unit.test_optimum import bands, cluster

# Three brokers of capacity 100 holding 80 between them, disk band 30..35: no plan brings all three in. Broker 1
# holds 30 + 20 + 10, broker 2 10 + 5, broker 3 5.
PARTS = [("t", 0, [1], 30), ("t", 1, [1], 20), ("t", 2, [1], 10), ("t", 3, [2], 10), ("t", 4, [2], 5),
         ("t", 5, [3], 5)]
BAND = {"p": {"disk": (0.30, 0.35), "replica_count": None}}


def test_no_plan_in_band_exists_here() -> None:
    snapshot, config = cluster([(1, None), (2, None), (3, None)], PARTS)
    assert "Infeasible" in solve_optimum(snapshot, config, bands(BAND), time_limit=30, held=set()).status


def test_the_plan_is_an_accepted_start_of_its_widened_problem() -> None:
    # 20 to broker 2 and 10 to broker 3: brokers 1 and 2 in band, broker 3 left at 15 (its lower edge widened
    # to 0.15). Shedding 25..30 from broker 1 copies 30 at least: the plan is the optimum.
    snapshot, config = cluster([(1, None), (2, None), (3, None)], PARTS)
    table = bands(BAND)
    plan = [Reassignment("t", 1, [2]), Reassignment("t", 2, [3])]
    assert usage_after(config, snapshot, plan, table) == {(1, "disk"): 0.3, (2, "disk"): 0.35, (3, "disk"): 0.15}
    result = widened_optimum(snapshot, config, table, plan, time_limit=30)
    assert result.start_feasible is True
    assert result.proven and result.bytes == 30


def test_the_widened_optimum_copies_no_more_than_a_wasteful_plan() -> None:
    # The same plan plus a swap of the two 5s between brokers 2 and 3 (10 more copied, the same usage after): its
    # start is accepted and the optimum drops the swap.
    snapshot, config = cluster([(1, None), (2, None), (3, None)], PARTS)
    table = bands(BAND)
    plan = [Reassignment("t", 1, [2]), Reassignment("t", 2, [3]), Reassignment("t", 4, [3]),
            Reassignment("t", 5, [2])]
    moved = evaluate(snapshot, config, table, plan)["moved_bytes"]
    assert moved == 40
    result = widened_optimum(snapshot, config, table, plan, time_limit=30)
    assert result.start_feasible is True
    assert result.proven and result.bytes == 30 < moved
    recount = evaluate(snapshot, config, table, result.plan)
    assert recount["moved_bytes"] == 30 and recount["out_of_band_after"] == 1


def test_the_slack_unpins_brokers_held_to_the_byte() -> None:
    # Capacity 1000, band 120..150, 211 bytes on two brokers: no plan in band. The plan moves the 101 to broker 2
    # and leaves both below the band (110 and 101): widened to those usages exactly, the two edges add up to the
    # total, so each broker is pinned to its byte count and the 100 (one byte short for broker 2) cannot move
    # instead. One byte of slack (0.001 of capacity) lets it: the optimum copies 100.
    snapshot, config = cluster([(1, None), (2, None)], [("t", 0, [1], 101), ("t", 1, [1], 100), ("t", 2, [1], 10)],
                               capacity=1000)
    table = bands({"p": {"disk": (0.12, 0.15), "replica_count": None}})
    plan = [Reassignment("t", 0, [2])]
    strict = widened_optimum(snapshot, config, table, plan, time_limit=30)
    assert strict.start_feasible is True and strict.proven and strict.bytes == 101
    slack = widened_optimum(snapshot, config, table, plan, time_limit=30, slack=0.001)
    assert slack.start_feasible is True and slack.proven and slack.bytes == 100
    assert evaluate(snapshot, config, table, slack.plan)["moved_bytes"] == 100
