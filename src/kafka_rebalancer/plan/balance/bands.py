"""The balance band (README: How a plan is made, seed 001).

For a pool and a resource: `m` is the mean usage over the pool's brokers that may receive replicas, the
allowed float is `f = threshold - 1`, and the band is `[m(1-f), m(1+f)]`.

The mean is capacity-weighted, `m = sum(load) / sum(capacity)`: with equal capacities (and for counts, whose
capacity is 1) that is exactly the patent's mean of usages; with unequal capacities the plain mean of usages
gives a band that no assignment can satisfy, because moving replicas conserves the pool's total load.

Moves aim at the tighter target band `[m(1-f*margin), m(1+f*margin)]` (hysteresis).

`f` and `f*margin` are exact fractions of the settings' decimal text (`spread`): in floats 1.10 - 1.0 is
0.10000000000000009, which put an integral edge one count further out. Bytes and rates keep float edges,
`m * float(1 ∓ f)`. A count band is the integers inside the exact interval, computed from the pool's total and
broker count in integer arithmetic (`count_edges`); where those
integers cannot hold the pool's total it is widened to `[floor m, ceil m]`, the narrowest band that can, and the
band says so (`widening_note`). The target band follows the same rule with `f*margin`, so it too is at least
`[floor m, ceil m]` and never leaves the band, and its widening is noted the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any


def spread(threshold: float, margin: float = 1.0) -> Fraction:
    """The band's relative half-width `f * margin` with `f = threshold - 1`, exact in the settings' decimals
    (str of a float is its shortest round-tripping decimal: the text the config was written in)."""
    return (Fraction(str(threshold)) - 1) * Fraction(str(margin))


def spread_text(threshold: float, margin: float = 1.0) -> str:
    """`f * margin` as a percentage for notes: 1.1 -> '10%', 1.125 -> '12.5%', 1.1 with margin 0.9 -> '9%'."""
    return f"{float(spread(threshold, margin) * 100):g}%"


def count_edges(total: int, n: int, spread_num: int, spread_den: int) -> tuple[int, int, bool]:
    """(lower, upper, widened) of a count band: the integers inside `[m(1-s), m(1+s)]` with `m = total / n` and
    `s = spread_num / spread_den` (>= 0), or `[floor m, ceil m]` (widened) where those cannot hold `total`.

    Integer arithmetic only, so it is exact (the lower edge is negative when f > 1, and `//` floors). With s = p/q,
    m(1-s) = total(q-p) / (nq). Integers [lo, hi] can hold total over n brokers iff n*lo <= total <= n*hi, that is
    lo <= floor m and hi >= ceil m; when the inside integers miss that they lie within [floor m, ceil m], so taking
    the least / greatest of the two is the widening, and a no-op otherwise."""
    p, q = spread_num, spread_den
    inside_lower = -(-total * (q - p) // (n * q))  # ceil
    inside_upper = total * (q + p) // (n * q)
    mean_floor, mean_ceil = total // n, -(-total // n)
    widened = inside_lower > mean_floor or inside_upper < mean_ceil
    return min(inside_lower, mean_floor), max(inside_upper, mean_ceil), widened


def widening_note(band: Band, threshold: float, margin: float) -> str | None:
    """The band row's note when `count_edges` widened the band or the target band to [floor m, ceil m]."""
    notes = [f"{which} widened to [{int(lower)}, {int(upper)}]: the integers inside ±{spread_text(threshold, m)} "
             "of the mean cannot hold the pool's total"
             for which, lower, upper, m, widened in (("band", band.lower, band.upper, 1.0, band.widened),
                                                     ("target band", band.target_lower, band.target_upper, margin,
                                                      band.target_widened)) if widened]
    return "; ".join(notes) or None


def band_edges(mean: float, threshold: float, margin: float) -> tuple[float, float, float, float]:
    """(lower, upper, target_lower, target_upper) of a band of bytes or rates: float edges of exact factors."""
    f, target_f = spread(threshold), spread(threshold, margin)
    return mean * float(1 - f), mean * float(1 + f), mean * float(1 - target_f), mean * float(1 + target_f)


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
    widened: bool = False  # a count band stretched to [floor m, ceil m] (`count_edges`)
    target_widened: bool = False  # its target band stretched the same way

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
             margin: float, low_utilization: float = 0.0, capacity_threshold: float | None = None,
             incoming: float = 0.0) -> Band:
    """The band from the loads and capacities of the brokers that may receive replicas, with `incoming` the load
    they will gain (or, negative, lose) from replicas that must move. The sums are exactly rounded (`fsum`), so
    the band does not depend on the order the brokers come in: an edge a bit off can change the plan."""
    total_capacity = math.fsum(capacities)
    total = math.fsum([*loads, incoming])
    mean = total / total_capacity if total_capacity > 0 else 0.0
    balanced = total_capacity > 0 and mean >= low_utilization
    if not is_count:
        return Band(resource, is_count, mean, *band_edges(mean, threshold, margin), capacity_threshold, balanced)
    if not loads:
        return Band(resource, is_count, mean, 0.0, 0.0, 0.0, 0.0, capacity_threshold, balanced)
    if total != int(total):
        raise ValueError(f"{resource}: a count total must be whole, got {total!r}")
    f, target_f = spread(threshold), spread(threshold, margin)
    lower, upper, widened = count_edges(int(total), len(loads), f.numerator, f.denominator)
    target_lower, target_upper, target_widened = count_edges(int(total), len(loads), target_f.numerator,
                                                             target_f.denominator)
    return Band(resource, is_count, mean, float(lower), float(upper), float(target_lower), float(target_upper),
                capacity_threshold, balanced, widened, target_widened)
