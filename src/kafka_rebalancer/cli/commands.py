"""The manual operations' command-line arguments, kept apart from `operations.cli` (which runs them) so that
building the CLI's parser imports nothing heavy: the CLI starts fast and `plan` starts its Spark JVM early."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

# CLI command -> (action, the request fields it takes)
COMMANDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "isolate": ("isolate-topics", ("topics", "pool", "brokers", "reason")),
    "drain": ("drain-brokers", ("brokers", "reason")),
    "add-brokers": ("add-brokers", ("brokers", "pool", "reason")),
    "rebalance-pool": ("rebalance-pool", ("pool",)),
    "elect-leaders": ("elect-leaders", ("pool", "topics")),
    "demote": ("demote-brokers", ("brokers",)),
}
HELP = {"topics": "topic names or glob patterns, comma-separated (e.g. 'payments.*,ledger')",
        "pool": "the broker pool", "brokers": "broker ids, comma-separated (e.g. 7,8)",
        "reason": "why (required when pool membership changes; recorded with the override)"}


def _ids(text: str) -> list[int]:
    try:
        return [int(b) for b in text.split(",") if b.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected broker ids like 7,8, got {text!r}") from None


def _names(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def add_parsers(sub: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    for command, (action, fields) in COMMANDS.items():
        p = sub.add_parser(command, help=f"manual operation {action} (dry run unless --apply)")
        common(p)
        for name in fields:
            kind = {"brokers": _ids, "topics": _names}.get(name, str)
            p.add_argument(f"--{name}", type=kind, help=HELP[name])
        _apply_flags(p)
    p = sub.add_parser("execute-reviewed", help="execute the plan of an earlier dry run after reading it")
    common(p)
    p.add_argument("--run-id", required=True, help="the dry run whose plan is executed")
    _apply_flags(p)
    p = sub.add_parser("overrides", help="list or revert pool overrides")
    p.add_argument("--config", required=True, type=Path)
    p.add_argument("verb", choices=["list", "revert"])
    p.add_argument("id", nargs="?", type=int, help="revert: the override's id")
    p = sub.add_parser("pools", help="effective brokers and topic rules of every pool, with where each comes from")
    p.add_argument("--config", required=True, type=Path)


def _apply_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--apply", action="store_true", help="execute after showing the plan and asking to confirm")
    p.add_argument("--yes", action="store_true", help="with --apply: do not ask (scripts)")
    p.add_argument("--throttle-bytes-per-s", type=int, help="replication throttle per broker")
    p.add_argument("--spark-master", default="local[2]")
