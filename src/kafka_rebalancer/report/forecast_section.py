"""The report's capacity forecast section (issue 55): read from the run's forecast stage (`forecast_view`) and drawn
(`render_forecast`): per pool its disk use now and projected against capacity, as a chart per broker and a line for
the pool, the days until its first broker and its total cross the threshold, and what the forecast does not know."""

from __future__ import annotations

from typing import Any

from kafka_rebalancer.forecast.projection import PROJECTED_DAYS
from kafka_rebalancer.model.schemas import BROKER_FORECAST
from kafka_rebalancer.model.units import human_bytes
from kafka_rebalancer.report.charts import ProjectedUse, figure_html, projected_use_bars
from kafka_rebalancer.report.html_parts import Cell, bytes_cell, esc, not_run, table
from kafka_rebalancer.report.views import BROKERS_SHOWN, ForecastView
from kafka_rebalancer.run_folder import FORECAST, RunFolder, read_json, read_table

NO_POOL = "(no pool)"


def forecast_view(run: RunFolder) -> ForecastView | None:
    folder = run.completed(FORECAST)
    if folder is None:
        return None
    facts = read_json(folder / "forecast.json")
    if not facts.get("made"):
        return ForecastView(facts, {}, {})
    per_broker = read_table(folder, BROKER_FORECAST)
    per_broker["pool"] = per_broker["broker_pool"].fillna(NO_POOL)
    brokers, totals = {}, {}
    for pool, rows in per_broker.groupby("pool", sort=True):
        horizon = f"used_{PROJECTED_DAYS[-1]}d_bytes"
        rows = rows.assign(full=rows[horizon] / rows["disk_capacity_bytes"].where(rows["disk_capacity_bytes"] > 0))
        shown = rows.sort_values(["days_to_threshold", "full", "broker_id"], ascending=[True, False, True],
                                 na_position="last").head(BROKERS_SHOWN).sort_values("broker_id")
        brokers[str(pool)] = [_projected(row) for row in shown.to_dict("records")]
        totals[str(pool)] = len(rows)
    return ForecastView(facts, brokers, totals)


def _projected(row: dict[str, Any]) -> ProjectedUse:
    capacity = float(row["disk_capacity_bytes"]) or float("nan")
    return ProjectedUse(int(row["broker_id"]), {0: row["used_bytes"] / capacity,
                                                **{d: row[f"used_{d}d_bytes"] / capacity for d in PROJECTED_DAYS}})


def render_forecast(view: ForecastView | None, unreadable: str) -> str:
    if view is None:
        return unreadable or not_run("no forecast/ stage in this run (it is written by the plan step)")
    facts = view.facts
    parts = [f'<p class="note">{esc(note)}</p>' for note in facts.get("notes") or []]
    if not facts.get("made"):
        return "".join(parts) or not_run("no forecast")
    horizon, warning = facts["horizon_days"], facts.get("warning_days")
    parts.append(f"<p>Disk use per broker on the planned placement, projected at the rate each topic grew over the "
                 f"last {esc(facts['history'].get('history_days', '?'))} days (one point an hour from Prometheus); "
                 f"the threshold is {facts['threshold']:.0%} of capacity; crossings within {horizon} days"
                 + (f", short under {warning} days" if warning is not None else "") + ".</p>")
    rows: list[list[Cell]] = []
    charts = []
    for i, pool in enumerate(facts["pools"]):
        name = pool["broker_pool"] or NO_POOL
        rows.append(_pool_row(name, pool))
        shown = view.brokers.get(name, [])
        if not shown:
            continue
        caption = (f"{name}: {len(shown)} of {view.brokers_total[name]} brokers, the soonest over the threshold "
                   f"first, then the fullest at +{PROJECTED_DAYS[-1]} d (all in forecast/broker_forecast.parquet)."
                   if len(shown) < view.brokers_total[name] else f"{name}: every broker.")
        fig = projected_use_bars(f"{name}: disk use now and projected", shown, facts["threshold"])
        charts.append(f"<h3>Pool {esc(name)}{' — SHORT' if pool['short'] else ''}</h3>"
                      f'<figure>{figure_html(fig, f"forecast-{i}", 360)}<figcaption>{esc(caption)}</figcaption>'
                      "</figure>")
    headers: list[str | tuple[str, bool]] = [
        "pool", ("used", True), ("growth / day", True), *((f"+{d} d", True) for d in PROJECTED_DAYS),
        "first broker over", "pool total over", ("without a trend", True)]
    return "".join([*parts, table(headers, rows, sortable=True), *charts, _topics(facts["topics"])])


def _pool_row(name: str, pool: dict[str, Any]) -> list[Cell]:
    capacity = float(pool["disk_capacity_bytes"])

    def of(used: float) -> Cell:
        return (f"{human_bytes(used)} ({used / capacity:.0%})" if capacity > 0 else human_bytes(used), used)

    first, total = pool["days_to_first_broker"], pool["days_to_pool_total"]
    return [name + (" (SHORT)" if pool["short"] else ""), of(pool["used_bytes"]),
            bytes_cell(pool["growth_bytes_per_day"]), *(of(pool[f"used_{d}d_bytes"]) for d in PROJECTED_DAYS),
            "-" if first is None else f"broker {pool['first_broker']} in {first:.1f} d",
            "-" if total is None else f"in {total:.1f} d", bytes_cell(pool["unforecast_bytes"])]


def _topics(topics: dict[str, Any]) -> str:
    """The topics without a trend (their bytes counted as not growing) and those forecast from fewer days."""
    parts = [f"<p>{topics['with_trend']} topics with a trend, {topics['without_trend']} without (counted as not "
             f"growing), {topics['noted']} with a note.</p>"]
    listed = [[t["topic"], t["reason"]] for t in topics.get("without_trend_listed") or []] + [
        [t["topic"], t["note"]] for t in topics.get("noted_listed") or []]
    if listed:
        more = topics["without_trend"] + topics["noted"] - len(listed)
        parts.append(table(["topic", "why"], listed))
        if more > 0:
            parts.append(f"<p>… and {more} more (forecast/topic_growth.parquet).</p>")
    return "".join(parts)
