"""Progress bars for the long CLI steps (snapshot, plan, execute) when a person watches a terminal.

The steps call `show` as they go; it draws only while `bars_on` is active on a terminal. Elsewhere (Airflow task
logs, pipes, CI) nothing is drawn and the steps' own log lines carry the same progress.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TaskProgressColumn, TextColumn, TimeElapsedColumn

_bars: Progress | None = None
_steps: dict[str, TaskID] = {}


def show(step: str, completed: float, total: float | None = None, detail: str = "") -> None:
    """Where `step` stands: `completed` of `total` (None: no known end, the bar pulses) and a short detail."""
    if _bars is None:
        return
    if step not in _steps:
        _steps[step] = _bars.add_task(step, total=total, detail=detail)
    _bars.update(_steps[step], completed=completed, total=total, detail=detail)


class Phases:
    """A step made of a known number of phases: each call marks the next one started."""

    def __init__(self, step: str, total: int) -> None:
        self.step, self.total, self.started = step, total, 0

    def __call__(self, what: str) -> None:
        show(self.step, self.started, self.total, what)
        self.started += 1


def sleeping(step: str, what: str) -> Callable[[float], None]:
    """A sleep that moves the step's bar through the wait."""
    def sleep(seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            show(step, seconds - left, seconds, what)
            time.sleep(min(left, 0.5))
        show(step, seconds, seconds, what)
    return sleep


@contextmanager
def paused() -> Iterator[None]:
    """The bars stand still while the block asks a person something on the terminal."""
    bars = _bars
    if bars is None:
        yield
        return
    bars.stop()
    try:
        yield
    finally:
        bars.start()


@contextmanager
def bars_on(stream: TextIO) -> Iterator[None]:
    """Draw the steps' bars on `stream` while the block runs, if it is a terminal. Log lines printed meanwhile go
    above the bars instead of through them."""
    global _bars
    if not stream.isatty():
        yield
        return
    console = Console(file=stream)
    handlers = [h for h in logging.getLogger().handlers if isinstance(h, logging.StreamHandler)]
    with Progress(TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[detail]}"), console=console) as bars:
        # The handlers keep the stream they were made with; the bars' stand-in prints above the bars.
        streams = [h.setStream(sys.stderr) for h in handlers]
        _bars = bars
        try:
            yield
        finally:
            _bars = None
            _steps.clear()
            for handler, original in zip(handlers, streams, strict=True):
                if original is not None:  # None: the stream was not replaced
                    handler.setStream(original)
