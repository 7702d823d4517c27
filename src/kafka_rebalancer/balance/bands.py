"""The balance band (README: How a plan is made, seed 001).

For a pool and a resource: `m` is the mean usage over the pool's brokers that may receive replicas, the
allowed float is `f = threshold - 1`, and the band is `[m(1-f), m(1+f)]`.

The mean is capacity-weighted, `m = sum(load) / sum(capacity)`: with equal capacities (and for counts, whose
capacity is 1) that is exactly the patent's mean of usages; with unequal capacities the plain mean of usages
gives a band that no assignment can satisfy, because moving replicas conserves the pool's total load.

Moves aim at the tighter target band `[m(1-f*margin), m(1+f*margin)]` (hysteresis). For counts the upper
edges round up and the lower edges down.

`band_edges` is written with arithmetic only, so the same formula runs on numpy arrays, Python floats and Spark
columns (the plan job computes bands in Spark; verify and tests compute them with numpy).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

N = TypeVar("N")


def band_edges(mean: N, threshold: float | N, margin: float | N, *, is_count: bool,
               ceil: Callable[[Any], Any] = math.ceil, floor: Callable[[Any], Any] = math.floor) -> tuple[N, N, N, N]:
    """(lower, upper, target_lower, target_upper) for a mean usage."""
    f = threshold - 1.0
    lower, upper = mean * (1.0 - f), mean * (1.0 + f)  # type: ignore[operator]
    target_lower, target_upper = mean * (1.0 - f * margin), mean * (1.0 + f * margin)  # type: ignore[operator]
    if is_count:
        return floor(lower), ceil(upper), floor(target_lower), ceil(target_upper)
    return lower, upper, target_lower, target_upper


@dataclass(frozen=True)
class Band:
    """The band of one (pool, resource), as the planner and the reports use it."""

    resource: str
    is_count: bool
    mean: float
    lower: float
    upper: float
    target_lower: float
    target_upper: float
    capacity_threshold: float | None  # hard ceiling on usage (fraction of capacity), None: none
    balanced: bool  # False when the mean is under the low-utilisation floor: nothing to gain

    def contains(self, usage: float, eps: float = 1e-9) -> bool:
        return self.lower - eps <= usage <= self.upper + eps

    @property
    def effective_upper(self) -> float:
        """The band's upper edge, capped by the capacity threshold."""
        if self.capacity_threshold is None:
            return self.upper
        return min(self.upper, self.capacity_threshold)

    @classmethod
    def from_row(cls, row: dict[str, Any], is_count: bool) -> Band:
        cap = row.get("capacity_threshold")
        return cls(str(row["resource"]), is_count, float(row["mean"]), float(row["lower"]), float(row["upper"]),
                   float(row["target_lower"]), float(row["target_upper"]),
                   None if cap is None or (isinstance(cap, float) and math.isnan(cap)) else float(cap),
                   bool(row["balanced"]))


def band_for(resource: str, is_count: bool, loads: list[float], capacities: list[float], threshold: float,
             margin: float, low_utilization: float = 0.0, capacity_threshold: float | None = None) -> Band:
    """The band from the loads and capacities of the brokers that may receive replicas (plain Python)."""
    total_capacity = float(sum(capacities))
    mean = float(sum(loads)) / total_capacity if total_capacity > 0 else 0.0
    lower, upper, target_lower, target_upper = band_edges(mean, threshold, margin, is_count=is_count)
    return Band(resource, is_count, mean, float(lower), float(upper), float(target_lower), float(target_upper),
                capacity_threshold, total_capacity > 0 and mean >= low_utilization)
