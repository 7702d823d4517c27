"""The execution bench's figures (bench/execute.py), as pure functions of a run's execution log, the plan's moves
and the traffic's samples; and the table and targets of its BENCHMARKS.md section. Unit-tested on hand-written logs
(tests/unit/test_bench_execute.py)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from itertools import pairwise
from typing import Any

from kafka_rebalancer.execute.moves import PartitionMove
from kafka_rebalancer.model.copy_time import ESTIMATE_POINTS, CopyBytes

EFFICIENCY_TARGET, ESTIMATE_TARGET = 1.15, 0.20
TIMELINE_STEP_S = 5.0

Key = tuple[str, int]


# -- figures from an execution log (pure) ---------------------------------------------------------------------------
def ts(entry: Mapping[str, Any]) -> float:
    return datetime.fromisoformat(entry["ts"]).timestamp()


def key_of(entry: Mapping[str, Any]) -> Key | None:
    return (entry["topic"], int(entry["partition"])) if "topic" in entry else None


def last_attempt(entries: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The entries from the last execute_started on: an earlier attempt of a resumed run is not this execution."""
    starts = [i for i, e in enumerate(entries) if e["action"] == "execute_started"]
    if not starts:
        raise ValueError("the execution log has no execute_started entry")
    return list(entries[starts[-1]:])


def wall_span(entries: Sequence[Mapping[str, Any]]) -> tuple[float, float]:
    """(execute_started, execute_finished) of the attempt, as epoch seconds."""
    finished = [e for e in entries if e["action"] == "execute_finished"]
    if not finished:
        raise ValueError("the execution did not finish (no execute_finished entry)")
    return ts(entries[0]), ts(finished[0])


def leadership_seconds(entries: Sequence[Mapping[str, Any]]) -> float:
    """The leadership-only batches, which run before any data move: from the first one's start to the first data
    move's start (or, without data moves, to the last leadership-only completion); 0.0 without any."""
    started = [e for e in entries if e["action"] == "started"]
    lead = [e for e in started if e.get("leadership_only")]
    if not lead:
        return 0.0
    data = [e for e in started if not e.get("leadership_only")]
    if data:
        return ts(data[0]) - ts(lead[0])
    lead_keys = {key_of(e) for e in lead}
    done = [ts(e) for e in entries if e["action"] == "completed" and key_of(e) in lead_keys]
    return max(done, default=ts(lead[0])) - ts(lead[0])


def gate_intervals(entries: Sequence[Mapping[str, Any]]) -> list[tuple[float, float]]:
    """The ISR gate's holds: waiting_for_isr to isr_recovered or isr_wait_timeout (an open one to the last entry)."""
    holds, since = [], None
    for e in entries:
        if e["action"] == "waiting_for_isr" and since is None:
            since = ts(e)
        elif e["action"] in ("isr_recovered", "isr_wait_timeout") and since is not None:
            holds.append((since, ts(e)))
            since = None
    if since is not None:
        holds.append((since, ts(entries[-1])))
    return holds


def estimate_errors(entries: Sequence[Mapping[str, Any]], actual_s: float) -> dict[str, dict[str, Any]]:
    """Each recorded estimate's predicted finish against the real one, by its point: "0" before the first move ("start"
    on a resumed run), then the largest of ESTIMATE_POINTS reached, in % (one move passing two: the lower absent)."""
    out: dict[str, dict[str, Any]] = {}
    for i, e in enumerate(x for x in entries if x["action"] == "estimate"):
        fraction = float(e["done_fraction"])
        if i == 0:
            point = "0" if fraction == 0 else "start"
        else:
            point = str(round(100 * max((p for p in ESTIMATE_POINTS if fraction >= p), default=0.0)))
        finish = e.get("finish_s")
        error = None if finish is None or actual_s <= 0 else round(finish / actual_s - 1, 4)
        out.setdefault(point, {"done_fraction": fraction, "elapsed_s": e.get("elapsed_s"), "finish_s": finish,
                               "error": error})
    return out


