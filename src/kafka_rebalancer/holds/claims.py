"""A run's claim on its pools, from its snapshot to its report (README: Automation). The execution lock holds a pool
only while it executes; automatic runs must also not start while another run is planning, waiting for its
approval or verifying there. Each run of a DAG writes `<run_root>/<cluster>/.claims/<run id>.json` (its pools) when
it starts and removes it in its last task; a claim whose run is no longer queued or running (killed before its
last task) is stale, and removed by the next look at the claims. A CLI command working on a run (a step, a manual
operation) holds the pools while it runs: its claim names its process, stale once that process is gone (on another
machine, where that cannot be checked, after a day).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.errors import RunFolderError

RunIsLive = Callable[[str, str], bool]  # (dag id, run id) -> whether that run is still queued or running


@dataclass(frozen=True)
class PoolClaim:
    run_id: str
    dag_id: str
    broker_pools: tuple[str, ...]
    since: str
    pid: int | None = None  # a CLI command's process (dag_id then names the command), on `host`
    host: str | None = None

    def describe(self) -> str:
        if self.pid is not None:
            return f"{self.dag_id} (pid {self.pid} on {self.host}, since {self.since})"
        return f"run {self.run_id} of {self.dag_id} (since {self.since})"

    def file_name(self) -> str:
        return _file_name(self.run_id if self.pid is None else f"cli-{self.host}-{self.pid}")

    def command_alive(self) -> bool:
        """Whether a CLI command's claim still holds: its process runs (or, on another machine, it is under a day
        old)."""
        if self.pid is None:
            return False
        if self.host != socket.gethostname():
            return datetime.now(UTC) - datetime.fromisoformat(self.since) < timedelta(days=1)
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True  # someone else's process
        return True


def claims_dir(config: RebalancerConfig) -> Path:
    return config.run_root / config.cluster.name / ".claims"


def _file_name(run_id: str) -> str:
    return run_id.replace("/", "_") + ".json"


@contextmanager
def _claims_locked(config: RebalancerConfig) -> Iterator[Path]:
    """Check-then-claim under one lock, so two runs starting together cannot both find a pool free."""
    folder = claims_dir(config)
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield folder
    finally:
        os.close(fd)


def _read(folder: Path) -> list[PoolClaim]:
    claims = []
    for path in sorted(folder.glob("*.json")):
        try:
            raw = json.loads(path.read_text())
            claims.append(PoolClaim(str(raw["run_id"]), str(raw["dag_id"]), tuple(raw["broker_pools"]),
                                    str(raw["since"]), None if raw.get("pid") is None else int(raw["pid"]),
                                    raw.get("host")))
        except FileNotFoundError:
            continue  # released while we listed
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise RunFolderError(f"{path}: not a readable pool claim ({type(exc).__name__}: {exc}); remove it if "
                                 "its run has ended") from exc
    return claims


def _live(folder: Path, is_live: RunIsLive, but: str | None = None) -> list[PoolClaim]:
    """The claims of runs still queued or running (other than `but`); stale ones are removed."""
    live = []
    for claim in _read(folder):
        if claim.run_id == but:
            continue
        if claim.command_alive() if claim.pid is not None else is_live(claim.dag_id, claim.run_id):
            live.append(claim)
        else:
            (folder / claim.file_name()).unlink(missing_ok=True)
    return live


def claimed_pools(config: RebalancerConfig, is_live: RunIsLive, but: str | None = None) -> dict[str, PoolClaim]:
    """Each pool another live run holds, with its claim."""
    with _claims_locked(config) as folder:
        return {pool: claim for claim in _live(folder, is_live, but) for pool in claim.broker_pools}


def claim_pools(config: RebalancerConfig, dag_id: str, run_id: str, broker_pools: Iterable[str], is_live: RunIsLive,
                *, exclusive: bool) -> list[PoolClaim]:
    """Record this run's claim on its pools. `exclusive` (an automatic run): claim nothing when another live run
    holds one of them, and return those claims instead (empty: claimed)."""
    pools = tuple(sorted(broker_pools))
    with _claims_locked(config) as folder:
        if exclusive:
            holding = [c for c in _live(folder, is_live, but=run_id) if set(c.broker_pools) & set(pools)]
            if holding:
                return holding
        _write(folder, PoolClaim(run_id, dag_id, pools, _now()))
    return []


@contextmanager
def command_holds_pools(config: RebalancerConfig, command: str, run_id: str | None,
                        broker_pools: Iterable[str]) -> Iterator[PoolClaim]:
    """A CLI command's claim on the pools, while it runs (automatic runs start nothing on them meanwhile)."""
    claim = PoolClaim(run_id or "", f"kafka-rebalancer {command}", tuple(sorted(broker_pools)), _now(), os.getpid(),
                      socket.gethostname())
    with _claims_locked(config) as folder:
        _write(folder, claim)
    try:
        yield claim
    finally:
        (claims_dir(config) / claim.file_name()).unlink(missing_ok=True)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _write(folder: Path, claim: PoolClaim) -> None:
    partial = folder / f".{claim.file_name()}.partial"
    partial.write_text(json.dumps(claim.__dict__))
    os.replace(partial, folder / claim.file_name())


def release_pools(config: RebalancerConfig, run_id: str) -> bool:
    """Remove this run's claim; whether it had one."""
    path = claims_dir(config) / _file_name(run_id)
    existed = path.exists()
    path.unlink(missing_ok=True)
    return existed
