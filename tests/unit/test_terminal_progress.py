"""Progress bars for the long CLI steps: drawn on a terminal, with log lines printed above them; nothing drawn
elsewhere (task logs, pipes), where the log lines carry the progress."""

from __future__ import annotations

import io
import logging
from typing import Any

from kafka_rebalancer import terminal_progress
from kafka_rebalancer.execute.moves import PartitionMove
from kafka_rebalancer.execute.progress import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bars_on_a_terminal_show_each_step_and_keep_log_lines_readable() -> None:
    screen = Terminal()
    handler = logging.StreamHandler(screen)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with terminal_progress.bars_on(screen):
            phase = terminal_progress.Phases("snapshot", 2)
            phase("brokers")
            phase("partitions")
            moves = [PartitionMove("t", 0, (1,), (2,), 300 * 2**20), PartitionMove("t", 1, (1,), (2,), 100 * 2**20)]
            progress = Progress("pool-a", moves, None, lambda action, **entry: None)
            progress.done(moves[0])
            logging.getLogger("kafka_rebalancer.test").warning("a log line while the bars run")
        assert handler.stream is screen  # given back
    finally:
        root.removeHandler(handler)
    drawn = screen.getvalue()
    assert "snapshot" in drawn and "partitions" in drawn
    assert "execute pool-a" in drawn and "1/2 moves" in drawn and "75%" in drawn
    assert "a log line while the bars run" in drawn


def test_nothing_is_drawn_off_a_terminal() -> None:
    pipe = io.StringIO()
    with terminal_progress.bars_on(pipe):
        terminal_progress.show("plan", 3, None, "bands")
    assert pipe.getvalue() == ""


def test_a_question_pauses_the_bars() -> None:
    screen = Terminal()
    asked: list[Any] = []
    with terminal_progress.bars_on(screen):
        terminal_progress.show("execute pool-a", 1, 4, "1/4 moves")
        with terminal_progress.paused():
            asked.append(terminal_progress._bars.live.is_started)  # type: ignore[union-attr]
        asked.append(terminal_progress._bars.live.is_started)  # type: ignore[union-attr]
    assert asked == [False, True]


def test_a_sampling_wait_moves_its_bar_to_the_end() -> None:
    screen = Terminal()
    with terminal_progress.bars_on(screen):
        terminal_progress.sleeping("snapshot", "sampling traffic")(0.2)
        task = terminal_progress._bars.tasks[0]  # type: ignore[union-attr]
        assert (task.completed, task.total, task.fields["detail"]) == (0.2, 0.2, "sampling traffic")
