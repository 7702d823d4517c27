"""Errors an operator can act on: each message names the thing that is wrong and what was expected."""

from __future__ import annotations


class RebalancerError(Exception):
    """Base class; the CLI prints these without a traceback."""


class ConfigError(RebalancerError):
    """The config file (or a file it points to) is invalid."""

    def __init__(self, file: str, field: str, message: str) -> None:
        self.file, self.field, self.message = file, field, message
        where = f"{file}: {field}" if field else file
        super().__init__(f"{where}: {message}")


class UnreachableError(RebalancerError):
    """A service the step needs did not answer (the CLI's exit code 3: worth retrying later)."""


class KafkaUnreachableError(UnreachableError):
    """No broker answered within the timeout."""


class SnapshotError(RebalancerError):
    """The cluster's state could not be captured consistently."""


class RunFolderError(RebalancerError):
    """A stage's input is missing or incomplete in the run folder."""


class ValidationFailed(RebalancerError):
    """The plan failed its great-expectations suite; it must not be executed."""


class ExecutionError(RebalancerError):
    """Executing the plan failed or was refused."""


class ExecutionCancelled(ExecutionError):
    """An operator cancelled the pool's execution; retrying must not undo that."""

    def __init__(self, message: str, pool: str | None = None) -> None:
        super().__init__(message)
        self.pool = pool  # for the notification: which pool's execution


class ExecutionTimedOut(ExecutionError):
    """A pool's execution reached its run timeout or a move its move timeout (stalled moves named): a rerun
    continues from the execution log."""

    def __init__(self, message: str, pool: str | None = None) -> None:
        super().__init__(message)
        self.pool = pool


class PermissionDenied(RebalancerError):
    """The Kafka user lacks an ACL a step needs; the message names it and how to grant it."""


class PrometheusUnreachableError(UnreachableError):
    """Prometheus did not answer (refused, timed out, or a 5xx): retrying later may help."""


class PrometheusQueryError(RebalancerError):
    """Prometheus answered with an error (a 4xx such as a bad query or refused credentials, or `status: error`) or
    with something other than a range query's matrix: retrying does not help."""


def one_line(exc: BaseException) -> str:
    """A library's error text on one line (pyarrow's span several), to quote inside a message of ours."""
    return " ".join(str(exc).split())


class PromiseNotKept(RebalancerError):
    """After execution, the cluster does not show what the run's action promised (a drained broker still holds
    replicas, ...): the run is not verified. `not_kept`: every promise or topic spread cell not kept, in words (the
    message names the first; the notification lists them)."""

    def __init__(self, message: str, not_kept: list[str] | None = None) -> None:
        super().__init__(message)
        self.not_kept = list(not_kept or [])


class PoolsHeld(RebalancerError):
    """An automatic run found a pool it was started for held by another run: it starts nothing and its events are
    held back (raised again after the cooldown). Not a failure to tell anyone about: the events' notification says
    it."""
