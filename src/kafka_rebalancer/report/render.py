"""Drawing the page's records (views) into report/index.html: `render`, one function per section, pure and cheap
(collect already capped what a large run shows). The page is self-contained: plotly.js, the charts' script and the
page's own style and table script (static/report.css, static/report.js) are inlined, nothing is fetched."""

from __future__ import annotations

from collections.abc import Callable
from importlib.resources import files
from typing import Any

import plotly.offline

from kafka_rebalancer.model.units import human_bytes
from kafka_rebalancer.plan.balance.tables import SPREAD_HEADER, spread_cells_text
from kafka_rebalancer.plan.replication_factor import RESIZE_HEADER, resize_rows
from kafka_rebalancer.report.charts import PLOTLY_CONFIG_JSON, execution_timeline, figure_html, moves_sankey, usage_bars
from kafka_rebalancer.report.forecast_section import render_forecast
from kafka_rebalancer.report.html_parts import (
    Cell,
    amount_cell,
    amount_text,
    bytes_cell,
    esc,
    json_block,
    not_run,
    number_cell,
    plain,
    ratio_cell,
    section,
    share_cell,
    table,
)
from kafka_rebalancer.report.views import MARKERS_SHOWN, SANKEY_BROKERS, SKIPPED_SHOWN, PlanView, RunReportData
from kafka_rebalancer.snapshot.tiered import tiered_lines


def render(data: RunReportData) -> str:
    """The page: one HTML document with plotly.js, the charts, the tables and the table script inlined."""
    h = data.header
    sections = [
        _render_header(data),
        section("snapshot", "Snapshot", _render_snapshot(data)),
        section("usage", "Usage per broker, before and after", _plan_part(data, _render_usage)),
        section("moves", "Moves", _plan_part(data, _render_moves)),
        *([section("log-dirs", "Log directories", _render_log_dirs(data))] if _has_log_dirs(data) else []),
        section("bounds", "Lower bound and moved / LB", _plan_part(data, _render_bounds)),
        *([section("spread", "Topic spread", _render_spread(data))] if _has_spread(data) else []),
        section("forecast", "Capacity forecast", render_forecast(data.forecast, _unreadable(data, "forecast"))),
        section("notes", "Planner notes", _plan_part(data, _render_notes)),
        section("skipped", "Skipped and hot partitions", _plan_part(data, _render_skipped)),
        section("validation", "Validation", _render_validation(data)),
        section("execution", "Execution", _render_execution(data)),
        section("verification", "Verification", _render_verification(data)),
    ]
    nav = " · ".join(f'<a href="#section-{name}">{title}</a>' for name, title in (
        ("snapshot", "snapshot"), ("usage", "usage"), ("moves", "moves"),
        *([("log-dirs", "log directories")] if _has_log_dirs(data) else []), ("bounds", "lower bound"),
        *([("spread", "topic spread")] if _has_spread(data) else []),
        ("forecast", "capacity forecast"), ("notes", "planner notes"), ("skipped", "skipped"),
        ("validation", "validation"), ("execution", "execution"),
        ("verification", "verification")))
    title = esc(f"Run {h.run_id} ({h.cluster})")
    # report.js, the table script: click a header to sort (again to reverse); type in a filter box to keep the rows
    # holding every word typed.
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">', f"<title>{title}</title>",
        f"<style>{_static('report.css')}</style>", f"<script>{plotly.offline.get_plotlyjs()}</script>", "</head>",
        "<body>", f"<nav>{nav}</nav>", *sections, f"<script>{_static('report.js')}</script>",
        f"<script>{_static('charts.js').replace('PLOTLY_CONFIG', PLOTLY_CONFIG_JSON)}</script>", "</body>",
        "</html>", ""])


def _static(name: str) -> str:
    """A file of the package's static/ folder, read when the page is drawn; inlined after a line break, as the page
    always had it."""
    return "\n" + (files("kafka_rebalancer.report") / "static" / name).read_text(encoding="utf-8")


