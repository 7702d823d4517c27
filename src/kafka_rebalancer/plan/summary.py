"""The plan summary: hash, counts, bytes (forced and balance), before and after usage per broker and resource,
band status, the lower bounds and `moved / LB` per pool and resource, skipped partitions with reasons.

Its figures are the re-check's (plan.recheck: plan.json against the snapshot), not the planner's bookkeeping;
what the planner predicted is kept beside them under `planner_claim`, so the two can be compared. The balance
bytes' lower bound (`lower_bound_bytes`, what `moved_over_lb` divides by: against the promised edges where the plan
keeps its promises, `lower_bound_edges`) comes with its parts, in the totals and per pool: `band_lower_bound_bytes`
(the same against the band's edges), `separate_lower_bound_bytes` (each broker's largest minimum, added up),
`lp_lower_bound_bytes` and `promise_lp_lower_bound_bytes` (one LP over every band at once, against the band's and
the promised edges; None where it is infeasible or not solved) and `disk_lower_bound_bytes` (the disk excess alone,
against the current placement's band). With the topic spread on, each pool has `topic_spread` (per kind, replicas
and leaders: the (topic, broker) over the topic's target before and after, over their cap after, and the worst
cell before and after; `spread_violations.spread_figures`), and the totals count `topic_spread_over_cap` (0 when
it is off)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.model.band_status import band_status, out_of_band
from kafka_rebalancer.operations.request import PlanningScope
from kafka_rebalancer.plan.balance.spread_violations import spread_figures
from kafka_rebalancer.plan.recheck import Recheck, left_outside

SKIPPED_LISTED = 1000  # the full list is in skipped.parquet


def totals_sentence(totals: dict[str, Any]) -> str:
    """A plan's totals as the task log and the CLI say them."""
    from kafka_rebalancer.model.units import human_bytes

    return (f"{totals['partitions_changed']} partitions change: {totals['replica_moves']} replica moves "
            f"({human_bytes(totals['moved_bytes'])}), {totals['preferred_leader_changes']} preferred-leader changes "
            f"({totals['leadership_only_changes']} of them leadership-only); brokers out of band "
            f"{totals['out_of_band_before']} -> {totals['out_of_band_after']} (re-checked from plan.json); "
            f"{totals['skipped_partitions']} partitions skipped")


def _num(value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float):
        return round(value, 12)
    return value


def _band(row: pd.Series) -> dict[str, Any]:
    return {k: _num(row[k]) for k in ("mean", "threshold", "lower", "upper", "target_lower", "target_upper",
                                      "capacity_threshold", "balanced", "note")}


HOT_ADVICE = ("its load alone exceeds the band's width on every broker, so moving it cannot balance the pool: "
              "spread the topic over more partitions (kafka-topics --alter --partitions); keyed producers then map "
              "keys to different partitions (seed 003), so order per key restarts from there")


def _brokers(recheck: Recheck, pool: str) -> list[dict[str, Any]]:
    """Per broker of the pool: each resource's load and usage before and after, inside its band or not."""
    both = recheck.before[recheck.before["broker_pool"] == pool].merge(
        recheck.after[["broker_id", "resource", "load", "usage", "inside"]], on=["broker_id", "resource"],
        suffixes=("_before", "_after")).sort_values("broker_id", kind="stable")
    # Column by column as Python values, a broker's rows one after the other (a thousand brokers' groups of a
    # DataFrame took most of the summary's time).
    names = ["broker_id", "rack", "alive", "eligible", "resource", "capacity", "load_before", "load_after",
             "usage_before", "usage_after", "inside_before", "inside_after"]
    rows: list[dict[str, Any]] = []
    for (broker_id, rack, alive, eligible, resource, capacity, load_before, load_after, usage_before, usage_after,
         inside_before, inside_after) in zip(*(both[n].tolist() for n in names), strict=True):
        if not rows or rows[-1]["broker_id"] != int(broker_id):
            rows.append({"broker_id": int(broker_id), "rack": _num(rack), "alive": bool(alive),
                         "eligible": bool(eligible)})
        rows[-1][resource] = {
            "capacity": _num(capacity), "load_before": _num(load_before), "load_after": _num(load_after),
            "usage_before": _num(usage_before), "usage_after": _num(usage_after),
            "inside_before": bool(inside_before), "inside_after": bool(inside_after)}
    return rows


def _plain(figures: dict[str, Any]) -> dict[str, Any]:
    return {k: (_plain(v) if isinstance(v, dict) else _num(v)) for k, v in figures.items()}


