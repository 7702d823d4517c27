"""Band status: each pool broker's load and usage per resource (`broker_load_frame`, `load_frame`: BROKER_LOAD),
and whether it sits inside its pool's band (`band_status`, `out_of_band`): the vocabulary the plan, the validation,
verify, the band check, the CLI's status and the report share. The bands themselves are the plan's
(`plan.balance.pool_bands.bands_frame`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kafka_rebalancer.model.resources import Resource
from kafka_rebalancer.model.schemas import BROKER_LOAD

EPS = 1e-9


def broker_load_frame(brokers: pd.DataFrame, replicas: pd.DataFrame, resources: list[Resource]) -> pd.DataFrame:
    """BROKER_LOAD of the snapshot's replicas (or of a placement after a plan)."""
    loads = {}
    for r in resources:
        per_replica = replicas[r.replica_load_column].astype(float) if r.replica_load_column else 1.0
        loads[r.name] = pd.Series(per_replica, index=replicas.index).groupby(replicas["broker_id"]).sum()
    return load_frame(brokers, loads, resources)


def load_frame(brokers: pd.DataFrame, loads: dict[str, pd.Series], resources: list[Resource]) -> pd.DataFrame:
    """BROKER_LOAD: a row per pool broker and resource, with `loads[resource]` per broker id (0 where missing)."""
    pool_brokers = brokers[brokers["broker_pool"].notna()].sort_values("broker_id")
    frames = []
    for r in resources:
        capacity = pool_brokers[r.capacity_column].astype(float) if r.capacity_column else 1.0
        frame = pd.DataFrame({
            "broker_pool": pool_brokers["broker_pool"], "broker_id": pool_brokers["broker_id"],
            "rack": pool_brokers["rack"], "alive": pool_brokers["alive"],
            "eligible": pool_brokers["alive"] & ~pool_brokers["excluded"], "resource": r.name,
            "load": pool_brokers["broker_id"].map(loads[r.name]).fillna(0.0).astype(float), "capacity": capacity})
        frame["usage"] = np.where(frame["capacity"] > 0, frame["load"] / frame["capacity"], 0.0)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)[BROKER_LOAD.names]


def band_status(load: pd.DataFrame, bands: pd.DataFrame) -> pd.DataFrame:
    """load + lower, upper (capped by the capacity threshold), inside, inside_target (the target band, capped the
    same way), counted (eligible broker of a balanced resource: the rows whose band status matters)."""
    b = bands[["broker_pool", "resource", "lower", "upper", "target_lower", "target_upper", "capacity_threshold",
               "balanced"]]
    out = load.merge(b, on=["broker_pool", "resource"], how="left")
    cap = out["capacity_threshold"].astype(float)
    out["upper"] = np.where(cap.notna(), np.minimum(out["upper"], cap), out["upper"])
    target_upper = np.where(cap.notna(), np.minimum(out["target_upper"], cap), out["target_upper"])
    out["inside"] = (out["usage"] >= out["lower"] - EPS) & (out["usage"] <= out["upper"] + EPS)
    out["inside_target"] = (out["usage"] >= out["target_lower"] - EPS) & (out["usage"] <= target_upper + EPS)
    out["counted"] = out["eligible"] & out["balanced"].fillna(False).astype(bool)
    return out.drop(columns=["capacity_threshold", "balanced", "target_lower", "target_upper"])


def out_of_band(status: pd.DataFrame) -> pd.DataFrame:
    return status[status["counted"] & ~status["inside"]]
