"""One line per run, read from its folder alone (runs made by the CLI and by Airflow look the same): what
triggered it, what it was asked to do, how far it got, what it moves, and what it left out of band. The CLI's
`runs` and the Airflow runs page show these.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kafka_rebalancer.errors import RebalancerError
from kafka_rebalancer.execute.log import ExecutionLog
from kafka_rebalancer.execute.progress import progress_text
from kafka_rebalancer.forecast.summary import capacity_text
from kafka_rebalancer.model.run_actions import Action
from kafka_rebalancer.run_folder import (
    APPROVAL,
    EXECUTE,
    FORECAST,
    NOTIFICATIONS_RECORD,
    PLAN,
    REPORT,
    SNAPSHOT,
    VALIDATION,
    VERIFY,
    RunFolder,
    read_json,
)

TRIGGERS = {"scheduled": "scheduled", "manual": "airflow", "cli": "cli", "asset_triggered": "asset",
            "backfill": "backfill", "automatic": "automatic"}  # automatic: started by the cluster's events


@dataclass(frozen=True)
class RunOverview:
    run_id: str
    cluster: str
    started_at: str  # ISO time of the snapshot, else of the folder
    trigger: str  # scheduled | airflow | cli | ...
    action: str  # nightly, or the manual operation
    mode: str  # dry-run | execute | - (not decided yet)
    status: str  # how far the run got
    replica_moves: int | None
    preferred_leader_changes: int | None
    moved_bytes: int | None
    out_of_band_before: int | None
    out_of_band_after: int | None  # measured by verify, else as planned
    out_of_band_after_measured: bool
    approval: str  # approved by X | auto-approved | rejected by X | timed out | dry run | -
    plan_hash: str | None
    report: str | None  # path of report/index.html when it exists
    notifications_failed: list[str] = field(default_factory=list)  # channel_failures: none when all were sent
    pools: tuple[str, ...] = ()  # the broker pools it planned (planned_pools); none known before its plan
    capacity: str = "-"  # the capacity forecast in a few words (forecast.summary.capacity_text)

    @property
    def state(self) -> str:
        """The status without its details ("executing or failed (pool-a: ...)": "executing or failed"), what the
        runs page filters by."""
        return self.status.split(" (", 1)[0]


def run_overview(run: RunFolder) -> RunOverview:
    summary = _json(run, f"{PLAN}/summary.json")
    totals = (summary or {}).get("totals", {})
    verified = _json(run, f"{VERIFY}/summary.json")
    decision = _json(run, f"{APPROVAL}/decision.json")
    request = _json(run, "request.json")
    manifest = _json(run, f"{SNAPSHOT}/manifest.json")
    report = run.stage_path(REPORT) / "index.html"
    return RunOverview(
        run_id=run.path.name, cluster=run.path.parent.name,
        started_at=(manifest or {}).get("taken_at") or _mtime(run.path),
        trigger=TRIGGERS.get(run.path.name.split("__", 1)[0], "other"),
        action=(request or {}).get("action") or Action.NIGHTLY.value,
        mode=_mode(run, decision), status=run_status(run),
        replica_moves=totals.get("replica_moves"), preferred_leader_changes=totals.get("preferred_leader_changes"),
        moved_bytes=totals.get("moved_bytes"), out_of_band_before=totals.get("out_of_band_before"),
        out_of_band_after=(verified or totals).get("out_of_band_after"),
        out_of_band_after_measured=verified is not None,
        approval=_approval(decision), plan_hash=(summary or {}).get("plan_hash"),
        report=str(report) if report.exists() else None, notifications_failed=channel_failures(run.path),
        pools=planned_pools(request, summary), capacity=capacity_text(_json(run, f"{FORECAST}/forecast.json")))


def planned_pools(request: dict[str, Any] | None, summary: dict[str, Any] | None) -> tuple[str, ...]:
    """The broker pools a run planned: its manual request's scope when that names pools, else every pool of its
    plan's summary (a nightly run plans them all)."""
    scoped = ((request or {}).get("scope") or {}).get("pools")
    return tuple(sorted(scoped or (summary or {}).get("pools") or {}))


def channel_failures(run_path: Path) -> list[str]:
    """The run's messages a channel failed to take (notifications.json), one line each: the channel, the message,
    the last error (no secret: the sender took it out) and the tries; unreadable, it says so."""
    path = run_path / NOTIFICATIONS_RECORD
    try:
        sends = json.loads(path.read_text()) if path.exists() else {}
        return [f"{channel} ({message}): {entry.get('error')} ({entry.get('attempts')} tries)"
                for message, channels in sends.items() for channel, entry in channels.items()
                if entry.get("status") == "failed"]
    except (OSError, ValueError, AttributeError) as exc:
        return [f"{NOTIFICATIONS_RECORD} unreadable ({type(exc).__name__})"]