def _render_header(data: RunReportData) -> str:
    h = data.header
    rows = [("cluster", h.cluster), ("run id", h.run_id), ("trigger", h.trigger), ("action", h.action),
            ("requested by", h.requested_by), ("reason", h.reason), ("mode", h.mode), ("status", h.status),
            ("approval", h.approval + (f" at {h.decided_at}" if h.decided_at else "")),
            ("why", "; ".join(h.decision_why) or None), ("plan hash", h.plan_hash),
            ("snapshot taken at", h.snapshot_taken_at)]
    facts = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows if v)
    return (f'<header id="summary"><h1>Run {esc(h.run_id)}</h1><table class="facts">{facts}</table>'
            f"{_unreadable(data, 'header')}</header>")


def _render_snapshot(data: RunReportData) -> str:
    snapshot = data.snapshot
    if snapshot is None:
        return _unreadable(data, "snapshot") or not_run("no snapshot/ stage in this run")
    rows = [("taken at", snapshot.taken_at), ("content hash", snapshot.content_hash),
            ("capture", f"{snapshot.capture_seconds:.1f} s" if snapshot.capture_seconds is not None else None),
            *((f"{name} rows", f"{count:,}") for name, count in snapshot.rows.items())]
    facts = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows if v)
    warnings = "".join(f"<li>{esc(w)}</li>" for w in snapshot.warnings)
    return (f'<table class="facts">{facts}</table>' + _render_tiered(snapshot.tiered, snapshot.last_tiered_fetch)
            + (f"<p>Warnings:</p><ul>{warnings}</ul>" if warnings else ""))


def _render_tiered(tiered: list[dict[str, Any]], last_tiered_fetch: bool) -> str:
    """The tiered topics: local and remote bytes, and what moving one replica of each partition copies."""
    if not tiered:
        return ""
    head = tiered_lines(tiered, last_tiered_fetch)[0]
    rows: list[list[Cell]] = [[t["topic"], number_cell(t["partitions"]), bytes_cell(t["local_bytes"]),
                               bytes_cell(t["remote_bytes"]), bytes_cell(t["move_cost_bytes"])] for t in tiered]
    return f"<p>{esc(head)}</p>" + table(["topic", ("partitions", True), ("local", True), ("remote", True),
                                          ("a move of each partition copies", True)], rows, "tiered", sortable=True)


def _plan_part(data: RunReportData, part: Callable[[PlanView], str]) -> str:
    if data.plan is None:
        return _unreadable(data, "plan") or not_run("no plan/ stage in this run")
    return part(data.plan)


def _broker_list(broker_ids: list[int], shown: int = 10) -> str:
    listed = ", ".join(str(b) for b in broker_ids[:shown])
    return listed if len(broker_ids) <= shown else f"{listed} and {len(broker_ids) - shown} more"


def _render_usage(plan: PlanView) -> str:
    blocks = []
    for i, pool in enumerate(plan.pools):
        blocks.append(f"<h3>Pool {esc(pool.broker_pool)}</h3>")
        if not pool.resources:
            blocks.append("<p>plan/summary.json has no per-broker usage for this pool.</p>")
        for j, r in enumerate(pool.resources):
            # A balanced band's note says it was widened (few items per broker).
            note = (f" (not balanced: {r.note or 'the band is not enforced'})" if not r.balanced
                    else f" ({r.note})" if r.note else "")
            caption = (f"{r.resource}: {len(r.out_of_band_before)} broker(s) out of band before, "
                       f"{len(r.out_of_band_after)} after{note}.")
            if r.fixed_outside_target_band:
                caption += (f" {len(r.fixed_outside_target_band)} of those out of band before end outside the "
                            f"target band (brokers {_broker_list(r.fixed_outside_target_band)}).")
            if r.taken_outside_target_band:
                caption += (f" {len(r.taken_outside_target_band)} broker(s) inside the band before are taken out of "
                            f"the target band, or further from it (brokers {_broker_list(r.taken_outside_target_band)};"
                            " the planner notes give the reason).")
            if r.brokers_total > len(r.brokers):
                hidden_out = len(set(r.out_of_band_before) | set(r.out_of_band_after)) - sum(
                    1 for b in r.brokers if b.out_before or b.out_after)
                caption += (f" Showing {len(r.brokers)} of {r.brokers_total} brokers: the out-of-band ones first, "
                            f"then the most loaded ({hidden_out} out-of-band broker(s) not shown); all of them in "
                            "plan/summary.json.")
            fig = usage_bars(f"{pool.broker_pool}: {r.resource}", r.brokers, r.lower, r.upper, r.is_count,
                             r.before_band)
            blocks.append(f'<figure>{figure_html(fig, f"usage-{i}-{j}", 380)}'
                          f"<figcaption>{esc(caption)}</figcaption></figure>")
    if not blocks:
        return "<p>The plan covers no pool.</p>"
    legend = ("Per broker, usage before the plan (light bars) and as planned after it (dark bars); the plan's "
              "band is the dashed green lines. A broker before the plan is judged against the band of the current "
              "placement, drawn as dotted grey lines where the replicas that must move (off a dead or drained "
              "broker, or home to their pool) shift the mean. Orange bars, labelled “out”, are brokers outside "
              "their band.")
    return f"<p>{esc(legend)}</p>" + "".join(blocks)


