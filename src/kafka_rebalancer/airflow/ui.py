"""The "Kafka rebalancer" page of the Airflow UI: each cluster's latest run and band status at a glance, then every
run of every cluster, newest first, each linking to its report, filtered by cluster, broker pool, state and trigger
(query parameters, set by the page's links); and a link to the run's report on the pipeline's tasks.

A FastAPI app mounted by the API server under /kafka-rebalancer, behind the same authentication as the rest of the
UI (the UI's session cookie or a bearer token; reading DAG runs is the permission it asks for), shown in the UI's
navigation as an external view; while the API server runs, it keeps a fleet's execution pool at fleet.yaml's size
(execution_pool.py). The run folders are found through the configs the DAGs use: every cluster of the
fleet folder (KAFKA_REBALANCER_CONFIG_DIR), else every cluster under the run root of KAFKA_REBALANCER_CONFIG.
"""

from __future__ import annotations

import html
import os
import re
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.core_api.security import requires_access_dag
from airflow.sdk import BaseOperatorLink
from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import FileResponse, HTMLResponse

from kafka_rebalancer.airflow.deployment import cluster_of
from kafka_rebalancer.airflow.execution_pool import keep_execution_pool
from kafka_rebalancer.notify.messages import report_url

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator
    from airflow.sdk.types import TaskInstanceKey

    from kafka_rebalancer.report.overview import RunFilter, RunOverview

RUN_ID = re.compile(r"^[A-Za-z0-9_.:+-]+$")
COLUMNS = ("run", "started", "trigger", "action", "pools", "mode", "status", "moves", "bytes", "out of band",
           "approval", "capacity forecast", "notifications failed")
GLANCE_COLUMNS = ("cluster", "latest run", "started", "trigger", "status", "band status")
EVENT_COLUMNS = ("seen", "event", "broker", "pool", "decision", "why")
REPORTED_TASKS = {"plan", "approve", "execute", "verify", "report"}

# Its lifespan keeps a fleet's execution pool at fleet.yaml's size (execution_pool.py): the API server is where
# Airflow's database may be written.
runs_app = FastAPI(title="Kafka rebalancer runs", docs_url=None, redoc_url=None, openapi_url=None,
                   dependencies=[Depends(requires_access_dag("GET", DagAccessEntity.RUN))],
                   lifespan=keep_execution_pool)


def _cluster_folders() -> tuple[dict[str, Path], list[str]]:
    """Each cluster's folder of runs (`<run_root>/<cluster>`), and why each config of the fleet folder that does
    not load is left out."""
    from kafka_rebalancer.airflow.deployment import CONFIG_DIR_ENV, CONFIG_ENV
    from kafka_rebalancer.config import load_config
    from kafka_rebalancer.fleet import load_fleet

    if os.environ.get(CONFIG_DIR_ENV):
        fleet = load_fleet(Path(os.environ[CONFIG_DIR_ENV]))
        return ({c.name: c.config.run_root / c.name for c in fleet.clusters},
                [str(broken.error) for broken in fleet.broken])
    run_root = load_config(os.environ[CONFIG_ENV]).run_root
    return {folder.name: folder for folder in sorted(run_root.iterdir()) if folder.is_dir()
            and not folder.name.startswith(".")} if run_root.is_dir() else {}, []


