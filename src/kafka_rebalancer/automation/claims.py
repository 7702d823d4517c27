"""A run's claim on its pools, from its snapshot to its report (README: Automation). The execution lock holds a pool
only while it executes; automatic runs must also not start while another run is planning, waiting for its
approval or verifying there. Each run of a DAG writes `<run_root>/<cluster>/.claims/<run id>.json` (its pools) when
it starts and removes it in its last task; a claim whose run is no longer queued or running (killed before its
last task) is stale, and removed by the next look at the claims.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
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

    def describe(self) -> str:
        return f"run {self.run_id} of {self.dag_id} (since {self.since})"


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
                                    str(raw["since"])))
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
        if is_live(claim.dag_id, claim.run_id):
            live.append(claim)
        else:
            (folder / _file_name(claim.run_id)).unlink(missing_ok=True)
    return live


def held_pools(config: RebalancerConfig, is_live: RunIsLive, but: str | None = None) -> dict[str, PoolClaim]:
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
        claim = PoolClaim(run_id, dag_id, pools, datetime.now(UTC).isoformat(timespec="seconds"))
        partial = folder / f".{_file_name(run_id)}.partial"
        partial.write_text(json.dumps(claim.__dict__))
        os.replace(partial, folder / _file_name(run_id))
    return []


def release_pools(config: RebalancerConfig, run_id: str) -> bool:
    """Remove this run's claim; whether it had one."""
    path = claims_dir(config) / _file_name(run_id)
    existed = path.exists()
    path.unlink(missing_ok=True)
    return existed