def _render_moves(plan: PlanView) -> str:
    only = "" if plan.leadership_only_changes is None else f", {plan.leadership_only_changes:,} of them leadership-only"
    summary = (f"{plan.moves_total:,} partition(s) change: {plan.replica_moves:,} replica move(s), "
               f"{plan.preferred_leader_changes:,} with a new preferred leader{only}; "
               f"{human_bytes(plan.bytes_total)} to copy (the re-check of plan.json against the snapshot; the moves "
               f"below are read from {plan.moves_source}).")
    parts = [f'<p id="moves-summary" data-moves="{plan.moves_total}">{esc(summary)}</p>']
    if plan.replication_factor:  # a replication factor change: each topic's before -> after and bytes
        parts.append(table(RESIZE_HEADER, [list(row) for row in resize_rows(plan.replication_factor)]))
    for i, pool in enumerate(plan.pools):
        if not pool.flows:
            continue
        caption = f"Pool {pool.broker_pool}: replicas copied from broker to broker, by bytes."
        if pool.senders_grouped or pool.receivers_grouped:
            caption += (f" The {SANKEY_BROKERS} brokers that send and the {SANKEY_BROKERS} that receive the most "
                        f"are shown one by one; the other {pool.senders_grouped} sender(s) and "
                        f"{pool.receivers_grouped} receiver(s) are summed as “others” ({pool.flows_total:,} "
                        "broker-to-broker flows in all).")
        fig = moves_sankey(f"{pool.broker_pool}: source broker → target broker", pool.flows)
        height = max(300, 22 * max(len({f.source for f in pool.flows}), len({f.target for f in pool.flows})))
        parts.append(f'<figure>{figure_html(fig, f"sankey-{i}", height)}<figcaption>{esc(caption)}</figcaption>'
                     "</figure>")
    if not plan.moves:
        parts.append("<p>The plan moves nothing.</p>")
        return "".join(parts)
    if plan.moves_total > len(plan.moves):
        parts.append(f'<p class="truncated">showing the {len(plan.moves):,} largest of {plan.moves_total:,} moves; '
                     "all of them in plan/plan.json</p>")
    rows: list[list[Cell]] = [
        [m.broker_pool, m.topic, (str(m.partition), m.partition), f"{list(m.old)} → {list(m.new)}",
         (human_bytes(m.bytes_to_copy), m.bytes_to_copy), m.leadership_change] for m in plan.moves]
    parts.append('<p><label>Filter <input id="moves-filter" type="search" data-filters="moves" '
                 'placeholder="topic, broker, pool…"></label> <span id="moves-count"></span></p>')
    parts.append(table(["pool", "topic", ("partition", True), "replicas (old → new)", ("bytes to copy", True),
                         "leader"], rows, table_id="moves", sortable=True))
    return "".join(parts)


def _has_log_dirs(data: RunReportData) -> bool:
    """The section is there when the plan moves replicas between log directories (or that part could not be
    read): a run without such moves renders as it did before JBOD."""
    return data.log_dirs is not None or "log_dirs" in data.unreadable


