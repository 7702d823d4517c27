"""The plan summary: hash, counts, bytes, before and predicted-after usage per broker and resource,
band status, the lower bound LB and `moved / LB` per pool and resource, skipped partitions with reasons."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from kafka_rebalancer.balance.status import band_status, out_of_band
from kafka_rebalancer.config import RebalancerConfig

SKIPPED_LISTED = 1000  # the full list is in skipped.parquet


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


def _outside(status: pd.DataFrame, pool: str, resource: str) -> list[int]:
    rows = out_of_band(status[(status["broker_pool"] == pool) & (status["resource"] == resource)])
    return [int(b) for b in rows["broker_id"]]


HOT_ADVICE = ("its load alone exceeds the band's width on every broker, so moving it cannot balance the pool: "
              "spread the topic over more partitions (kafka-topics --alter --partitions); keyed producers then map "
              "keys to different partitions (seed 003), so order per key restarts from there")


def plan_counts(moves: pd.DataFrame, changes: pd.DataFrame) -> dict[str, int]:
    """What the plan changes, counted from the partitions' old and new replica lists (what plan.json holds, not
    the planner's steps: a replica moved twice in planning is copied once, a leadership handed back and forth is
    no change): replica moves and their bytes, partitions whose preferred leader changes, and those where only
    the order changes (no data moves). Forced moves as the planner decided them."""
    pairs = list(zip(changes["old_replicas"], changes["new_replicas"], strict=True))
    added = [len(set(new) - set(old)) for old, new in pairs]
    return {"replica_moves": int(sum(added)),
            "leadership_moves": sum(1 for old, new in pairs if list(old)[:1] != list(new)[:1]),
            "leadership_only_changes": sum(1 for (old, new), a in zip(pairs, added, strict=True)
                                           if a == 0 and list(old) != list(new)),
            "forced_moves": int(((moves["action"] == "replica") & moves["forced"]).sum()),
            "moved_bytes": int(sum(a * int(size) for a, size in zip(added, changes["size_bytes"], strict=True)))}


def build_summary(*, config: RebalancerConfig, manifest: dict[str, Any], plan_hash: str, bands: pd.DataFrame,
                  load_before: pd.DataFrame, load_after: pd.DataFrame, moved: pd.DataFrame, moves: pd.DataFrame,
                  changes: pd.DataFrame, skipped: pd.DataFrame, notes: pd.DataFrame, hot: pd.DataFrame,
                  infeasible: pd.DataFrame, statuses: dict[str, int], moves_dropped_by_budget: int,
                  lower_bound_bytes: dict[str, float]) -> dict[str, Any]:
    before = band_status(load_before, bands)
    after = band_status(load_after, bands)
    # Per (pool, resource), LB = max(sum of excess above the band, sum of deficit below it).
    counted = before[before["counted"]]
    excess = (counted["load"] - counted["upper"] * counted["capacity"]).clip(lower=0)
    deficit = (counted["lower"] * counted["capacity"] - counted["load"]).clip(lower=0)
    sums = counted.assign(excess=excess, deficit=deficit).groupby(["broker_pool", "resource"])[["excess", "deficit"]]
    lower_bounds = sums.sum().max(axis=1).rename("lower_bound").reset_index()
    pools: dict[str, Any] = {}
    for pool in sorted(load_before["broker_pool"].unique()):
        pool_moves = moves[moves["broker_pool"] == pool]
        pool_changes = changes[changes["broker_pool"] == pool]
        resources: dict[str, Any] = {}
        for band_row in bands[bands["broker_pool"] == pool].itertuples(index=False):
            name = band_row.resource
            lb_rows = lower_bounds[(lower_bounds["broker_pool"] == pool) & (lower_bounds["resource"] == name)]
            mv_rows = moved[(moved["broker_pool"] == pool) & (moved["resource"] == name)]
            lb = float(lb_rows["lower_bound"].iloc[0]) if len(lb_rows) else 0.0
            mv = float(mv_rows["moved"].iloc[0]) if len(mv_rows) else 0.0
            proofs = infeasible[(infeasible["broker_pool"] == pool) & (infeasible["resource"] == name)]
            resources[name] = {
                "band": _band(pd.Series(band_row._asdict())),
                "lower_bound": _num(lb), "moved": _num(mv), "moved_over_lb": _num(mv / lb) if lb > 0 else None,
                "out_of_band_before": _outside(before, pool, name),
                "out_of_band_after": _outside(after, pool, name),
                "infeasible": int(proofs["count"].sum()),
                "infeasibility_proofs": [{"brokers": [int(b) for b in x.brokers], "count": int(x.count),
                                          "proof": x.proof} for x in proofs.itertuples(index=False)],
            }
        usage_rows = []
        both = before[before["broker_pool"] == pool].merge(
            after[["broker_id", "resource", "load", "usage", "inside"]], on=["broker_id", "resource"],
            suffixes=("_before", "_after"))
        for broker_id, group in both.groupby("broker_id", sort=True):
            first = group.iloc[0]
            entry: dict[str, Any] = {"broker_id": int(broker_id), "rack": _num(first["rack"]),
                                     "alive": bool(first["alive"]), "eligible": bool(first["eligible"])}
            for row in group.itertuples(index=False):
                entry[row.resource] = {
                    "capacity": _num(row.capacity), "load_before": _num(row.load_before),
                    "load_after": _num(row.load_after), "usage_before": _num(row.usage_before),
                    "usage_after": _num(row.usage_after), "inside_before": bool(row.inside_before),
                    "inside_after": bool(row.inside_after)}
            usage_rows.append(entry)
        pool_notes = notes[notes["broker_pool"] == pool]
        counts = plan_counts(pool_moves, pool_changes)
        bound = lower_bound_bytes.get(pool, 0.0)
        pools[pool] = {
            "partitions_changed": len(pool_changes), **counts, "lower_bound_bytes": _num(bound),
            "moved_over_lb": _num(counts["moved_bytes"] / bound) if bound > 0 else None, "resources": resources,
            "brokers": usage_rows,
            "notes": [{"resource": r, "broker_id": None if pd.isna(b) else int(b), "note": n} for r, b, n in
                      zip(pool_notes["resource"], pool_notes["broker_id"], pool_notes["note"], strict=True)],
        }
    reasons = skipped["reason"].str.split(":").str[0].value_counts().sort_index()
    totals = plan_counts(moves, changes)
    bound = float(sum(lower_bound_bytes.values()))
    return {
        "plan_hash": plan_hash,
        "snapshot_hash": manifest["content_hash"],
        "config_fingerprint": config.fingerprint(),
        "cluster": config.cluster.name,
        "snapshot_taken_at": manifest.get("taken_at"),
        "totals": {
            "partitions_changed": len(changes), **totals, "lower_bound_bytes": _num(bound),
            "moved_over_lb": _num(totals["moved_bytes"] / bound) if bound > 0 else None,
            "out_of_band_before": len(out_of_band(before)), "out_of_band_after": len(out_of_band(after)),
            "infeasible": int(infeasible["count"].sum()), "skipped_partitions": len(skipped),
            "hot_partitions": int(hot[["topic", "partition"]].drop_duplicates().shape[0]),
        },
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