def planner_claim(planner_load_after: pd.DataFrame, bands: pd.DataFrame, lower_bound_bytes: dict[str, float],
                  claims: pd.DataFrame, band_checks: pd.DataFrame, source: str) -> dict[str, Any]:
    """What the planner's bookkeeping predicted (broker_load_after.parquet against the plan's bands, and its own
    byte bound), and on how many broker-resource pairs (`claims`: `recheck.claim_rows`) and bands (`band_checks`:
    `recheck.band_rows`) that disagrees with the re-check. `source`: where the predicted loads come from (the
    planners' models, or the moves replayed when none planned or budgets cut)."""
    claimed = out_of_band(band_status(planner_load_after, bands))
    return {
        "source": f"broker_load_after.parquet: {source}",
        "out_of_band_after": len(claimed),
        "lower_bound_bytes": _num(float(sum(lower_bound_bytes.values()))),
        "disagreements_with_recheck": int((~claims["agrees"]).sum()),
        "band_disagreements_with_recheck": int((~band_checks["agrees"]).sum()),
        "pools": {str(pool): {
            "lower_bound_bytes": _num(lower_bound_bytes.get(str(pool), 0.0)),
            "out_of_band_after": {str(r): sorted(int(b) for b in g["broker_id"])
                                  for r, g in claimed[claimed["broker_pool"] == pool].groupby("resource")}}
            for pool in sorted(bands["broker_pool"].unique())},
    }


def build_summary(*, config: RebalancerConfig, manifest: dict[str, Any], plan_hash: str, bands: pd.DataFrame,
                  recheck: Recheck, claim: dict[str, Any], skipped: pd.DataFrame, notes: pd.DataFrame,
                  hot: pd.DataFrame, infeasible: pd.DataFrame, statuses: dict[str, int],
                  moves_dropped_by_budget: int, scope: PlanningScope) -> dict[str, Any]:
    """`bands` are the plan's; `recheck` the re-check of its plan.json; `claim` the planner's (`planner_claim`);
    `scope` what the run's planner planned (a manual action's; the nightly run: everything)."""
    pools: dict[str, Any] = {}
    pool_names = sorted(recheck.before["broker_pool"].unique())
    spread = spread_figures(recheck.spread, pool_names) if config.topic_spread.enabled else {}
    for pool in pool_names:
        resources: dict[str, Any] = {}
        before_bands = recheck.bands_before[recheck.bands_before["broker_pool"] == pool].set_index("resource")
        for band_row in bands[bands["broker_pool"] == pool].itertuples(index=False):
            name = band_row.resource
            proofs = infeasible[(infeasible["broker_pool"] == pool) & (infeasible["resource"] == name)]
            resources[name] = {
                "band": _band(pd.Series(band_row._asdict())),
                "band_before": _band(before_bands.loc[name]) if name in before_bands.index else None,
                **_plain(recheck.resource_figures(pool, name)),
                "infeasible": int(proofs["count"].sum()),
                "infeasibility_proofs": [{"brokers": [int(b) for b in x.brokers], "count": int(x.count),
                                          "proof": x.proof} for x in proofs.itertuples(index=False)],
            }
        pool_notes = notes[notes["broker_pool"] == pool]
        pools[pool] = {
            **_plain(recheck.figures(pool)), "resources": resources, "brokers": _brokers(recheck, pool),
            "notes": [{"resource": r, "broker_id": None if pd.isna(b) else int(b), "note": n} for r, b, n in
                      zip(pool_notes["resource"], pool_notes["broker_id"], pool_notes["note"], strict=True)],
            **({"topic_spread": spread[pool]} if pool in spread else {}),
        }
    reasons = skipped["reason"].str.split(":").str[0].value_counts().sort_index()
    return {
        "plan_hash": plan_hash,
        "snapshot_hash": manifest["content_hash"],
        "config_fingerprint": config.fingerprint(),
        "cluster": config.cluster.name,
        "snapshot_taken_at": manifest.get("taken_at"),
        "totals": {
            **_plain(recheck.figures()),
            "out_of_band_before": len(recheck.out_of_band("before")),
            "out_of_band_after": len(recheck.out_of_band("after")),
            "fixed_outside_target_band": len(recheck.fixed_outside_target_band()),
            "taken_outside_target_band": len(recheck.taken_outside_target_band()),
            # Of those and the brokers outside their band after the plan, how many the planner gave no reason for
            # (validation fails the plan on any).
            "left_outside_unexplained": int((~left_outside(recheck, notes, infeasible, scope)["explained"]).sum()),
            "infeasible": int(infeasible["count"].sum()), "skipped_partitions": len(skipped),
            # (topic, broker) holding more replicas or leaders than their topic spread's cap (0 when it is off).
            "topic_spread_over_cap": int((recheck.spread["held"] > recheck.spread["cap"]).sum()),
            "hot_partitions": int(hot[["topic", "partition"]].drop_duplicates().shape[0]),
        },
        "planner_claim": claim,
        "partition_status": dict(sorted(statuses.items())),
        "budgets": {**config.budgets.model_dump(), "moves_dropped_by_budget": moves_dropped_by_budget},
        "pools": pools,
        "hot_partitions": [{"broker_pool": x.broker_pool, "topic": x.topic, "partition": int(x.partition),
                            "resource": x.resource, "load": _num(x.load), "band_width": _num(x.band_width),
                            "advice": HOT_ADVICE} for x in hot.head(SKIPPED_LISTED).itertuples(index=False)],
        "skipped": {
            "by_reason": {str(k): int(v) for k, v in reasons.items()},
            "partitions": [{"topic": t, "partition": int(p), "broker_pool": _num(bp), "reason": r}
                           for t, p, bp, r in skipped.head(SKIPPED_LISTED).itertuples(index=False)],
        },
    }