def _render_log_dirs(data: RunReportData) -> str:
    view = data.log_dirs
    if view is None:
        return _unreadable(data, "log_dirs")
    why = f" ({view.why})" if view.why else ""
    removed = f" Removed: {', '.join(view.removed)}." if view.removed else ""
    headline = (f"{view.moves_total:,} replica(s) move between the log directories of their broker, "
                f"{human_bytes(view.bytes_total)}{why}.{removed}")
    if view.arrivals_total:
        headline += (f" {view.arrivals_total:,} replica(s) arriving from other brokers go into the directory the "
                     f"plan names, {human_bytes(view.arrival_bytes_total)}.")
    parts = [f"<p>{esc(headline)}</p>"]
    if view.directories:
        intro = ("Per directory of each broker with such moves or arrivals: capacity (and where it came from), use "
                 "in the snapshot and after the plan (less the bytes moving out, plus the bytes moving in and "
                 "arriving; replicas leaving for other brokers not counted).")
        if not view.snapshot_has_log_dirs:
            intro += " The snapshot has no log directories (taken by an older version): use before is unknown."
        parts.append(f"<p>{esc(intro)}</p>")
        if view.brokers_total > view.brokers_shown:
            parts.append(f'<p class="truncated">showing the {view.brokers_shown:,} brokers moving the most bytes of '
                         f"{view.brokers_total:,}; all moves in plan/log_dir_moves.parquet</p>")
        parts.append(table(
            [("broker", True), "log dir", ("capacity", True), "capacity from", ("used before", True),
             ("used after", True), ("usage before", True), ("usage after", True), ("moves out", True),
             ("moves in", True), ("arriving", True), "state"],
            [[(str(u.broker_id), u.broker_id), u.log_dir, bytes_cell(u.capacity_bytes), u.capacity_source or "-",
              bytes_cell(u.used_before), bytes_cell(u.used_after), share_cell(u.usage(u.used_before)),
              share_cell(u.usage(u.used_after)), number_cell(u.moves_out), number_cell(u.moves_in),
              number_cell(u.arrivals), u.state or "-"] for u in view.directories], sortable=True))
    if view.moves:
        if view.moves_total > len(view.moves):
            parts.append(f'<p class="truncated">showing the {len(view.moves):,} largest of {view.moves_total:,} '
                         "moves; all of them in plan/log_dir_moves.parquet</p>")
        parts.append(table(
            ["pool", "partition", ("broker", True), "from", "to", ("bytes", True)],
            [[m.broker_pool, f"{m.topic}-{m.partition}", (str(m.broker_id), m.broker_id), m.source_dir,
              m.target_dir, bytes_cell(m.size_bytes)] for m in view.moves], sortable=True))
    if view.stranded_total:
        parts.append(f'<h3 class="bad">Stranded: {view.stranded_total:,} replica(s) stay in a removed directory</h3>'
                     + "<ul>" + "".join(f"<li>{esc(s)}</li>" for s in view.stranded) + "</ul>")
        if view.stranded_total > len(view.stranded):
            parts.append(f'<p class="truncated">showing {len(view.stranded):,} of {view.stranded_total:,}; all of '
                         "them in plan/summary.json (log_dir_moves.stranded)</p>")
    return "".join(parts)


