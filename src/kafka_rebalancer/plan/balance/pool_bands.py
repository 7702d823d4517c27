"""The bands of a placement per pool and resource (`bands_frame`; every step's, the plan job's too: per pool and
resource the table is small), the brokers to fix and the pre-check's pairs, with pandas, for the steps that run
without Spark. Whether a broker is inside its band: `model.band_status`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.model.band_status import EPS, band_status, out_of_band
from kafka_rebalancer.model.resources import resource
from kafka_rebalancer.model.schemas import BANDS, BROKERS_TO_FIX
from kafka_rebalancer.plan.balance.bands import band_for, widening_note


def bands_frame(load: pd.DataFrame, config: RebalancerConfig, incoming: pd.DataFrame | None = None) -> pd.DataFrame:
    """The band per (pool, resource) from the brokers that may receive replicas (`load`: BROKER_LOAD), counting
    the load that must arrive in or leave the pool (`incoming`: broker_pool, resource, incoming). BANDS."""
    arriving = {} if incoming is None else {
        (pool, name): float(value) for pool, name, value in
        zip(incoming["broker_pool"], incoming["resource"], incoming["incoming"], strict=True)}
    rows = []
    eligible = load[load["eligible"]]
    for (pool, name), group in eligible.groupby(["broker_pool", "resource"], sort=True):
        settings = config.resources[name]
        band = band_for(name, resource(name).is_count, group["load"].tolist(), group["capacity"].tolist(),
                        settings.threshold, settings.margin, settings.low_utilization,
                        config.capacity_threshold(name), arriving.get((pool, name), 0.0))
        # Not balanced: the note says why (the band is not enforced); else whether a count band (or its target
        # band) was widened.
        note = (f"mean usage under the low-utilisation floor {settings.low_utilization}: not balanced"
                if not band.balanced else widening_note(band, settings.threshold, settings.margin))
        rows.append((pool, name, len(group), band.mean, settings.threshold, band.lower, band.upper,
                     band.target_lower, band.target_upper, band.capacity_threshold, band.balanced, note))
    return pd.DataFrame(rows, columns=BANDS.names)


def placement_bands(load: pd.DataFrame, config: RebalancerConfig, plan_bands: pd.DataFrame) -> pd.DataFrame:
    """The band of a placement as it is (`load`: BROKER_LOAD), without forced arrivals: the band the plan's
    "before" and the verify step's "after" are judged in (`unbalanced_as_planned`). BANDS."""
    return unbalanced_as_planned(bands_frame(load, config), plan_bands)


def unbalanced_as_planned(placement_bands: pd.DataFrame, plan_bands: pd.DataFrame) -> pd.DataFrame:
    """What the plan left unbalanced (another pool than a manual action's, metrics too incomplete to balance on)
    is not judged in any other placement's band either."""
    unbalanced = ~plan_bands["balanced"].astype(bool)
    left = set(zip(plan_bands.loc[unbalanced, "broker_pool"], plan_bands.loc[unbalanced, "resource"], strict=True))
    keys = pd.Series(list(zip(placement_bands["broker_pool"], placement_bands["resource"], strict=True)),
                     index=placement_bands.index)
    return placement_bands.assign(balanced=placement_bands["balanced"].astype(bool) & ~keys.isin(left))


def brokers_to_fix(load: pd.DataFrame, bands: pd.DataFrame) -> pd.DataFrame:
    """The eligible brokers outside the band of a balanced resource (upper: capped by the capacity threshold),
    with the direction and the distance from the edge. BROKERS_TO_FIX."""
    out = out_of_band(band_status(load, bands))
    over = out["usage"] > out["upper"] + EPS
    out = out.assign(direction=np.where(over, "over", "under"),
                     distance=np.where(over, out["usage"] - out["upper"], out["lower"] - out["usage"]))
    return out[BROKERS_TO_FIX.names].reset_index(drop=True)


PAIR_SIDE = ("broker_id", "load", "capacity", "lower", "effective_upper")


def precheck_pairs(load: pd.DataFrame, bands: pd.DataFrame, fix: pd.DataFrame, partners: int = 2) -> pd.DataFrame:
    """The (source, target) pairs seed 001's pre-check tries per broker to fix (`transforms.candidate_moves`):
    an over-loaded broker gives to each of the `partners` brokers of its pool with the most room below the upper
    edge, an under-loaded one takes from each of those with the most load above the lower edge (a replica that
    fits none of those fits no other). Columns: broker_pool, resource, direction, broker_to_fix, and
    s_/t_ broker_id, load, capacity, lower, effective_upper (the upper edge capped by the capacity threshold)."""
    b = band_status(load, bands)
    b = b[b["counted"]].rename(columns={"upper": "effective_upper"})
    keys = ["broker_pool", "resource"]

    def side(prefix: str, frame: pd.DataFrame) -> pd.DataFrame:
        return frame[[*keys, *PAIR_SIDE]].rename(columns={c: f"{prefix}_{c}" for c in PAIR_SIDE})

    def best(order: pd.Series) -> pd.DataFrame:
        ranked = b.assign(order=order).sort_values([*keys, "order", "broker_id"], ascending=[True, True, False, True],
                                                   kind="mergesort")
        return ranked.groupby(keys, sort=False).head(partners)

    def to_fix(direction: str, prefix: str) -> pd.DataFrame:
        rows = fix.loc[fix["direction"] == direction, [*keys, "direction", "broker_id"]]
        return rows.rename(columns={"broker_id": "broker_to_fix"}).merge(
            side(prefix, b), left_on=[*keys, "broker_to_fix"], right_on=[*keys, f"{prefix}_broker_id"])

    room = b["effective_upper"] * b["capacity"] - b["load"]
    spare = b["load"] - b["lower"] * b["capacity"]
    pairs = pd.concat([to_fix("over", "s").merge(side("t", best(room)), on=keys),
                       to_fix("under", "t").merge(side("s", best(spare)), on=keys)], ignore_index=True)
    return pairs[pairs["s_broker_id"] != pairs["t_broker_id"]].reset_index(drop=True)