@runs_app.get("/", response_class=HTMLResponse)
def runs_page(cluster: str | None = None, pool: str | None = None, state: str | None = None,
              trigger: str | None = None) -> str:
    """Each cluster's latest run and band status, then the runs the query parameters choose (any of cluster,
    broker pool, state and trigger; the filter links set them), a table per cluster."""
    from kafka_rebalancer.errors import RebalancerError
    from kafka_rebalancer.report.overview import RunFilter, list_runs

    try:
        folders, broken = _cluster_folders()
    except (RebalancerError, KeyError) as exc:  # the page says what is wrong instead of a bare 500
        return _page("<p>Cannot read the kafka-rebalancer config (KAFKA_REBALANCER_CONFIG or "
                     f"KAFKA_REBALANCER_CONFIG_DIR): {html.escape(str(exc))}</p>")
    chosen = RunFilter(cluster or None, pool or None, state or None, trigger or None)
    runs_of = {name: list_runs(folder.parent, name) for name, folder in folders.items()}
    notes = [f"<p>Left out, its config does not load: {html.escape(error)}</p>" for error in broken]
    tables = [_cluster_runs(name, folder, runs_of[name], chosen) for name, folder in folders.items()
              if chosen.cluster in (None, name)]
    shown = "".join(tables) or ("<p>No run matches the filter.</p>" if any(runs_of.values()) else
                                "<p>No runs yet.</p>")
    glance = _glance(runs_of) + _filter_links(runs_of, chosen) if any(runs_of.values()) else ""
    body = "".join(notes) + glance + shown
    return _page(body)


def _cluster_runs(name: str, folder: Path, runs: list[RunOverview], chosen: RunFilter) -> str:
    """The cluster's runs the filter keeps and its watcher's events; nothing for a cluster with neither a run nor an
    event yet, or none of whose runs a filter of the runs keeps."""
    shown = [r for r in runs if chosen.keeps(r)]
    if (not runs and not (folder / ".automation").is_dir()) or (not shown and (chosen.pool or chosen.state
                                                                               or chosen.trigger)):
        return ""
    count = "" if len(shown) == len(runs) else f"<p>{len(shown)} of its {len(runs)} runs match the filter.</p>"
    return (f"<h2>cluster {html.escape(name)}</h2>{count}<table><thead><tr>"
            + "".join(f"<th>{c}</th>" for c in COLUMNS) + "</tr></thead><tbody>" + "".join(_run_row(r) for r in shown)
            + "</tbody></table>" + _events_table(folder.parent, name))


def _run_row(r: RunOverview) -> str:
    from kafka_rebalancer.model.units import human_bytes

    band = "-" if r.out_of_band_before is None else f"{r.out_of_band_before} → {r.out_of_band_after}" + (
        "" if r.out_of_band_after_measured else " (planned)")
    cells = [_run_cell(r), *(html.escape(str(v)) for v in (
        r.started_at, r.trigger, r.action, ", ".join(r.pools) or "-", r.mode, r.status,
        "-" if r.replica_moves is None else r.replica_moves,
        "-" if r.moved_bytes is None else human_bytes(r.moved_bytes), band, r.approval, r.capacity))]
    cells.append("<br>".join(html.escape(line) for line in r.notifications_failed) or "-")
    return "<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def _run_cell(r: RunOverview, say_no_report: bool = True) -> str:
    """The run id, linked to its report if it has one."""
    return f'<a href="{_report_link(r.run_id, r.cluster)}">{html.escape(r.run_id)}</a>' if r.report \
        else html.escape(r.run_id) + (" <small>(no report yet)</small>" if say_no_report else "")