def _render_bounds(plan: PlanView) -> str:
    pool_rows: list[list[Cell]] = []
    resource_rows: list[list[Cell]] = []
    for pool in plan.pools:
        if pool.partitions_changed is None:  # a summary without per-pool figures (a plan written by hand)
            continue
        pool_rows.append([pool.broker_pool, number_cell(pool.partitions_changed), number_cell(pool.replica_moves),
                          bytes_cell(pool.moved_bytes), bytes_cell(pool.forced_bytes),
                          _forced_reasons(pool.forced_bytes_by_reason), bytes_cell(pool.forced_lower_bound_bytes),
                          ratio_cell(pool.forced_moved_over_lb), bytes_cell(pool.balance_bytes),
                          bytes_cell(pool.lower_bound_bytes), pool.lower_bound_edges or "-",
                          ratio_cell(pool.moved_over_lb)])
        for r in pool.resources:
            resource_rows.append([
                pool.broker_pool, r.resource, amount_cell(r.resource, r.forced_moved),
                _forced_reasons(r.forced_moved_by_reason, amount_text(r.resource)),
                amount_cell(r.resource, r.forced_lower_bound), ratio_cell(r.forced_moved_over_lb),
                amount_cell(r.resource, r.lower_bound), amount_cell(r.resource, r.moved),
                ratio_cell(r.moved_over_lb),
                (f"{len(r.out_of_band_before)} → {len(r.out_of_band_after)}", len(r.out_of_band_after)),
                number_cell(r.infeasible)])
    if not pool_rows:
        return "<p>plan/summary.json has no per-pool figures.</p>"
    intro = ("Recomputed from plan.json and the snapshot. Forced moves take replicas off dead or draining brokers "
             "and bring replicas home to their topic's pool; their LB is the bytes that must leave, so their "
             "moved / LB is 1 when all of them are placed. Balance moves are the rest; their LB is the least any "
             "plan must move to bring every broker into its band: per pool, one LP over every band at once (each "
             "broker meets all its bands with the same replicas, what one broker gives another receives, forced "
             "replicas land where they must), or where no replica must move the larger of that and each broker's "
             "largest minimum added up; against the edges the plan promises (the target band for every broker it "
             "fixes, the others no further from theirs) where it keeps every promise in the pool, else the band's "
             "(the column \"against\"); per resource, the larger of the excess above and the room below the current "
             "placement's band. Moved / LB near 1 means the plan moves little more than it must (below 1 for a "
             "resource when forced replicas filled brokers below the band).")
    return (f"<p>{esc(intro)}</p>"
            + table(["pool", ("partitions changed", True), ("replica moves", True), ("moved", True),
                      ("forced", True), "forced: why", ("must leave", True), ("forced moved / LB", True),
                      ("balance", True), ("balance LB", True), "against", ("balance moved / LB", True)], pool_rows,
                     sortable=True)
            + "<h3>Per resource</h3>"
            + table(["pool", "resource", ("forced moved", True), "forced: why", ("must leave", True),
                      ("forced moved / LB", True), ("balance LB", True), ("balance moved", True),
                      ("balance moved / LB", True), ("out of band before → after", True), ("infeasible", True)],
                     resource_rows, sortable=True))


def _has_spread(data: RunReportData) -> bool:
    """The section is there when the topic spread is on (the plan's summary or verify's has its figures)."""
    return bool((data.plan and any(p.topic_spread for p in data.plan.pools))
                or (data.verification and data.verification.topic_spread))


def _render_spread(data: RunReportData) -> str:
    """Per pool and kind: the (topic, broker) over the topic's target before and after, over their cap, the worst;
    for the plan (re-checked from plan.json) and, once verified, for the cluster after execution."""
    def figures_table(figures: dict[str, dict[str, Any]]) -> str:
        return table(SPREAD_HEADER, [[pool, kind, *spread_cells_text(f)] for pool, kinds in sorted(figures.items())
                                      for kind, f in kinds.items()], sortable=True)

    parts = ["<p>Per topic and broker, the replicas and the leaders held against the topic's target, ⌈share⌉ + "
             "margin (share: the topic's replicas, or leaders, ÷ the pool's brokers taking replicas). No broker may "
             "end above its cap, the larger of the target and what it held before the plan.</p>"]
    if data.plan is not None:
        parts += ["<h3>The plan</h3>", figures_table({p.broker_pool: p.topic_spread for p in data.plan.pools})]
    verified = data.verification.topic_spread if data.verification is not None else None
    if verified:
        parts += ["<h3>After execution</h3>", f'<p class="{"ok" if verified.get("kept") else "bad"}">' + (
            "No broker holds more of a topic than its cap through the plan." if verified.get("kept") else
            f"{verified.get('over_cap_by_plan')} (topic, broker) above their cap through the plan: the run is not "
            "verified (verify/topic_spread.csv).") + "</p>", figures_table(verified.get("pools") or {})]
    return "".join(parts)


FORCED_REASON_WORDS = {"dead_broker": "dead broker", "draining_broker": "draining broker",
                       "pool_isolation": "pool isolation"}


