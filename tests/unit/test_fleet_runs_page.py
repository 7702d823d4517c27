"""The runs page over a fleet: each cluster's latest run and band status at a glance, and the runs filtered by
cluster, broker pool, state and trigger (query parameters, set by the page's links)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from kafka_rebalancer.airflow.ui import runs_page
from kafka_rebalancer.report.overview import RunFilter, latest_band_status, list_runs
from kafka_rebalancer.run_folder import write_json
from tests.helpers import write_config

SCHEDULED, MANUAL, CLI = "scheduled__2026-11-28T02_00_00_00_00", "manual__2026-11-29T10_00_00", "cli__2026-11-27"


def cluster_config(name: str, runs: Path) -> dict[str, Any]:
    return {"cluster": {"name": name}, "run_root": str(runs), "capacity": {"default": {"disk_bytes": "1TiB"}},
            "pools": {"pool-a": {"brokers": [1, 2, 3]}, "pool-b": {"brokers": [4, 5, 6]}}}


def run_folder(runs: Path, cluster: str, run_id: str, taken_at: str, records: dict[str, Any] | None = None) -> Path:
    """A run folder with its snapshot's manifest and these records (file under the run: its JSON)."""
    run = runs / cluster / run_id
    for name, body in {"snapshot/manifest.json": {"taken_at": taken_at}, **(records or {})}.items():
        (run / name).parent.mkdir(parents=True, exist_ok=True)
        write_json(run / name, body)
    return run


def plan_summary(before: int, after: int) -> dict[str, Any]:
    return {"plan_hash": "h", "totals": {"replica_moves": 4, "moved_bytes": 4096, "out_of_band_before": before,
                                         "out_of_band_after": after}, "pools": {"pool-a": {}, "pool-b": {}}}


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """prod-eu: a verified nightly run (1 out of band after), then a manual run on pool-b planned only (2 out of
    band at its snapshot); prod-us: a CLI run with its snapshot only; prod-ap: no run yet."""
    runs, folder = tmp_path / "runs", tmp_path / "clusters"
    for name in ("prod-eu", "prod-us", "prod-ap"):
        write_config(folder / f"{name}.yaml", cluster_config(name, runs))
    nightly = run_folder(runs, "prod-eu", SCHEDULED, "2026-11-28T02:00:05+00:00", {
        "plan/summary.json": plan_summary(3, 0), "validation/report.json": {"success": True},
        "approval/decision.json": {"state": "auto-approved"},
        "execute/pool-a/result.json": {"completed": 4, "moves": 4, "skipped": []},
        "verify/summary.json": {"out_of_band_before": 3, "out_of_band_after": 1}})
    (nightly / "report").mkdir()
    (nightly / "report" / "index.html").write_text("report")
    run_folder(runs, "prod-eu", MANUAL, "2026-11-29T10:00:00+00:00", {
        "plan/summary.json": plan_summary(2, 0),
        "request.json": {"action": "rebalance-pool", "broker_pool": "pool-b", "scope": {"pools": ["pool-b"]}}})
    run_folder(runs, "prod-us", CLI, "2026-11-27T09:00:00+00:00")
    monkeypatch.delenv("KAFKA_REBALANCER_CONFIG", raising=False)
    monkeypatch.setenv("KAFKA_REBALANCER_CONFIG_DIR", str(folder))
    return runs


def section_names(page: str) -> list[str]:
    return re.findall(r"<h2>cluster ([^<]+)</h2>", page)


def run_ids(page: str) -> set[str]:
    return set(re.findall(r"(?:scheduled|manual|cli)__[0-9T_-]+(?=[<\s?])", page.split("<h2>cluster ", 1)[-1]))


def test_fleet_runs_overview_pools_state_and_band_status(fleet: Path) -> None:
    eu = list_runs(fleet, "prod-eu")
    assert [(r.run_id, r.pools, r.state) for r in eu] == [(MANUAL, ("pool-b",), "planned"),
                                                           (SCHEDULED, ("pool-a", "pool-b"), "verified")]
    band = latest_band_status(eu)
    assert band is not None and (band.out_of_band, band.measured_by, band.run.run_id) == (2, "snapshot", MANUAL)
    band = latest_band_status(eu[1:])
    assert band is not None and (band.out_of_band, band.measured_by) == (1, "verify")  # measured after execution
    assert latest_band_status(list_runs(fleet, "prod-us")) is None  # no plan yet
    assert RunFilter(pool="pool-a").keeps(eu[1]) and not RunFilter(pool="pool-a").keeps(eu[0])
    assert RunFilter(cluster="prod-eu", trigger="airflow").keeps(eu[0])