def tuned(entries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The throttle tuner's changes (throttle_tuned entries): how many, when the first came (seconds from the start)
    and the highest rate it gave Kafka."""
    changes = [e for e in entries if e["action"] == "throttle_tuned"]
    given = [r for e in changes for r in e.get("rates", {}).values()]
    return {"changes": len(changes), "first_s": round(ts(changes[0]) - ts(entries[0]), 1) if changes else None,
            "max_given_bytes_per_s": max(given, default=None)}


def union_seconds(intervals: Iterable[tuple[float, float]], start: float, end: float) -> float:
    """The length of the union of the intervals, within [start, end]."""
    total, reach = 0.0, start
    for lo, hi in sorted(intervals):
        lo, hi = max(lo, reach), min(hi, end)
        if hi > lo:
            total += hi - lo
            reach = hi
    return total


def in_flight(entries: Sequence[Mapping[str, Any]], keys: set[Key]) -> list[tuple[float, float]]:
    """When each of these moves was in flight per the log: started to completed, skipped or restarted (or the end)."""
    intervals, opened = [], {}
    for e in entries:
        k = key_of(e)
        if k not in keys:
            continue
        if e["action"] == "started":
            opened[k] = ts(e)
        elif e["action"] in ("completed", "skipped", "restart") and k in opened:
            intervals.append((opened.pop(k), ts(e)))
    return intervals + [(t, ts(entries[-1])) for t in opened.values()]


def execution_figures(log: Sequence[Mapping[str, Any]], moves: Sequence[PartitionMove], rate: int,
                      kafka_rate: float | None = None) -> dict[str, Any]:
    """Efficiency, leadership time, estimate errors, ISR gate and the bottleneck's idle time of one execution.
    kafka_rate: the rate Kafka copies at under this throttle without the executor; efficiency_at_kafka_rate is the
    wall time over the bound at that rate (what is left to the executor)."""
    entries = last_attempt(log)
    started, finished = wall_span(entries)
    wall = finished - started
    copies = CopyBytes.of(moves)
    bound = copies.seconds(rate) or 0.0
    lead = leadership_seconds(entries)
    holds = gate_intervals(entries)
    data_keys = {m.key for m in moves if not m.leadership_only}
    data = [e for e in entries if key_of(e) in data_keys and e["action"] in ("started", "completed")]
    figures: dict[str, Any] = {
        "wall_s": round(wall, 2), "bound_s": round(bound, 2), "leadership_s": round(lead, 2),
        "efficiency": round(wall / bound, 3) if bound else None,
        "efficiency_without_leadership": round((wall - lead) / bound, 3) if bound else None,
        "efficiency_at_kafka_rate": round(wall * kafka_rate / (bound * rate), 3) if bound and kafka_rate else None,
        "estimates": estimate_errors(entries, wall),
        "isr_gate_s": round(sum(b - a for a, b in holds), 2), "isr_gate_holds": len(holds),
        "throttle_tuned": tuned(entries),
        "completed": sum(1 for e in entries if e["action"] == "completed"),
        "skipped": sum(1 for e in entries if e["action"] == "skipped"),
    }
    bottleneck = copies.bottleneck()
    if bottleneck and data:
        broker, side, nbytes = bottleneck
        phase = (ts(data[0]), max(ts(e) for e in data))
        # The moves loading that broker on that side, as the bound counts them.
        loading = {m.key for m in moves if broker in getattr(CopyBytes.of([m]), "received" if side == "receives"
                                                             else "served")}
        busy = union_seconds(in_flight(entries, loading), *phase)
        figures.update({
            "bottleneck": {"broker": broker, "side": side, "bytes": nbytes},
            "data_phase_s": round(phase[1] - phase[0], 2), "bottleneck_idle_s": round(phase[1] - phase[0] - busy, 2),
            "bottleneck_busy_rate_bytes_per_s": round(nbytes / busy) if busy else None,
            "before_first_data_s": round(phase[0] - started, 2), "after_last_data_s": round(finished - phase[1], 2)})
    return figures


def intake(samples: Sequence[tuple[float, float]], start: float, end: float, rate: float) -> dict[str, Any] | None:
    """A receiving broker's bytes on disk sampled over [start, end] (wall time, bytes): what it gained; how long it
    took to gain 99 % of that (copying, up to the last stragglers) and at what mean rate; the seconds of that span
    whose samples show less than a tenth of the throttle coming in (stalled: no move in flight, or Kafka's quota
    holding the copies back); and how long before `end` the copying was over (the executor noticing and finishing).
    None: fewer than two samples."""
    inside = [(t, b) for t, b in samples if start <= t <= end]
    if len(inside) < 2:
        return None
    (t_first, base), gained = inside[0], inside[-1][1] - inside[0][1]
    if gained <= 0:
        return {"bytes": round(gained), "copy_s": 0.0, "rate_bytes_per_s": None, "stalled_s": 0.0,
                "done_before_end_s": round(end - t_first, 1)}
    done_at = next(t for t, b in inside if b - base >= 0.99 * gained)
    steps = [(t0, t1, b1 - b0) for (t0, b0), (t1, b1) in pairwise(inside) if t1 <= done_at]
    stalled = sum(t1 - t0 for t0, t1, n in steps if n < 0.1 * rate * (t1 - t0))
    copy_s = done_at - t_first
    return {"bytes": round(gained), "copy_s": round(copy_s, 1),
            "rate_bytes_per_s": round(0.99 * gained / copy_s) if copy_s > 0 else None,
            "stalled_s": round(stalled, 1), "done_before_end_s": round(end - done_at, 1),
            "timeline_mib_per_s": timeline(inside, TIMELINE_STEP_S)}


def timeline(samples: Sequence[tuple[float, float]], step_s: float) -> list[float]:
    """The rate (MiB/s) of each step_s from the first sample on, between the last samples at or before its edges."""
    def last(t: float) -> tuple[float, float]:
        return max((s for s in samples if s[0] <= t + 1e-9), default=samples[0])

    edges = [samples[0][0] + k * step_s for k in range(math.ceil((samples[-1][0] - samples[0][0]) / step_s) + 1)]
    rates = []
    for lo, hi in pairwise(last(t) for t in edges):
        rates.append(round((hi[1] - lo[1]) / (hi[0] - lo[0]) / 2**20, 1) if hi[0] > lo[0] else 0.0)
    return rates


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest rank: the smallest value with at least q % of the values at or below it (None: no values)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(math.ceil(q / 100 * len(ordered)), 1) - 1]


def window(samples: Iterable[tuple[float, float]], start: float, end: float) -> dict[str, Any]:
    """The p99 and max (milliseconds) of the samples (wall time, seconds) whose time is in [start, end)."""
    values = [v for t, v in samples if start <= t < end]
    p99, most = percentile(values, 99), max(values, default=None)
    return {"n": len(values), "p99_ms": None if p99 is None else round(1000 * p99, 1),
            "max_ms": None if most is None else round(1000 * most, 1)}


# -- targets and table ------------------------------------------------------------------------------------------------
def targets(results: Mapping[str, Any]) -> list[tuple[str, bool]]:
    """Per order: efficiency <= EFFICIENCY_TARGET, and every estimate from 25 % on within ESTIMATE_TARGET."""
    checks = []
    for order, r in results.get("orders", {}).items():
        if "error" in r:
            checks.append((f"{order} failed ({r['error']})", False))
            continue
        checks.append((f"{order} efficiency {r['efficiency']} <= {EFFICIENCY_TARGET}",
                       r["efficiency"] is not None and r["efficiency"] <= EFFICIENCY_TARGET))
        judged = {p: e["error"] for p, e in r["estimates"].items() if p in ("25", "50", "75")}
        text = ", ".join(f"{p} %: {_pct(e)}" for p, e in judged.items()) or "no estimate recorded"
        checks.append((f"{order} estimate within ±{ESTIMATE_TARGET:.0%} from 25 % on ({text})",
                       bool(judged) and all(e is not None and abs(e) <= ESTIMATE_TARGET for e in judged.values())))
    return checks


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:+.0%}"


def _ms(before: Mapping[str, Any], during: Mapping[str, Any], field: str) -> str:
    return " → ".join("–" if w.get(field) is None else f"{w[field]:,.0f}" for w in (before, during))


def _intake(copied: Mapping[str, Any] | None) -> str:
    if not copied or copied.get("rate_bytes_per_s") is None:
        return "–"
    return f"broker {copied['broker']}: {copied['rate_bytes_per_s'] / 2**20:.1f} ({copied['stalled_s']:.0f})"


def _tuned(t: Mapping[str, Any] | None) -> str:
    if not t:
        return "–"
    if not t["changes"]:
        return "0"
    return f"{t['changes']} ({t['first_s']:.0f}, {t['max_given_bytes_per_s'] / 2**20:.0f})"


def table(results: Mapping[str, Any]) -> str:
    rows = [("order", "data moves / leadership-only", "moved GiB", "bound s (bottleneck)", "wall s", "leadership s",
             "efficiency / without leadership / at Kafka's throttled rate", "estimate error at 0 / 25 / 50 / 75 %",
             "ISR gate s (holds)", "bottleneck idle s of data phase s",
             "receiving broker's intake MiB/s while copying (stalled s)",
             "throttle tuner: changes (first at s, most MiB/s given)", "producer p99 ms before → during",
             "consumer delay p99 ms before → during", "consumer delay max ms before → during")]
    for order, r in results.get("orders", {}).items():
        if "error" in r:
            rows.append((order, f"failed: {r['error']}", *("–" for _ in rows[0][2:])))
            continue
        b, eff = r.get("bottleneck") or {}, (r["efficiency"], r["efficiency_without_leadership"],
                                              r.get("efficiency_at_kafka_rate", "–"))
        est = " / ".join(_pct(r["estimates"].get(p, {}).get("error")) for p in ("0", "25", "50", "75"))
        p, c = r["producer"], r["consumer"]
        while_others = f" (while {', '.join(r['other_benchmarks'])} ran)" if r.get("other_benchmarks") else ""
        rows.append((order + while_others, f"{r['data_moves']} / {r['leadership_moves']}",
                     f"{r['moved_bytes'] / 2**30:.2f}", f"{r['bound_s']:.1f} (broker {b.get('broker')} "
                     f"{b.get('side')})", f"{r['wall_s']:.1f}", f"{r['leadership_s']:.1f}",
                     " / ".join(str(e) for e in eff), est, f"{r['isr_gate_s']:.1f} ({r['isr_gate_holds']})",
                     f"{r.get('bottleneck_idle_s', 0):.1f} of {r.get('data_phase_s', 0):.1f}", _intake(r.get("intake")),
                     _tuned(r.get("throttle_tuned")), _ms(p["before"], p["during"], "p99_ms"),
                     _ms(c["before"], c["during"], "p99_ms"), _ms(c["before"], c["during"], "max_ms")))
    return "\n".join("| " + " | ".join(r) + " |" for r in [rows[0], tuple("---" for _ in rows[0]), *rows[1:]])

