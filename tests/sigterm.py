"""A pytest plugin (registered by tests/conftest.py): SIGTERM stops the run as Ctrl-C does.

A CI time limit, or a person stopping `make test`, sends SIGTERM; pytest's default is to die at once, leaving the
Kafka brokers, Airflow, Prometheus and browsers the session's fixtures started running. As an interrupt, the run
stops after the current test and every fixture's teardown stops what it started, by its process id.
"""

from __future__ import annotations

import signal
from types import FrameType


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure() -> None:
    signal.signal(signal.SIGTERM, _interrupt)