def _glance(runs_of: dict[str, list[RunOverview]]) -> str:
    """A row per cluster: its latest run, and its latest measured band status (overview.latest_band_status)."""
    from kafka_rebalancer.report.overview import RunFilter, latest_band_status

    rows = []
    for name, runs in runs_of.items():
        cells = [f'<a href="{_filter_href(RunFilter(cluster=name))}">{html.escape(name)}</a>']
        if runs:
            latest = runs[0]
            cells += [_run_cell(latest), *(html.escape(v) for v in (latest.started_at, latest.trigger,
                                                                      latest.status))]
        else:
            cells += ["no run yet", "-", "-", "-"]
        band = latest_band_status(runs)
        cells.append("-" if band is None else f"{band.out_of_band} out of band <small>({band.measured_by} of "
                                              f"{_run_cell(band.run, say_no_report=False)})</small>")
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return ("<h2>clusters</h2><table><thead><tr>" + "".join(f"<th>{c}</th>" for c in GLANCE_COLUMNS)
            + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _filter_links(runs_of: dict[str, list[RunOverview]], chosen: RunFilter) -> str:
    """For each of cluster, pool, state and trigger: "all" and every value the runs have, the chosen one bold and
    the others links that keep the other choices."""
    runs = [r for rs in runs_of.values() for r in rs]
    values = {"cluster": list(runs_of), "pool": sorted({p for r in runs for p in r.pools}),
              "state": sorted({r.state for r in runs}), "trigger": sorted({r.trigger for r in runs})}
    lines = []
    for what, options in values.items():
        links = []
        for value in (None, *options):
            label = html.escape(value or "all")
            links.append(f"<strong>{label}</strong>" if getattr(chosen, what) == value else
                         f'<a href="{_filter_href(replace(chosen, **{what: value}))}">{label}</a>')
        lines.append(f"{what}: " + " | ".join(links))
    return "<p class='filters'>" + "<br>".join(lines) + "</p>"


def _filter_href(chosen: RunFilter) -> str:
    query = urlencode({k: v for k, v in asdict(chosen).items() if v is not None})
    return html.escape(f"?{query}" if query else "./")


def _report_link(run_id: str, cluster: str) -> str:
    """The report's address; in a fleet it names the cluster (two clusters' scheduled runs may share a run id)."""
    from kafka_rebalancer.airflow.deployment import CONFIG_DIR_ENV

    return html.escape(report_url(run_id, cluster if os.environ.get(CONFIG_DIR_ENV) else None))


def _events_table(run_root: Path, cluster: str, shown: int = 20) -> str:
    """The watcher's latest events on the cluster and what was decided on each (started runs linked)."""
    from kafka_rebalancer.automation.events_log import cluster_events, event_fields

    entries = cluster_events(run_root, cluster)
    if not entries:
        return ""
    rows = []
    for entry in reversed(entries[-shown:]):
        cells = [html.escape(c) for c in event_fields(entry)]
        if entry.get("run_id") and RUN_ID.match(str(entry["run_id"])):
            cells[-1] += f' <a href="{_report_link(entry["run_id"], cluster)}">report</a>'
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return (f"<h3>events of the cluster's watcher (latest {min(shown, len(entries))} of {len(entries)})</h3>"
            "<table><thead><tr>" + "".join(f"<th>{c}</th>" for c in EVENT_COLUMNS) + "</tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>")


@runs_app.get("/report/{run_id}")
def run_report(run_id: str, cluster: str | None = None) -> FileResponse:
    from kafka_rebalancer.config import safe_run_id

    if not RUN_ID.match(run_id):
        raise HTTPException(404, "no such run")
    folders, _ = _cluster_folders()
    for name, folder in folders.items():
        report = folder / safe_run_id(run_id) / "report" / "index.html"  # folder names are safe
        if cluster in (None, name) and report.is_file() and report.resolve().is_relative_to(folder.resolve()):
            return FileResponse(report, media_type="text/html")
    raise HTTPException(404, f"run {run_id} has no report yet (kafka-rebalancer report --config C {run_id})")


def _page(body: str) -> str:
    return ("<!doctype html><html><head><meta charset='utf-8'><title>Kafka rebalancer runs</title><style>"
            "body{font-family:system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse;font-size:13px}"
            "th,td{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left}th{background:#f4f4f4}"
            "</style></head><body><h1>Kafka rebalancer runs</h1>" + body + "</body></html>")


class RunReportLink(BaseOperatorLink):
    """On the pipeline's tasks: the run's report."""

    name = "Run report"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        if not ti_key.dag_id.startswith("kafka_rebalance_") or operator.task_id not in REPORTED_TASKS:
            return ""
        return report_url(ti_key.run_id, cluster_of(ti_key.dag_id))
