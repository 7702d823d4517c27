"""One execution per (cluster, broker pool) at a time: an exclusive file lock taken before the executor touches
the cluster. The operating system releases it when the holder dies, so a killed executor never blocks its rerun.
The lock folder must be shared by everything that may execute against the cluster (the run root is)."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from kafka_rebalancer.errors import ExecutionError


def pool_lock_held(lock_dir: Path, cluster: str, broker_pool: str) -> bool:
    """Whether an execution holds the pool's lock now (a killed executor does not: the system released it)."""
    path = lock_dir / f"{cluster}.{broker_pool}.lock"
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing releases a lock taken here
    return False


@contextmanager
def pool_lock(lock_dir: Path, cluster: str, broker_pool: str, run_id: str) -> Iterator[None]:
    lock_dir.mkdir(parents=True, exist_ok=True)
    path = lock_dir / f"{cluster}.{broker_pool}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode(errors="replace").strip() or "unknown"
            raise ExecutionError(f"refusing to start: another execution for pool {broker_pool!r} of cluster "
                                 f"{cluster!r} is running ({holder}; lock {path})") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "run": run_id,
                                  "since": datetime.now(UTC).isoformat(timespec="seconds")}).encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the lock