def _forced_reasons(by_reason: dict[str, Any], amount: Callable[[Any], str] = human_bytes) -> Cell:
    """What forced moves carried, by why they moved, largest first (`amount` writes it in its unit)."""
    parts = sorted(((v, k) for k, v in by_reason.items() if v), reverse=True)
    return "; ".join(f"{FORCED_REASON_WORDS.get(k, k)} {amount(v)}" for v, k in parts) or "-"


def _render_notes(plan: PlanView) -> str:
    """Per pool, the proofs that no plan brings some brokers into their band, and the planner's notes: why it left
    a broker outside its band or target band, or a replica where it is."""
    parts = []
    for pool in plan.pools:
        proofs = [(r.resource, proof) for r in pool.resources for proof in r.infeasibility_proofs]
        if not proofs and not pool.notes:
            continue
        parts.append(f"<h3>Pool {esc(pool.broker_pool)}</h3>")
        if proofs:
            parts.append("<p>No plan can bring all of these brokers into the band: at least “count” of them stay "
                         "outside it, whatever moves.</p>")
            parts.append(table(["resource", "brokers", ("count", True), "proof"],
                                [[resource, _broker_list([int(b) for b in proof.get("brokers") or []]),
                                  number_cell(proof.get("count")), str(proof.get("proof"))]
                                 for resource, proof in proofs], sortable=True))
        if pool.notes:
            if pool.notes_total > len(pool.notes):
                parts.append(f'<p class="truncated">showing {len(pool.notes):,} of {pool.notes_total:,} notes; all '
                             "of them in plan/summary.json and plan/planner_notes.parquet</p>")
            parts.append(table(["resource", ("broker", True), "note"],
                                [[n.resource, ("-", -1.0) if n.broker_id is None else (str(n.broker_id), n.broker_id),
                                  n.note] for n in pool.notes], sortable=True))
    if not parts:
        return ("<p>The planner left no notes: it names the reason for every broker it leaves outside its band or "
                "target band, and for every replica it could not move, and there are none.</p>")
    return "".join(parts)


def _render_skipped(plan: PlanView) -> str:
    parts = []
    if plan.skipped_by_reason:
        parts.append(f"<p>{plan.skipped_total:,} partition(s) skipped by the planner.</p>")
        parts.append(table(["reason", ("partitions", True)],
                            [[reason, (f"{n:,}", n)] for reason, n in sorted(plan.skipped_by_reason.items())],
                            sortable=True))
        if plan.skipped_total > len(plan.skipped):
            parts.append(f'<p class="truncated">showing {len(plan.skipped):,} of {plan.skipped_total:,} skipped '
                         "partitions; all of them in plan/skipped.parquet</p>")
        parts.append(table(["pool", "topic", ("partition", True), "reason"],
                            [[str(s.get("broker_pool") or "-"), str(s.get("topic")),
                              (str(s.get("partition")), float(s.get("partition") or 0)), str(s.get("reason"))]
                             for s in plan.skipped], sortable=True))
    else:
        parts.append("<p>No partition skipped.</p>")
    if plan.hot_partitions:
        parts.append(f"<h3>Hot partitions ({plan.hot_total:,})</h3>")
        for advice in dict.fromkeys(str(h.get("advice") or "") for h in plan.hot_partitions):
            if advice:
                parts.append(f'<p class="advice">{esc(advice)}</p>')
        parts.append(table(["pool", "topic", ("partition", True), "resource", ("load", True), ("band width", True)],
                            [[str(h.get("broker_pool")), str(h.get("topic")),
                              (str(h.get("partition")), float(h.get("partition") or 0)), str(h.get("resource")),
                              amount_cell(str(h.get("resource")), h.get("load")),
                              amount_cell(str(h.get("resource")), h.get("band_width"))]
                             for h in plan.hot_partitions], sortable=True))
        if plan.hot_total > len(plan.hot_partitions):
            parts.append(f'<p class="truncated">showing {len(plan.hot_partitions):,} of {plan.hot_total:,}; all of '
                         "them in plan/hot_partitions.parquet</p>")
    else:
        parts.append("<p>No hot partition.</p>")
    return "".join(parts)


