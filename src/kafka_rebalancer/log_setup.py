"""Task logs and the terminal are the product's own account of a step: the libraries it drives (kafka-python's
connect/close lines, great-expectations' registration notes, py4j) speak only at WARNING and above, unless
KAFKA_REBALANCER_DEBUG_LOGS=1 brings them back for a bug hunt.

A step the CLI runs on a terminal (`plan`, `validate`, and those of a manual operation) sends what the libraries
print to the run's log file instead (`libraries_to_file`, `RUN_LOG`): Spark's JVM, HiGHS' banner, Python warnings,
the libraries' log records. The terminal keeps the product's lines; the file has those too, in order, with the
libraries' around them.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from kafka_rebalancer.errors import RebalancerError

LIBRARIES = ("kafka", "great_expectations", "py4j", "urllib3", "filelock")
DEBUG_SWITCH = "KAFKA_REBALANCER_DEBUG_LOGS"
PRODUCT = "kafka_rebalancer"  # the product's loggers are this one's children
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
RUN_LOG = "cli.log"  # in a run folder: the log of the CLI's plan and validate on it

log = logging.getLogger(__name__)
_open: dict[Path, BinaryIO] = {}  # the run log files `libraries_to_file` holds open, by path
_highs_banner_written: list[bool] = []  # one entry once this process's HiGHS banner went to a file


def debugging() -> bool:
    return os.environ.get(DEBUG_SWITCH, "") in ("1", "true", "yes")


def quiet_libraries() -> None:
    if debugging():
        return
    for name in LIBRARIES:
        logging.getLogger(name).setLevel(logging.WARNING)


class _ProductOnly(logging.Filter):
    """The terminal's share of the log records: the product's own, and any library's errors."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.name.startswith(PRODUCT) or record.levelno >= logging.ERROR


def library_output() -> BinaryIO | None:
    """The run log file `libraries_to_file` holds open (the Spark JVM's stdout and stderr), None outside it."""
    return next(iter(_open.values()), None)


@contextmanager
def libraries_to_file(path: Path) -> Iterator[BinaryIO | None]:
    """Within: `path` (appended to) takes what the libraries print, the terminal keeps the product's lines.

    - Every log record goes to the file; the root logger's other handlers (the terminal) pass only the product's
      records and errors (`_ProductOnly`).
    - Python warnings (numpy's, pandas', pyspark's) are log records of `py.warnings`: the file's alone.
    - HiGHS writes a banner from C++ straight to file descriptor 1 (past sys.stdout) when a process makes its first
      solver, and never again: the first one is made here, with descriptor 1 on the file for that moment.
    - The file is yielded (and is `library_output()`) for the Spark JVM's stdout and stderr: Spark's and log4j's
      start-up lines, the JVM's warnings, and whatever the Python workers it starts print.

    Entered again for the same path (the CLI's `plan` holds it around its Spark start and its plan): nothing more.
    With KAFKA_REBALANCER_DEBUG_LOGS=1 nothing is moved (yields None)."""
    path = Path(path).resolve()
    if debugging() or path in _open:
        yield _open.get(path)
        return
    output = path.open("ab")
    _open[path] = output
    root = logging.getLogger()
    to_file = logging.FileHandler(path, encoding="utf-8")
    to_file.setFormatter(logging.Formatter(FORMAT))
    terminal = _ProductOnly()
    shown = list(root.handlers)
    for handler in shown:
        handler.addFilter(terminal)
    root.addHandler(to_file)
    logging.captureWarnings(True)
    try:
        _highs_banner_to(output)
        yield output
    except Exception as exc:
        if not isinstance(exc, RebalancerError):  # a fault, not bad input: Spark's side of it may say why
            log.warning("the libraries' output of this step (Spark, HiGHS) is in %s", path)
        raise
    finally:
        logging.captureWarnings(False)
        root.removeHandler(to_file)
        to_file.close()
        for handler in shown:
            handler.removeFilter(terminal)
        del _open[path]
        output.close()


def _highs_banner_to(output: BinaryIO) -> None:
    if _highs_banner_written:
        return
    import highspy

    sys.stdout.flush()
    terminal = os.dup(1)
    try:
        os.dup2(output.fileno(), 1)
        highspy.Highs()
    finally:
        os.dup2(terminal, 1)
        os.close(terminal)
    _highs_banner_written.append(True)
