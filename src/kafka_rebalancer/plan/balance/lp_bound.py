"""One lower bound on a pool's balance bytes over all its bands at once: an LP relaxation, solved by HiGHS (issue 36).

The separate bound (`bounds.fewest_bytes`) takes, per broker, the largest of its per-resource minima and adds them
up. It ignores that a broker must meet all its bands with the same replicas, and that what the givers give is
exactly what the receivers receive. This LP keeps both, in aggregate.

The pool's movable replicas (those a plan may move and need not: balance moves) and the replicas that must arrive
in the pool (forced: off a dead or drained broker, or home from another pool) are split into size classes (the
union of quantiles of size by count and by bytes) and commodities: a replica whose partition must keep exactly one
replica in each rack (`commodity` >= 0: its rack) can only be replaced in that rack; any other replica may land on
any broker that receives (`commodity` -1). A (commodity, class) is a slot. Per broker i and slot s: `n` of its
movable replicas, `S` bytes, sizes in `[lo, hi]` and, per byte-dependent load (network in: any resource neither a
count nor the size itself), total `L`, per replica in `[lmin, lmax]` and per byte in `[rmin, rmax]`. Slot-wide
(movable and forced replicas alike) the same without the i.

Variables per (broker, slot): given `g` replicas, `gb` bytes, `gl` load of each byte-dependent resource; received
`r`, `rb`, `rl` (a broker receives only its rack's commodity and the free one). Rows:
- given: `g <= n`, `g lo <= gb <= g hi` and, for the replicas kept, `(n - g) lo <= S - gb <= (n - g) hi`; the
  loads alike per replica and per byte (`rmin gb <= gl <= rmax gb`, and so for the kept);
- received: `r lo_s <= rb <= r hi_s`, the loads alike with the slot-wide figures;
- flow per slot: received = given + forced arrivals, in replicas, bytes and every load (forced at their exact
  figures);
- bands: per broker and resource whose band is enforced (not role-dependent, balanced, eligible broker),
  `lower <= base - given + received <= upper` (base: its load once the replicas that must leave it have left;
  counts count replicas, the size is bytes, a load its load).
Objective: the bytes given, which is the balance bytes (forced bytes are copied whatever the plan does).
(In the LP `gb = g lo + e` and `gl = g lmin + f`, so each two-sided pair of rows above is one row and a bound.)

Why it is a relaxation: take any plan that keeps the placement rules and leaves every broker inside its band. Set
`g, gb, gl` to what its balance moves take off broker i of slot s and `r, rb, rl` to what lands on i of slot s
(balance or forced). Each given replica is one of the broker's `n` in the slot, so its size and loads lie within
the slot's per-broker ranges and so do the kept ones'; each received replica is one of the slot's; every replica
that leaves a broker lands on exactly one broker of the pool that receives, once, and a rack-bound one in its
rack (rack diversity: a partition on all of the pool's racks, one replica in each, as many as its replication
factor, keeps one in each); and the broker's load after the plan is its base less what it gives plus what it
receives. So every row holds and the objective is the plan's balance bytes: the LP's optimum is at most that.
Brokers merged into one (`max_units`: the rows of the merged brokers added up, their slots' ranges joined) and
left-out constraints (role-dependent resources, which leadership alone may fix; one replica of a partition per
broker; budgets) only lower the optimum. If the LP is infeasible, no plan lands every broker in its band, even
fractionally: there is no bound to report (None).

Without free replicas (all rack-bound) the racks are independent LPs, solved one by one. The figure reported is
HiGHS' optimum less a relative `SAFETY` for the solver's tolerances.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import highspy
import numpy as np

# Size classes: half by count quantiles, half by byte quantiles (duplicates merged). 24 gave bounds within 0.2 % of
# 12's on every bench shape, but at 1,000 brokers HiGHS' simplex took 18 s on them against 0.5 s on 12.
CLASSES = 12
MAX_UNITS = 200  # brokers per LP beyond which brokers inside their bands are merged (0: never)
TIME_LIMIT = 30.0  # seconds HiGHS may take (per LP) before the bound is given up (None)
SAFETY = 1e-6  # relative: the bound reported is the LP optimum times 1 - SAFETY
FREE = -1  # the commodity of a replica that may land on any broker that receives
INF = highspy.kHighsInf


@dataclass(frozen=True)
class LpBound:
    bytes: float | None  # the bound (None: infeasible, or HiGHS did not prove its optimum)
    status: str  # HiGHS' model status ("Optimal", "Infeasible", ...), or why it was not run
    seconds: float  # building and solving
    columns: int = 0  # of the LPs solved, added up
    rows: int = 0
    tight_bytes: float | None = None  # the same LP against the `tight` edges, where given (None as `bytes`)


def size_classes(sizes: np.ndarray, classes: int) -> np.ndarray:
    """Class edges (sorted, unique): quantiles of the sizes by count and by bytes, `classes` in all (fewer where
    sizes repeat). A replica's class is `np.searchsorted(edges, size, side="right")`."""
    if classes <= 1 or not len(sizes):
        return np.zeros(0)
    ordered = np.sort(sizes.astype(float))
    by_count = np.quantile(ordered, np.linspace(0.0, 1.0, classes // 2 + 1)[1:-1])
    total = np.cumsum(ordered)
    by_bytes = np.zeros(0)
    if total[-1] > 0:
        at = np.searchsorted(total, total[-1] * np.linspace(0.0, 1.0, classes - classes // 2 + 1)[1:-1])
        by_bytes = ordered[np.minimum(at, len(ordered) - 1)]
    edges = np.unique(np.concatenate([by_count, by_bytes]))
    # An edge at or below the smallest size makes an empty class, and so does one above the largest.
    return edges[(edges > ordered[0]) & (edges <= ordered[-1])]


@dataclass(frozen=True)
class _Groups:
    """Per group (sorted unique keys) of replicas: count, bytes, smallest and largest size, and per load: total,
    smallest and largest per replica, smallest and largest per byte."""

    keys: np.ndarray
    count: np.ndarray
    bytes: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    load: np.ndarray  # (groups, T)
    lmin: np.ndarray
    lmax: np.ndarray
    rmin: np.ndarray  # load per byte: 0 where no replica has bytes (its rows are then trivial and left out)
    rmax: np.ndarray  # inf where a replica carries load without bytes (no such row)


def _groups(key: np.ndarray, size: np.ndarray, load: np.ndarray) -> _Groups:
    t = load.shape[1]
    if not len(key):
        empty = np.zeros(0)
        return _Groups(key[:0], empty, empty, empty, empty, *(np.zeros((0, t)),) * 5)
    order = np.argsort(key, kind="stable")
    key, size, load = key[order], size[order].astype(float), load[order]
    keys, starts = np.unique(key, return_index=True)
    count = np.diff(np.append(starts, len(key))).astype(float)
    positive = size > 0
    ratio = np.where(positive[:, None], load / np.where(positive, size, 1.0)[:, None], 0.0)
    has_positive = np.logical_or.reduceat(positive, starts)
    rmin = np.minimum.reduceat(np.where(positive[:, None], ratio, np.inf), starts, axis=0) if t else ratio[:0]
    rmin = np.where(has_positive[:, None], rmin, 0.0) if t else np.zeros((len(keys), 0))
    if t:
        unbounded = np.logical_or.reduceat(~positive[:, None] & (load > 0), starts, axis=0)
        rmax = np.where(unbounded, np.inf, np.maximum.reduceat(ratio, starts, axis=0))
        loads = (np.add.reduceat(load, starts, axis=0), np.minimum.reduceat(load, starts, axis=0),
                 np.maximum.reduceat(load, starts, axis=0))
    else:
        rmax = np.zeros((len(keys), 0))
        loads = (np.zeros((len(keys), 0)),) * 3
    return _Groups(keys, count, np.add.reduceat(size, starts), np.minimum.reduceat(size, starts),
                   np.maximum.reduceat(size, starts), *loads, rmin, rmax)


class _Rows:
    """The LP's rows, gathered as blocks of (lower, upper, entries)."""

    def __init__(self) -> None:
        self.lower: list[np.ndarray] = []
        self.upper: list[np.ndarray] = []
        self.row: list[np.ndarray] = []
        self.col: list[np.ndarray] = []
        self.val: list[np.ndarray] = []
        self.count = 0

    def block(self, lower: np.ndarray | float, upper: np.ndarray | float, n: int,
              *terms: tuple[np.ndarray, np.ndarray, np.ndarray | float]) -> None:
        """n rows `lower <= sum of terms <= upper`; a term is (row within the block, column, coefficient)."""
        for row, col, val in terms:
            val = np.broadcast_to(np.asarray(val, dtype=float), np.shape(col))
            keep = val != 0
            self.row.append(np.asarray(row)[keep] + self.count)
            self.col.append(np.asarray(col)[keep])
            self.val.append(val[keep])
        self.lower.append(np.broadcast_to(np.asarray(lower, dtype=float), (n,)))
        self.upper.append(np.broadcast_to(np.asarray(upper, dtype=float), (n,)))
        self.count += n

    def each(self, lower: np.ndarray | float, upper: np.ndarray | float, mask: np.ndarray,
             *terms: tuple[np.ndarray, np.ndarray | float]) -> None:
        """One row per element where `mask`: `lower <= sum of coefficient * column <= upper`."""
        n = int(mask.sum())
        rows = np.arange(n)

        def pick(x: np.ndarray | float) -> np.ndarray | float:
            return x[mask] if isinstance(x, np.ndarray) and x.shape == mask.shape else x

        self.block(pick(lower), pick(upper), n, *((rows, col[mask], pick(val)) for col, val in terms))


@dataclass(frozen=True)
class _Side:
    """One side's columns (given or received), per pair: count, the bytes above count x smallest (e), and per load
    the load above count x smallest (f); with the pair's smallest size and load, for `amount`."""

    count: np.ndarray
    extra: np.ndarray
    load_extra: list[np.ndarray]
    lo: np.ndarray
    lmin: np.ndarray  # (pairs, T)

    def amount(self, kind: str, t: int) -> list[tuple[np.ndarray, np.ndarray | float]]:
        """The pair's replicas ("count"), bytes or load t as (column, coefficient) terms."""
        if kind == "count":
            return [(self.count, 1.0)]
        if kind == "bytes":
            return [(self.count, self.lo), (self.extra, 1.0)]
        return [(self.count, self.lmin[:, t]), (self.load_extra[t], 1.0)]


def lp_lower_bound(*, broker: np.ndarray, size: np.ndarray, load: np.ndarray, is_count: np.ndarray,
                   forced_size: np.ndarray, forced_load: np.ndarray, base: np.ndarray, lower: np.ndarray,
                   upper: np.ndarray, receives: np.ndarray, commodity: np.ndarray | None = None,
                   forced_commodity: np.ndarray | None = None, broker_rack: np.ndarray | None = None,
                   classes: int | None = None, max_units: int | None = None,
                   time_limit: float | None = None,
                   tight: tuple[np.ndarray, np.ndarray] | None = None) -> LpBound:
    """The LP's bound on one pool's balance bytes (see the module docstring).

    Movable replicas (n): `broker` (index into the pool's B brokers), `size` (bytes), `load` (n x R: each
    resource's load; a count resource's column is not read), `commodity` (FREE, or the rack index its replacement
    must land in; None: all FREE). Forced arrivals (f): `forced_size`, `forced_load` (f x R), `forced_commodity`.
    Per broker and resource (B x R): `base` (the load once the replicas that must leave it have left), `lower`,
    `upper` (the band's edges in load units; -inf / inf where the band is not enforced). Per broker (B):
    `receives` (may it receive replicas), `broker_rack` (rack index, or -1). A resource whose every load equals the
    replica's size (disk) is counted in bytes, a count resource (`is_count`) in replicas, any other as a load of
    its own; one whose loads are not all known is left out. `classes`, `max_units`, `time_limit`: CLASSES,
    MAX_UNITS, TIME_LIMIT where None. `tight`: other edges (lower, upper; B x R, within `lower` and `upper`,
    enforced where they are), whose bound is solved again on the same LP from its optimal basis (`tight_bytes`)."""
    started = time.monotonic()
    n_brokers, n_res = base.shape
    size, forced_size = np.asarray(size, dtype=float), np.asarray(forced_size, dtype=float)
    load = np.asarray(load, dtype=float).reshape(len(size), n_res)
    forced_load = np.asarray(forced_load, dtype=float).reshape(len(forced_size), n_res)
    commodity = np.full(len(size), FREE) if commodity is None else np.asarray(commodity, dtype=np.int64)
    forced_commodity = (np.full(len(forced_size), FREE) if forced_commodity is None
                        else np.asarray(forced_commodity, dtype=np.int64))
    broker_rack = np.full(n_brokers, -1) if broker_rack is None else np.asarray(broker_rack, dtype=np.int64)
    problem = _problem(size, load, np.asarray(is_count, dtype=bool), forced_size, forced_load, base, lower, upper,
                       np.asarray(receives, dtype=bool), broker_rack, CLASSES if classes is None else classes,
                       TIME_LIMIT if time_limit is None else time_limit, tight)
    if problem is None:
        return LpBound(0.0, "no band enforced", time.monotonic() - started,
                       tight_bytes=None if tight is None else 0.0)
    # The LPs: one per rack when every replica is rack-bound (they share nothing), else one.
    if (commodity == FREE).any() or (forced_commodity == FREE).any():
        parts = [(np.ones(n_brokers, dtype=bool), np.ones(len(size), dtype=bool),
                  np.ones(len(forced_size), dtype=bool))]
    else:
        racks = np.unique(np.concatenate([commodity, forced_commodity]))
        parts = [(broker_rack == rack, commodity == rack, forced_commodity == rack) for rack in racks]
    # A broker in no LP neither gives nor receives: its base must be inside its band.
    alone = np.ones(n_brokers, dtype=bool)
    for brokers, _, _ in parts:
        alone &= ~brokers
    if np.any(alone[:, None] & ((problem.base < problem.lower) | (problem.base > problem.upper))):
        return LpBound(None, "Infeasible", time.monotonic() - started)
    # The tight edges' bound is lost (None) once one of their LPs has none, or a broker alone is outside them.
    tight_ok = problem.tight is not None and not np.any(
        alone[:, None] & ((problem.base < problem.tight[0]) | (problem.base > problem.tight[1])))
    total, tight_total, columns, rows, statuses = 0.0, 0.0, 0, 0, set()
    for brokers, movable, forced in parts:
        units = _units(brokers, problem, MAX_UNITS if max_units is None else max_units)
        solved = problem.solve(units, np.asarray(broker, dtype=np.int64)[movable], movable, forced,
                               commodity[movable], forced_commodity[forced], tight_ok)
        columns, rows = columns + solved.columns, rows + solved.rows
        statuses.add(solved.status)
        if solved.value is None:
            return LpBound(None, solved.status, time.monotonic() - started, columns, rows)
        total += solved.value
        tight_ok = tight_ok and solved.tight_value is not None
        tight_total += solved.tight_value or 0.0
    bound = max(0.0, total * problem.unit_bytes * (1.0 - SAFETY))
    # The tight bound is at least the other (it is the same LP with narrower edges): a solver's tolerance aside.
    tight_bound = max(bound, tight_total * problem.unit_bytes * (1.0 - SAFETY)) if tight_ok else None
    return LpBound(bound, "; ".join(sorted(statuses)) or "nothing to move", time.monotonic() - started, columns,
                   rows, tight_bound)


def _problem(size: np.ndarray, load: np.ndarray, is_count: np.ndarray, forced_size: np.ndarray,
             forced_load: np.ndarray, base: np.ndarray, lower: np.ndarray, upper: np.ndarray, receives: np.ndarray,
             rack: np.ndarray, classes: int, time_limit: float,
             tight: tuple[np.ndarray, np.ndarray] | None) -> _Problem | None:
    """The LP's data (`lp_lower_bound`'s) sorted into size classes and scaled; None where no band is enforced."""
    # A resource whose loads are not all known (a metric missing) is left out: fewer rows, a lower optimum.
    known = (np.isfinite(load).all(axis=0) & np.isfinite(forced_load).all(axis=0) & np.isfinite(base).all(axis=0)
             | is_count)
    enforced = (np.isfinite(lower) | np.isfinite(upper)) & known & np.isfinite(base)
    if not enforced.any():
        return None
    lower, upper = np.where(enforced, lower, -np.inf), np.where(enforced, upper, np.inf)
    # How each enforced resource counts: replicas, bytes, or its own load (column t of the loads kept).
    kinds: list[tuple[str, int]] = []
    own: list[int] = []
    for j in range(base.shape[1]):
        if not enforced[:, j].any():
            kinds.append(("none", -1))
        elif is_count[j]:
            kinds.append(("count", -1))
        elif np.array_equal(load[:, j], size) and np.array_equal(forced_load[:, j], forced_size):
            kinds.append(("bytes", -1))
        else:
            kinds.append(("load", len(own)))
            own.append(j)
    # Units keeping HiGHS' numbers near 1: the mean replica's bytes and load.
    all_size = np.concatenate([size, forced_size])
    unit_bytes = float(all_size.mean()) if len(all_size) and all_size.mean() > 0 else 1.0
    all_load = np.concatenate([load[:, own], forced_load[:, own]])
    unit_load = np.array([float(all_load[:, t].mean()) if len(all_load) and all_load[:, t].mean() > 0 else 1.0
                          for t in range(len(own))])
    unit = np.array([unit_bytes if kind == "bytes" else float(unit_load[t]) if kind == "load" else 1.0
                     for kind, t in kinds])
    edges = size_classes(all_size, classes)
    tight_edges = None if tight is None else (np.where(enforced, tight[0], -np.inf) / unit,
                                              np.where(enforced, tight[1], np.inf) / unit)
    return _Problem(
        n_classes=len(edges) + 1, kinds=kinds, time_limit=time_limit, unit_bytes=unit_bytes,
        size=size / unit_bytes, load=load[:, own] / unit_load, cls=np.searchsorted(edges, size, side="right"),
        forced_size=forced_size / unit_bytes, forced_load=forced_load[:, own] / unit_load,
        forced_cls=np.searchsorted(edges, forced_size, side="right"),
        base=base / unit, lower=lower / unit, upper=upper / unit, receives=receives, rack=rack, tight=tight_edges)


def _units(brokers: np.ndarray, problem: _Problem, max_units: int) -> np.ndarray:
    """Per broker of the pool: the index of the unit it is in, -1 where not in this LP (`brokers` False). Every
    broker is a unit of its own unless the LP has more than `max_units` of them: then the brokers inside every band
    are merged, those alike into one (the same rack and whether they receive; then, while units are left, the
    group whose members' room above or below an edge differs most, times its size, is split at that room's
    median)."""
    out = np.full(len(brokers), -1, dtype=np.int64)
    index = np.flatnonzero(brokers)
    out[index] = np.arange(len(index))
    if not max_units or len(index) <= max_units:
        return out
    base, lower, upper = problem.base[index], problem.lower[index], problem.upper[index]
    inside = np.all((lower <= base) & (base <= upper), axis=1)
    # Room above and below, in mean replicas (the problem's units), of every edge enforced somewhere.
    limited = np.isfinite(lower).any(axis=0) | np.isfinite(upper).any(axis=0)
    room = np.concatenate([np.where(np.isfinite(upper), upper - base, 0.0)[:, limited],
                           np.where(np.isfinite(lower), base - lower, 0.0)[:, limited]], axis=1)
    room = np.minimum(room, np.finfo(float).max / 4)
    positions = np.flatnonzero(inside)
    kinds = problem.receives[index[positions]].astype(np.int64) * (1 << 32) + problem.rack[index[positions]] + 1
    groups = [positions[kinds == k] for k in np.unique(kinds)]

    def spread(group: np.ndarray) -> tuple[float, int]:
        if len(group) < 2 or not room.shape[1]:
            return 0.0, 0
        width = room[group].max(axis=0) - room[group].min(axis=0)
        return float(width.max()) * len(group), int(np.argmax(width))

    spreads = [spread(g) for g in groups]
    budget = max(max_units - int((~inside).sum()), len(groups))
    while len(groups) < budget:
        widest = int(np.argmax([w for w, _ in spreads]))
        if spreads[widest][0] <= 0:
            break
        group, feature = groups.pop(widest), spreads.pop(widest)[1]
        order = group[np.argsort(room[group, feature], kind="stable")]
        halves = [order[:len(order) // 2], order[len(order) // 2:]]
        groups += halves
        spreads += [spread(h) for h in halves]
    for unit, group in enumerate(groups, start=len(index)):
        out[index[group]] = unit
    _, out[index] = np.unique(out[index], return_inverse=True)
    return out


@dataclass
class _Problem:
    """The pool's LP data in HiGHS' units (bytes and loads divided by the mean replica's)."""

    n_classes: int
    kinds: list[tuple[str, int]]
    time_limit: float
    unit_bytes: float
    size: np.ndarray
    load: np.ndarray  # (n, T): the byte-dependent loads
    cls: np.ndarray
    forced_size: np.ndarray
    forced_load: np.ndarray
    forced_cls: np.ndarray
    base: np.ndarray  # (B, R)
    lower: np.ndarray
    upper: np.ndarray
    receives: np.ndarray
    rack: np.ndarray
    tight: tuple[np.ndarray, np.ndarray] | None  # other edges (lower, upper), solved on the same LP

    def solve(self, units: np.ndarray, broker: np.ndarray, movable: np.ndarray, forced: np.ndarray,
              commodity: np.ndarray, forced_commodity: np.ndarray, tight: bool) -> _Solved:
        """The LP of the brokers in `units` (unit per broker, -1: not in it), the movable replicas `movable` (on
        brokers `broker`) and the forced arrivals `forced`; with `tight`, solved again against the tight edges."""
        n_t = self.load.shape[1]
        # Slots: (commodity, class) of the movable and forced replicas.
        size, load, cls = self.size[movable], self.load[movable], self.cls[movable]
        f_size, f_load, f_cls = self.forced_size[forced], self.forced_load[forced], self.forced_cls[forced]
        slot_key = (commodity + 1) * self.n_classes + cls
        f_slot_key = (forced_commodity + 1) * self.n_classes + f_cls
        slots = np.unique(np.concatenate([slot_key, f_slot_key]))
        slot, f_slot = np.searchsorted(slots, slot_key), np.searchsorted(slots, f_slot_key)
        whole = _groups(np.concatenate([slot, f_slot]), np.concatenate([size, f_size]),
                        np.concatenate([load, f_load]))
        given = _groups(units[broker] * len(slots) + slot, size, load)
        g_unit, g_slot = given.keys // len(slots), given.keys % len(slots)
        edges = _UnitEdges.of(self, units)
        r_unit, r_slot = edges.received_pairs(slots // self.n_classes - 1)
        p, q = len(given.keys), len(r_unit)

        # Columns: given g, e, f_t per given pair; received r, e, f_t per received pair.
        n_cols = (2 + n_t) * (p + q)
        offsets = np.cumsum([0, *([p] * (2 + n_t)), *([q] * (2 + n_t))])
        gcols = [np.arange(offsets[m], offsets[m + 1]) for m in range(2 + n_t)]
        rcols = [np.arange(offsets[2 + n_t + m], offsets[3 + n_t + m]) for m in range(2 + n_t)]
        gs = _Side(gcols[0], gcols[1], gcols[2:], given.lo, given.lmin)
        w = whole
        rs = _Side(rcols[0], rcols[1], rcols[2:], w.lo[r_slot], w.lmin[r_slot])
        upper = np.concatenate([
            given.count, given.bytes - given.count * given.lo,
            *(given.load[:, t] - given.count * given.lmin[:, t] for t in range(n_t)),
            w.count[r_slot], (w.hi[r_slot] - w.lo[r_slot]) * w.count[r_slot],
            *((w.lmax[r_slot, t] - w.lmin[r_slot, t]) * w.count[r_slot] for t in range(n_t))])
        cost = np.zeros(n_cols)
        cost[gs.count], cost[gs.extra] = given.lo, 1.0

        rows = _Rows()
        _given_rows(rows, given, gs)
        _received_rows(rows, whole, r_slot, rs)
        # Flow per slot: received = given + forced arrivals, in replicas, bytes and each load.
        arriving = _groups(f_slot, f_size, f_load)
        measures = [("count", -1, arriving.count), ("bytes", -1, arriving.bytes),
                    *(("load", t, arriving.load[:, t]) for t in range(n_t))]
        for kind, t, arrived in measures:
            amount = np.zeros(len(slots))
            amount[arriving.keys] = arrived
            rows.block(amount, amount, len(slots), *((r_slot, c, v) for c, v in rs.amount(kind, t)),
                       *((g_slot, c, -np.asarray(v)) for c, v in gs.amount(kind, t)))
        first_band_row = rows.count
        edges.band_rows(rows, self.kinds, (g_unit, gs), (r_unit, rs))
        tight_rows = None
        if tight and self.tight is not None:
            tight_edges = _UnitEdges.of(self, units, *self.tight)
            tight_rows = (np.arange(first_band_row, rows.count), *tight_edges.band_bounds(self.kinds, edges))
        value, status, tight_value = self._run(n_cols, cost, upper, rows, tight_rows)
        return _Solved(value, status, n_cols, rows.count, tight_value)

    def _run(self, n_cols: int, cost: np.ndarray, upper: np.ndarray, rows: _Rows,
             tight_rows: tuple[np.ndarray, np.ndarray, np.ndarray] | None) -> tuple[float | None, str, float | None]:
        """HiGHS' optimum (None: none proven) and status; then, with `tight_rows` (rows, lower, upper), the optimum
        with those rows' bounds so, from the first one's basis (None: none proven)."""
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = n_cols, rows.count
        lp.col_cost_ = cost
        lp.col_lower_ = np.zeros(n_cols)
        lp.col_upper_ = np.maximum(upper, 0.0)
        lp.row_lower_ = np.concatenate(rows.lower) if rows.lower else np.zeros(0)
        lp.row_upper_ = np.concatenate(rows.upper) if rows.upper else np.zeros(0)
        row, col, val = (np.concatenate(x) if x else np.zeros(0) for x in (rows.row, rows.col, rows.val))
        order = np.lexsort((col, row))
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.start_ = np.concatenate([[0], np.cumsum(np.bincount(row.astype(np.int64),
                                                                         minlength=rows.count))]).astype(np.int32)
        lp.a_matrix_.index_ = col[order].astype(np.int32)
        lp.a_matrix_.value_ = val[order].astype(float)
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("time_limit", float(self.time_limit))
        h.passModel(lp)
        h.run()
        status = h.getModelStatus()
        if status != highspy.HighsModelStatus.kOptimal:
            return None, h.modelStatusToString(status), None
        value = float(h.getInfo().objective_function_value)
        if tight_rows is None:
            return value, h.modelStatusToString(status), None
        at, lower, upper = tight_rows
        h.changeRowsBounds(  # type: ignore[attr-defined]  # highspy 1.16 has it; its stubs leave it out
            len(at), at.astype(np.int32), lower.astype(float), upper.astype(float))
        h.run()
        tight_status = h.getModelStatus()
        tight_value = (float(h.getInfo().objective_function_value)
                       if tight_status == highspy.HighsModelStatus.kOptimal else None)
        return value, h.modelStatusToString(status), tight_value


@dataclass(frozen=True)
class _Solved:
    value: float | None  # the LP's optimum (None: none proven)
    status: str  # HiGHS' model status
    columns: int
    rows: int
    tight_value: float | None  # the optimum against the tight edges (None: none proven, or not asked)


def _pick(value: np.ndarray | float, mask: np.ndarray) -> np.ndarray | float:
    return value[mask] if isinstance(value, np.ndarray) else value


def _given_rows(rows: _Rows, given: _Groups, gs: _Side) -> None:
    """Per given pair: e <= (hi - lo) g and, the kept replicas at most hi each, e >= S - n hi + (hi - lo) g; the
    loads alike; and per byte, rmin gb <= gl and so for the kept (L - gl >= rmin (S - gb)), rmax alike."""
    spread = given.hi - given.lo
    rows.each(given.bytes - given.count * given.hi, 0.0, spread > 0, (gs.extra, 1.0), (gs.count, -spread))
    for t in range(given.load.shape[1]):
        lt, lmin, lmax = given.load[:, t], given.lmin[:, t], given.lmax[:, t]
        rows.each(lt - given.count * lmax, 0.0, lmax > lmin, (gs.load_extra[t], 1.0), (gs.count, -(lmax - lmin)))
        for ratio, side in ((given.rmin[:, t], 1.0), (given.rmax[:, t], -1.0)):
            ok = np.isfinite(ratio) & (ratio > 0)
            safe = np.where(ok, ratio, 0.0)
            kept = lt - safe * given.bytes
            rows.each(np.where(side > 0, 0.0, kept), np.where(side > 0, kept, 0.0), ok,
                      (gs.count, lmin - safe * given.lo), (gs.load_extra[t], 1.0), (gs.extra, -safe))


def _received_rows(rows: _Rows, whole: _Groups, r_slot: np.ndarray, rs: _Side) -> None:
    """Per received pair: e <= (hi - lo) r with the slot's sizes, the loads alike, and per byte."""
    spread = whole.hi[r_slot] - whole.lo[r_slot]
    rows.each(-INF, 0.0, spread > 0, (rs.extra, 1.0), (rs.count, -spread))
    for t in range(whole.load.shape[1]):
        lmin, lmax = whole.lmin[r_slot, t], whole.lmax[r_slot, t]
        rows.each(-INF, 0.0, lmax > lmin, (rs.load_extra[t], 1.0), (rs.count, -(lmax - lmin)))
        for ratio, low, high in ((whole.rmin[r_slot, t], 0.0, INF), (whole.rmax[r_slot, t], -INF, 0.0)):
            ok = np.isfinite(ratio) & (ratio > 0)
            safe = np.where(ok, ratio, 0.0)
            rows.each(low, high, ok, (rs.count, lmin - safe * rs.lo), (rs.load_extra[t], 1.0), (rs.extra, -safe))


@dataclass(frozen=True)
class _UnitEdges:
    """Per unit of an LP: base and edges added up (its brokers' rows summed), whether any of its brokers
    receives, and their rack (units never mix racks)."""

    base: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    receives: np.ndarray
    rack: np.ndarray

    @classmethod
    def of(cls, problem: _Problem, units: np.ndarray, lower: np.ndarray | None = None,
           upper: np.ndarray | None = None) -> _UnitEdges:
        """The units' edges from the problem's (`lower`, `upper`: other edges per broker, where given)."""
        n_units = int(units.max()) + 1 if len(units) else 0
        in_lp = units >= 0
        sums = []
        for values in (problem.base, problem.lower if lower is None else lower,
                       problem.upper if upper is None else upper):
            total = np.zeros((n_units, values.shape[1]))
            np.add.at(total, units[in_lp], values[in_lp])
            sums.append(total)
        receives = np.zeros(n_units, dtype=bool)
        np.logical_or.at(receives, units[in_lp], problem.receives[in_lp])
        rack = np.full(n_units, -1)
        rack[units[in_lp]] = problem.rack[in_lp]
        base, lower_sum, upper_sum = sums
        return cls(base, lower_sum, upper_sum, receives, rack)

    def received_pairs(self, slot_commodity: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(unit, slot) for every unit that receives and slot of the free commodity or its rack's."""
        units, slots = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
        for c in np.unique(slot_commodity):
            takers = np.flatnonzero(self.receives & ((self.rack == c) | (c == FREE)))
            of_c = np.flatnonzero(slot_commodity == c)
            units.append(np.repeat(takers, len(of_c)))
            slots.append(np.tile(of_c, len(takers)))
        return np.concatenate(units), np.concatenate(slots)

    def band_rows(self, rows: _Rows, kinds: list[tuple[str, int]], given: tuple[np.ndarray, _Side],
                  received: tuple[np.ndarray, _Side]) -> None:
        """Per unit and enforced resource: lower - base <= received - given <= upper - base."""
        (g_unit, gs), (r_unit, rs) = given, received
        for j, (kind, t) in enumerate(kinds):
            if kind == "none":
                continue
            low, high = self.lower[:, j] - self.base[:, j], self.upper[:, j] - self.base[:, j]
            limited = np.isfinite(self.lower[:, j]) | np.isfinite(self.upper[:, j])
            at = np.full(len(low), -1)
            at[limited] = np.arange(int(limited.sum()))
            r_in, g_in = at[r_unit] >= 0, at[g_unit] >= 0
            rows.block(low[limited], high[limited], int(limited.sum()),
                       *((at[r_unit][r_in], c[r_in], _pick(v, r_in)) for c, v in rs.amount(kind, t)),
                       *((at[g_unit][g_in], c[g_in], -_pick(v, g_in)) for c, v in gs.amount(kind, t)))

    def band_bounds(self, kinds: list[tuple[str, int]], rows_of: _UnitEdges) -> tuple[np.ndarray, np.ndarray]:
        """The lower and upper bounds, from these edges, of the rows `rows_of.band_rows` added, in their order."""
        lows, highs = [np.zeros(0)], [np.zeros(0)]
        for j, (kind, _) in enumerate(kinds):
            if kind == "none":
                continue
            limited = np.isfinite(rows_of.lower[:, j]) | np.isfinite(rows_of.upper[:, j])
            lows.append((self.lower[:, j] - self.base[:, j])[limited])
            highs.append((self.upper[:, j] - self.base[:, j])[limited])
        return np.concatenate(lows), np.concatenate(highs)
