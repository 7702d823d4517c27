"""The plan job's per-broker tables on the driver, from the one aggregation of the replicas (`transforms.load_parts`,
a row per broker, plan pool, must-move flag and resource): the broker loads, the load that must move into or out
of each pool, and the brokers each pool's planner sees.

Sums are kept in exact parts (longs) until the end, so every figure is the same however Spark grouped the rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kafka_rebalancer.model.band_status import load_frame
from kafka_rebalancer.model.resources import Resource
from kafka_rebalancer.plan.balance.model import base_load_column

FRACTION_UNITS = 2**32  # the fraction part's unit is 2^-32 (transforms.load_parts)


def exact_total(whole: pd.Series, fraction: pd.Series) -> pd.Series:
    """Summed parts as doubles: the whole part's sum plus the fraction's, in that order (as Spark adds them)."""
    return whole.astype(float) + fraction / float(FRACTION_UNITS)


def broker_load(brokers: pd.DataFrame, parts: pd.DataFrame, resources: list[Resource]) -> pd.DataFrame:
    """BROKER_LOAD of every pool broker (its replicas of every plan pool)."""
    per_broker = parts.groupby(["resource", "broker_id"])[["whole", "fraction"]].sum()
    totals = exact_total(per_broker["whole"], per_broker["fraction"])
    return load_frame(brokers, {r.name: totals.xs(r.name, level="resource") if r.name in
                                totals.index.get_level_values("resource") else pd.Series(dtype=float)
                                for r in resources}, resources)


def incoming_load(parts: pd.DataFrame, load: pd.DataFrame) -> pd.DataFrame:
    """Per (pool, resource): the load its eligible brokers will gain from replicas that must move (arriving from
    dead brokers or other pools, minus those leaving them), so the band is the one the pool is balanced to.
    Columns: broker_pool, resource, incoming."""
    must = parts[parts["must_move"]]
    arriving = must.groupby(["plan_pool", "resource"])[["whole", "fraction"]].sum()
    arriving.index = arriving.index.set_names(["broker_pool", "resource"])
    home = load.drop_duplicates("broker_id").set_index("broker_id")
    eligible = home.index[home["eligible"]]
    leaving_rows = must[must["broker_id"].isin(eligible)]
    leaving = leaving_rows.assign(broker_pool=leaving_rows["broker_id"].map(home["broker_pool"])).groupby(
        ["broker_pool", "resource"])[["whole", "fraction"]].sum()
    net = arriving.sub(leaving, fill_value=0).astype(np.int64)
    out = net.reset_index()
    return pd.DataFrame({"broker_pool": out["broker_pool"], "resource": out["resource"],
                         "incoming": exact_total(out["whole"], out["fraction"])})


def pool_brokers(brokers: pd.DataFrame, parts: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Per plan pool, the brokers its planner sees: its own, plus brokers of other pools (or none) holding
    replicas it plans, as excluded (sources only: never balanced, never targets). Each with the load of the
    replicas on it that stay and that another pool plans (`model.base_load_column`: a partition draining a dead
    broker's replica keeps its replica outside the topic's pool where it is, planned by the topic's pool)."""
    home = brokers[brokers["broker_pool"].notna()]
    pool_of = brokers.set_index("broker_id")["broker_pool"]
    pairs = parts[["plan_pool", "broker_id"]].drop_duplicates()
    foreign = pairs[pairs["broker_id"].map(pool_of).ne(pairs["plan_pool"])]
    staying = parts[~parts["must_move"].astype(bool)]
    out = {}
    for pool in sorted(set(home["broker_pool"]) | set(pairs["plan_pool"])):
        guests = brokers[brokers["broker_id"].isin(foreign.loc[foreign["plan_pool"] == pool, "broker_id"])]
        frame = pd.concat([home[home["broker_pool"] == pool],
                           guests.assign(excluded=True, broker_pool=pool)], ignore_index=True)
        others = staying[(staying["plan_pool"] != pool) & staying["broker_id"].isin(frame["broker_id"])]
        if len(others):
            sums = others.groupby(["resource", "broker_id"])[["whole", "fraction"]].sum()
            base = exact_total(sums["whole"], sums["fraction"])
            for name in base.index.unique("resource"):
                frame[base_load_column(str(name))] = frame["broker_id"].map(base.xs(name, level="resource")).fillna(0.0)
        out[str(pool)] = frame.sort_values("broker_id", kind="mergesort").reset_index(drop=True)
    return out