def test_fleet_runs_page_each_clusters_latest_run_and_band_status_at_a_glance(fleet: Path) -> None:
    page = runs_page()
    glance = page.split("<h2>clusters</h2>", 1)[1].split("</table>", 1)[0]
    rows = {re.search(r'href="\?cluster=([^"]+)"', row).group(1): row  # type: ignore[union-attr]
            for row in glance.split("<tr>")[2:]}
    assert list(rows) == ["prod-ap", "prod-eu", "prod-us"]  # every cluster of the folder, runs or not
    assert "no run yet" in rows["prod-ap"]
    assert MANUAL in rows["prod-eu"] and "<td>planned</td>" in rows["prod-eu"] and "<td>airflow</td>" in rows["prod-eu"]
    assert f"2 out of band <small>(snapshot of {MANUAL}" in rows["prod-eu"]
    assert CLI in rows["prod-us"] and "<td>snapshot only</td><td>-</td></tr>" in rows["prod-us"]  # no band yet
    assert section_names(page) == ["prod-eu", "prod-us"]  # prod-ap: nothing to list
    assert "<th>pools</th>" in page and "<td>pool-a, pool-b</td>" in page


def test_fleet_runs_page_filters_by_cluster_pool_state_and_trigger(fleet: Path) -> None:
    by_cluster = runs_page(cluster="prod-us")
    assert section_names(by_cluster) == ["prod-us"] and run_ids(by_cluster) == {CLI}
    assert "<h2>clusters</h2>" in by_cluster  # the glance stays whole
    by_pool = runs_page(pool="pool-a")
    assert section_names(by_pool) == ["prod-eu"] and run_ids(by_pool) == {SCHEDULED}
    assert "1 of its 2 runs match the filter" in by_pool
    assert run_ids(runs_page(state="verified")) == {SCHEDULED}
    assert run_ids(runs_page(trigger="cli")) == {CLI}
    assert run_ids(runs_page(cluster="prod-eu", trigger="airflow")) == {MANUAL}
    assert "No run matches the filter." in runs_page(cluster="prod-us", state="verified")
    assert run_ids(runs_page(cluster="", pool="", state="", trigger="")) == {SCHEDULED, MANUAL, CLI}  # "": any


def test_fleet_runs_page_filter_links_keep_the_other_choices(fleet: Path) -> None:
    page = runs_page(cluster="prod-eu")
    filters = page.split("<p class='filters'>", 1)[1].split("</p>", 1)[0]
    cluster, pool, state, trigger = filters.split("<br>")
    assert cluster == ('cluster: <a href="./">all</a> | <a href="?cluster=prod-ap">prod-ap</a> | '
                       '<strong>prod-eu</strong> | <a href="?cluster=prod-us">prod-us</a>')
    assert pool == ('pool: <strong>all</strong> | <a href="?cluster=prod-eu&amp;pool=pool-a">pool-a</a> | '
                    '<a href="?cluster=prod-eu&amp;pool=pool-b">pool-b</a>')
    assert '<a href="?cluster=prod-eu&amp;state=snapshot+only">snapshot only</a>' in state
    assert "verified" in state and "planned" in state
    assert trigger == ('trigger: <strong>all</strong> | <a href="?cluster=prod-eu&amp;trigger=airflow">airflow</a> | '
                       '<a href="?cluster=prod-eu&amp;trigger=cli">cli</a> | '
                       '<a href="?cluster=prod-eu&amp;trigger=scheduled">scheduled</a>')


def test_fleet_runs_page_a_filter_value_is_escaped(fleet: Path) -> None:
    page = runs_page(state="<script>x</script>")
    assert "<script>" not in page and "No run matches the filter." in page