def run_status(run: RunFolder) -> str:
    """How far the run got, from the stages it completed (the latest that says something wins)."""
    if not run.has(SNAPSHOT):
        return "no snapshot"
    if not run.has(PLAN):
        return "snapshot only"
    validation = _json(run, f"{VALIDATION}/report.json")
    if validation is None:
        return "planned"
    if not validation.get("success"):
        return "validation failed"
    decision = _json(run, f"{APPROVAL}/decision.json")
    executions = _executions(run)
    if not executions:
        if decision is None:
            return "validated"
        return {"dry-run": "dry run", "rejected": "rejected"}.get(decision["state"], "approved")
    if any(e["cancelled"] for e in executions):
        return "cancelled"
    executed = [e for e in executions if not e["dry_run"]]
    if not executed:
        return "dry run"
    if any(e["result"] is None for e in executed):
        where = [f"{e['pool']}: {e['progress']}" for e in executed if e["result"] is None and e["progress"]]
        return "executing or failed" + (f" ({'; '.join(where)})" if where else "")
    if not run.has(VERIFY):
        return "executed"
    verified = _json(run, f"{VERIFY}/summary.json") or {}
    # A verify that found the action's promise not kept (a drained broker still holding replicas), or a broker the
    # plan left above a topic's spread cap, is no verdict.
    if not verified.get("promises_kept", True):
        return "promise not kept"
    return "verified" if (verified.get("topic_spread") or {}).get("kept", True) else "topic spread not kept"


def list_runs(run_root: Path, cluster: str | None = None) -> list[RunOverview]:
    """Every run folder under run_root (one cluster, or all), newest first."""
    clusters = [run_root / cluster] if cluster else sorted(p for p in run_root.iterdir() if p.is_dir()) \
        if run_root.is_dir() else []
    folders = [folder for cluster_dir in clusters if cluster_dir.is_dir()
               for folder in cluster_dir.iterdir() if folder.is_dir() and not folder.name.startswith(".")]
    # Snapshots are timed to the second: two taken in the same second are told apart by when their folders were
    # written (the run id's order is no guide: "snap" would come after "cli__...").
    runs = [(_listed(RunFolder(folder)), _written_ns(folder)) for folder in folders]
    return [r for r, _ in sorted(runs, key=lambda pair: (pair[0].started_at, pair[1], pair[0].run_id), reverse=True)]


def _written_ns(run_dir: Path) -> int:
    """When the run's snapshot was written (else the run folder): nanoseconds."""
    snapshot = run_dir / SNAPSHOT
    return (snapshot if snapshot.is_dir() else run_dir).stat().st_mtime_ns


def _listed(run: RunFolder) -> RunOverview:
    """The run's overview, or, when one of its records cannot be read, a line that says so: one damaged run
    folder does not take the list (and the runs page) down. `show` names the file."""
    try:
        return run_overview(run)
    except (RebalancerError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return RunOverview(run_id=run.path.name, cluster=run.path.parent.name, started_at=_mtime(run.path),
                           trigger=TRIGGERS.get(run.path.name.split("__", 1)[0], "other"), action="?", mode="?",
                           status=f"unreadable ({type(exc).__name__})", replica_moves=None,
                           preferred_leader_changes=None, moved_bytes=None, out_of_band_before=None,
                           out_of_band_after=None, out_of_band_after_measured=False, approval="?", plan_hash=None,
                           report=None)


def _executions(run: RunFolder) -> list[dict[str, Any]]:
    if not run.has(EXECUTE):
        return []
    return [{"pool": d.name, "result": _json(run, f"{EXECUTE}/{d.name}/result.json"),
             "dry_run": (d / "dry_run.json").exists() and not (d / "execution_log.jsonl").exists(),
             "cancelled": (d / "cancel.json").exists(),
             "progress": progress_text(ExecutionLog(d / "execution_log.jsonl", d.name, "").read())}
            for d in sorted(run.stage_path(EXECUTE).iterdir()) if d.is_dir() and not d.name.startswith(".")]


def _mode(run: RunFolder, decision: dict[str, Any] | None) -> str:
    if decision is not None:
        return "dry-run" if decision["state"] == "dry-run" else "execute"
    executions = _executions(run)
    if executions:
        return "dry-run" if all(e["dry_run"] for e in executions) else "execute"
    return "-"


def _approval(decision: dict[str, Any] | None) -> str:
    if decision is None:
        return "-"
    state = decision["state"]
    if state == "rejected" and any(w.startswith("no answer") for w in decision.get("why", [])):
        return "timed out"
    if state in ("approved", "rejected"):
        return f"{state} by {decision.get('by') or 'unknown'}"
    return {"dry-run": "dry run"}.get(state, state)


def _json(run: RunFolder, relative: str) -> Any:
    path = run.path / relative
    return read_json(path) if path.exists() else None


def _mtime(path: Path) -> str:
    return datetime.fromtimestamp(path.stat().st_mtime, UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class RunFilter:
    """Which runs to show (the runs page's query parameters); None: any."""

    cluster: str | None = None
    pool: str | None = None
    state: str | None = None
    trigger: str | None = None

    def keeps(self, run: RunOverview) -> bool:
        return (self.cluster in (None, run.cluster) and self.state in (None, run.state)
                and self.trigger in (None, run.trigger) and (self.pool is None or self.pool in run.pools))


@dataclass(frozen=True)
class BandStatus:
    """A cluster's latest measured band status: the (broker, resource) pairs out of band, by whom measured."""

    out_of_band: int
    measured_by: str  # "verify" (after the run's execution) | "snapshot" (before the run changed anything)
    run: RunOverview


def latest_band_status(runs: list[RunOverview]) -> BandStatus | None:
    """From the newest run (runs: newest first) that measured the bands: after execution if it was verified, else
    at its snapshot (what a plan would leave is not the cluster's state). None before any plan."""
    for run in runs:
        if run.out_of_band_after_measured and run.out_of_band_after is not None:
            return BandStatus(run.out_of_band_after, "verify", run)
        if run.out_of_band_before is not None:
            return BandStatus(run.out_of_band_before, "snapshot", run)
    return None
