"""execute-reviewed: execute the plan of an earlier dry run that a person has read.

The new run adopts the reviewed run's snapshot, plan and validation unchanged (so the plan hash is the reviewed
one: the executor refuses anything else) and its pool override, then takes a fresh snapshot (`current`) to list
the partitions whose replicas changed since: the executor skips those (it checks every partition's replicas
before it moves them) and the list is in `review/drift.json` and the task log. A plan older than
`execution.max_plan_age` is refused: the cluster has moved on.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.errors import RebalancerError
from kafka_rebalancer.model.reassignment import read_reassignment
from kafka_rebalancer.operations.request import ManualRequest, read_request
from kafka_rebalancer.run_folder import PLAN, SNAPSHOT, VALIDATION, RunFolder, read_json, write_json

log = logging.getLogger(__name__)
CURRENT = "current"  # the fresh snapshot of an execute-reviewed run
REVIEW = "review"


def reviewed_run(config: RebalancerConfig, run_id: str) -> RunFolder:
    run = RunFolder(config.run_dir(run_id))
    if not run.path.is_dir():
        raise RebalancerError(f"execute-reviewed: parameter 'run_id': no run {run_id!r} under "
                              f"{config.run_root / config.cluster.name}")
    for stage in (SNAPSHOT, PLAN, VALIDATION):
        run.require(stage)
    if not read_json(run.stage_path(VALIDATION) / "report.json").get("success"):
        raise RebalancerError(f"execute-reviewed: run {run_id!r} failed validation; its plan cannot be executed")
    return run


def plan_age_s(run: RunFolder, now: datetime | None = None) -> float:
    taken = datetime.fromisoformat(read_json(run.stage_path(SNAPSHOT) / "manifest.json")["taken_at"])
    return ((now or datetime.now(UTC)) - taken).total_seconds()


def adopt_reviewed_plan(config: RebalancerConfig, run: RunFolder, request: ManualRequest,
                        connect: Callable[[RebalancerConfig], Any]) -> ManualRequest:
    """Copy the reviewed run's stages into `run`, snapshot the cluster now (`config`: the pools as they are now),
    and list what drifted. Returns the request carrying the reviewed run's pool override."""
    from kafka_rebalancer.snapshot import read_snapshot, take_snapshot

    source = reviewed_run(config, request.reviewed_run_id or "")
    age = plan_age_s(source)
    if age > config.execution.max_plan_age:
        raise RebalancerError(f"execute-reviewed: the plan of run {request.reviewed_run_id!r} is "
                              f"{age / 3600:.1f} h old, older than execution.max_plan_age "
                              f"{config.execution.max_plan_age / 3600:.1f} h; plan again")
    adopted = adopted_request(request, read_request(source))
    for stage in (SNAPSHOT, PLAN, VALIDATION):
        if not run.has(stage):
            with run.stage(stage) as out:
                shutil.copytree(source.stage_path(stage), out, dirs_exist_ok=True)
    take_snapshot(config, connect(config), run, CURRENT)
    drift = drifted_partitions(source, read_snapshot(run, CURRENT)[0].partitions)
    with run.stage(REVIEW) as out:
        write_json(out / "drift.json", {"reviewed_run_id": request.reviewed_run_id, "plan_age_s": round(age),
                                        "changed_since": drift})
    for entry in drift:
        log.warning("execute-reviewed: %s-%d changed since the plan (replicas %s, planned from %s): it will be "
                    "skipped", entry["topic"], entry["partition"], entry["now"], entry["planned_from"])
    log.info("execute-reviewed: plan of run %s (%.1f h old), %d partition(s) changed since", request.reviewed_run_id,
             age / 3600, len(drift))
    return adopted


def adopted_request(request: ManualRequest, reviewed: ManualRequest | None) -> ManualRequest:
    """An execute-reviewed request as it executes the reviewed run's plan: with that run's pool override, its scope
    (what the plan was planned for, a drain's brokers, a demotion's, decides which pool executes its moves of
    partitions no pool balances: snapshot.evacuation) and a drain's unregister (the person read it in the summary)."""
    if reviewed is None:  # a nightly run's plan
        return request.model_copy(update={"override": None})
    return request.model_copy(update={"override": reviewed.override, "scope": reviewed.scope,
                                      "unregister": reviewed.unregister})


def drifted_partitions(source: RunFolder, current_partitions: Any) -> list[dict[str, Any]]:
    """The plan's partitions whose replicas now differ from those the plan started from (or that are gone)."""
    rollback = read_reassignment(source.stage_path(PLAN) / "rollback.json")
    now = {(t, int(p)): [int(b) for b in r] for t, p, r in zip(
        current_partitions["topic"], current_partitions["partition"], current_partitions["replicas"], strict=True)}
    out = []
    for entry in rollback:
        current = now.get((entry.topic, entry.partition))
        if current != list(entry.replicas):
            out.append({"topic": entry.topic, "partition": entry.partition, "planned_from": list(entry.replicas),
                        "now": current})
    return out
