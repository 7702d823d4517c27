"""The shapes bench's rows and their targets (issue 36): every large shape has a solver-sized sibling, and a row's
target reads what the issue asks of it."""

from __future__ import annotations

from typing import Any

from bench.shapes import SHAPES, SIBLING_BROKERS, row_targets, table


def row(moved_over: float, out_after: int = 0, infeasible: int = 0,
        optimum: dict[str, Any] | None = None) -> dict[str, Any]:
    bounds: dict[str, Any] = {"recheck": {"moved_over": moved_over}, "disk": {"moved_over": moved_over}}
    if optimum is not None:
        bounds["optimum"] = optimum
    return {"bounds": bounds, "out_of_band_after": out_after, "infeasible": infeasible, "brokers": 12,
            "replicas": 900, "empty_brokers": 1, "dead_brokers": 0, "moved_bytes": 2**30, "replica_moves": 1,
            "out_of_band_before": 3, "wall_s": 1.0}


def test_every_large_shape_has_a_solver_sized_sibling_of_the_same_spec_at_twelve_brokers() -> None:
    for shape in SHAPES.values():
        if shape.exact:
            assert shape.spec.n_brokers == SIBLING_BROKERS
            continue
        if shape.group == "issue-52":  # Cruise Control's cluster: 250-partition topics do not come down to 12 brokers
            assert shape.sibling is None and shape.spec.n_brokers >= 1_000, shape.name
            continue
        assert shape.sibling is not None, shape.name
        sibling = SHAPES[shape.sibling]
        assert sibling.exact
        differing = {f for f in shape.spec.__dataclass_fields__
                     if getattr(shape.spec, f) != getattr(sibling.spec, f)}
        assert differing <= {"n_brokers", "n_partitions"}, shape.name


def test_a_large_row_is_held_to_its_siblings_ratio_and_in_band() -> None:
    results = {"base@12": row(1.05, optimum={"moved_over": 1.01, "bytes": 1, "proven": True}), "base": row(1.07)}
    assert [met for _, met in row_targets("base", results)] == [True, True]
    results["base"] = row(1.09)
    assert [met for _, met in row_targets("base", results)] == [False, True]
    results["base"] = row(1.0, out_after=2, infeasible=0)
    assert [met for _, met in row_targets("base", results)] == [True, False]
    results["base"] = row(0.5, out_after=9, infeasible=7)  # the planner proves no plan is in band: no target
    assert row_targets("base", results) == []


def test_a_solver_sized_row_is_held_to_the_optimum_where_a_plan_in_band_exists() -> None:
    ok = {"base@12": row(1.05, optimum={"moved_over": 1.04, "bytes": 10, "proven": True})}
    assert [met for _, met in row_targets("base@12", ok)] == [True, True]
    over = {"base@12": row(1.05, out_after=1, optimum={"moved_over": 1.06, "bytes": 10, "proven": True})}
    assert [met for _, met in row_targets("base@12", over)] == [False, False]
    none = {"base@12": row(1.05, out_after=3, optimum={"moved_over": None, "bytes": None, "proven": False})}
    assert [met for _, met in row_targets("base@12", none)] == [None, None]
    text = table({**ok, "base": row(1.2)})
    assert "missed: moved / LB 1.2 <= base@12's 1.05 + 0.03" in text
    assert "Targets: 1 of 2 rows met, 1 missed, 0 not measured." in text


def test_where_the_milp_proves_no_plan_in_band_the_row_is_held_to_the_best_plan_no_further_out() -> None:
    # The optimum of plans leaving no broker further outside its edges than this plan: the bytes are held to it,
    # and brokers out of band are no miss where no plan brings them in.
    proven_none = {"moved_over": 1.03, "bytes": 10, "proven": True, "plan_in_band": False}
    rows = {"base@12": row(1.1, out_after=4, optimum=proven_none)}
    assert [met for _, met in row_targets("base@12", rows)] == [True, True]
    rows = {"base@12": row(1.1, out_after=4, optimum={**proven_none, "moved_over": 1.2})}
    assert [met for _, met in row_targets("base@12", rows)] == [False, True]
    # A plan in band exists: brokers out of band are a miss.
    rows = {"base@12": row(1.1, out_after=4, optimum={**proven_none, "plan_in_band": True})}
    assert [met for _, met in row_targets("base@12", rows)] == [True, False]
    assert "no plan in band exists" in table(rows | {"base@12": row(1.1, out_after=4, optimum=proven_none)})


def test_an_unproven_optimum_above_the_target_proves_no_miss() -> None:
    unproven = {"moved_over": 1.09, "bytes": 10, "proven": False}
    assert [met for _, met in row_targets("base@12", {"base@12": row(1.1, optimum=unproven)})] == [None, True]
    below = {**unproven, "moved_over": 1.04}
    assert [met for _, met in row_targets("base@12", {"base@12": row(1.1, optimum=below)})] == [True, True]
