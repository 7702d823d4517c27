"""Task logs and the terminal are the product's own account of a step: the libraries it drives (kafka-python's
connect/close lines, great-expectations' registration notes, py4j) speak only at WARNING and above, unless
KAFKA_REBALANCER_DEBUG_LOGS=1 brings them back for a bug hunt."""

from __future__ import annotations

import logging
import os

LIBRARIES = ("kafka", "great_expectations", "py4j", "urllib3", "filelock")
DEBUG_SWITCH = "KAFKA_REBALANCER_DEBUG_LOGS"


def quiet_libraries() -> None:
    if os.environ.get(DEBUG_SWITCH, "") in ("1", "true", "yes"):
        return
    for name in LIBRARIES:
        logging.getLogger(name).setLevel(logging.WARNING)