def _render_validation(data: RunReportData) -> str:
    v = data.validation
    if v is None:
        return _unreadable(data, "validation") or not_run("no validation/ stage in this run")
    verdict = "passed" if v.success else f"FAILED ({len(v.failures)} expectation(s))"
    checked = ", ".join(f"{n:,} {what}" for n, what in ((v.partitions_checked, "partitions"),
                                                         (v.broker_resource_pairs_checked, "broker-resource pairs"))
                        if n is not None)
    parts = [f'<p class="{"ok" if v.success else "bad"}">Validation {verdict}'
             + (f"; {v.expectations} expectations" if v.expectations is not None else "")
             + (f" checked on {checked}" if checked else "") + ".</p>"]
    if v.results:
        parts.append(table(["table", "expectation", "result", ("unexpected", True), ("rows", True)], [
            [r.table, r.description, "pass" if r.success else "FAIL", number_cell(r.unexpected_count),
             number_cell(r.element_count)] for r in v.results], sortable=True))
        if v.expectations is not None and len(v.results) < v.expectations:
            parts.append(f"<p>{v.expectations - len(v.results)} expectation(s) had no rows to check (an empty table "
                         "passes).</p>")
    for f in v.failures:
        parts.append(f"<h3>Failed: {esc(f.description)}</h3><p>{esc(f.expectation)} on {esc(f.table)}: "
                     f"{esc(f.unexpected_count)} row(s) broke it.</p>")
        if f.rows:
            columns = list(dict.fromkeys(k for row in f.rows for k in row))
            parts.append(table(columns, [[plain(row.get(c)) for c in columns] for row in f.rows]))
        if f.rows_total > len(f.rows):
            parts.append(f'<p class="truncated">showing {len(f.rows)} of {f.rows_total:,} rows; all of them in '
                         "validation/report.json</p>")
    return "".join(parts)


def _render_execution(data: RunReportData) -> str:
    executions = data.executions
    if executions is None:
        return _unreadable(data, "execution") or not_run(
            "no execute/ stage in this run" + (f" (approval: {data.header.approval})"
                                                if data.header.approval not in ("-", "?") else ""))
    if not executions:
        return "<p>The execute/ stage holds no pool.</p>"
    parts = []
    for i, pool in enumerate(executions):
        parts.append(f'<h3>Pool {esc(pool.broker_pool)}: <span class="state">{esc(pool.state)}</span></h3>')
        planned = None if pool.moves_planned is None else f"{pool.moves_planned:,}"
        facts = [("moves planned", planned), ("moves done (log)", f"{pool.moves_done:,}"),
                 ("bytes done (log)", human_bytes(pool.bytes_done)), ("log entries", f"{pool.log_entries:,}")]
        parts.append('<table class="facts">' + "".join(
            f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in facts if v is not None) + "</table>")
        if pool.result is not None:
            parts.append(_render_result(pool.result))
        if pool.cancel is not None:
            parts.append(_render_cancel(pool.cancel))
        if pool.dry_run is not None:
            parts.append("<p>Dry run (dry_run.json), what execute would do with each move:</p>" + table(
                ["verdict", ("moves", True)], [[k, (f"{n:,}", n)] for k, n in sorted(pool.dry_run.items())]))
        if len(pool.progress) > 1 or pool.markers:
            fig = execution_timeline(f"{pool.broker_pool}: progress", pool.progress, pool.markers)
            caption = "Moves and bytes done over time; markers: the log's throttle, skip, cancel and other events."
            if pool.markers_total > len(pool.markers):
                caption += (f" Showing {len(pool.markers):,} of {pool.markers_total:,} events (at most "
                            f"{MARKERS_SHOWN} of a kind); all of them in execute/{pool.broker_pool}/"
                            "execution_log.jsonl.")
            parts.append(f'<figure>{figure_html(fig, f"timeline-{i}", 380)}<figcaption>{esc(caption)}'
                         "</figcaption></figure>")
    return "".join(parts)


def _render_result(result: dict[str, Any]) -> str:
    skipped = list(result.get("skipped") or [])
    failed_elections = dict(result.get("leader_elections_failed") or {})
    rate = result.get("throttle_bytes_per_s")
    parts = [f"<p>result.json: {esc(result.get('completed'))} of {esc(result.get('moves'))} moves complete "
             f"({esc(result.get('completed_this_attempt'))} in the last attempt), {len(skipped)} skipped, "
             f"{len(failed_elections)} failed leader election(s); throttle "
             f"{esc(human_bytes(rate) + '/s' if rate else 'none')}.</p>"]
    if skipped:
        parts.append(table(["topic", ("partition", True), "reason"], [
            [str(x.get("topic")), (str(x.get("partition")), float(x.get("partition") or 0)), str(x.get("reason"))]
            for x in skipped[:SKIPPED_SHOWN]], sortable=True))
    if failed_elections:
        parts.append(table(["partition", "leader election error"], [[k, str(v)] for k, v in failed_elections.items()]))
    return "".join(parts) + json_block("result.json", result)


def _render_cancel(cancel: dict[str, Any]) -> str:
    refused = dict(cancel.get("refused") or {})
    in_progress = list(cancel.get("still_in_progress") or [])
    line = (f"cancel.json: {len(cancel.get('cancelled') or [])} reassignment(s) cancelled, {len(refused)} refused, "
            f"{len(in_progress)} still in progress; throttles "
            f"{'cleared' if cancel.get('throttles_cleared') else 'NOT all cleared'}.")
    css = ' class="bad"' if refused or in_progress else ""
    return f"<p{css}>{esc(line)}</p>" + json_block("cancel.json", cancel)


def _render_verification(data: RunReportData) -> str:
    v = data.verification
    if v is None:
        return _unreadable(data, "verification") or not_run("no verify/ stage in this run")
    at_plan = f"All {v.partitions_planned} planned partitions are" if not v.not_at_plan_total else \
        f"{v.not_at_plan_total:,} of {v.partitions_planned} planned partitions are NOT"
    parts = [f'<p class="{"bad" if v.not_at_plan_total else "ok"}">{at_plan} at their planned replicas; brokers out '
             f"of band: {v.out_of_band_before} before → {v.out_of_band_after} after (measured).</p>"]
    if v.promises:
        broken = [p for p in v.promises if p.get("verdict") in ("broken", "cannot")]
        parts.append(f'<p class="{"bad" if broken else "ok"}">'
                     + ("Promises of the action NOT kept: the run is not verified (all in verify/promises.csv)."
                        if broken else "Every promise of the action kept.") + "</p>")
        parts.append(table(["promise", ("broker", True), "verdict", "detail"], [
            [str(p.get("promise")), (str(p.get("broker_id") if p.get("broker_id") is not None else "-"),
                                     float(p.get("broker_id") or 0)), str(p.get("verdict")), str(p.get("detail"))]
            for p in v.promises], sortable=True))
    rows: list[list[Cell]] = []
    for pool, resources in sorted(v.pools.items()):
        for resource, sides in sorted(resources.items()):
            before, after = sides.get("out_of_band_before") or [], sides.get("out_of_band_after") or []
            rows.append([pool, resource, (", ".join(map(str, before)) or "-", len(before)),
                         (", ".join(map(str, after)) or "-", len(after))])
    if rows:
        parts.append(table(["pool", "resource", ("out of band before", True), ("out of band after", True)], rows,
                            sortable=True))
    if v.not_at_plan:
        parts.append(table(["topic", ("partition", True), "planned", "current"], [
            [str(p.get("topic")), (str(p.get("partition")), float(p.get("partition") or 0)), str(p.get("planned")),
             str(p.get("current"))] for p in v.not_at_plan], sortable=True))
        if v.not_at_plan_total > len(v.not_at_plan):
            parts.append(f'<p class="truncated">showing {len(v.not_at_plan)} of {v.not_at_plan_total:,}; all of them '
                         "in verify/summary.json</p>")
    if v.report_text is not None:
        more = " (cut short; the whole table is in verify/report.txt)" if v.report_text_truncated else ""
        parts.append(f"<details><summary>verify/report.txt{more}</summary><pre>{esc(v.report_text)}</pre>"
                     "</details>")
    return "".join(parts)


def _unreadable(data: RunReportData, name: str) -> str:
    problem = data.unreadable.get(name)
    return f'<p class="unreadable">could not read this part of the run: {esc(problem)}</p>' if problem else ""
