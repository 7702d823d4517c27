"""The manual operations' command-line arguments, one command per row of the table of manual actions
(model/run_actions.py), kept apart from `cli.operations` (which runs them) so that building the CLI's parser
imports nothing heavy: the CLI starts fast and `plan` starts its Spark JVM early."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka_rebalancer.model.run_actions import MANUAL_ACTIONS, RunAction

COMMANDS: dict[str, RunAction] = {a.command: a for a in MANUAL_ACTIONS}


def _ids(text: str) -> list[int]:
    try:
        return [int(b) for b in text.split(",") if b.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected broker ids like 7,8, got {text!r}") from None


def _names(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


@dataclass(frozen=True)
class Option:
    """A request field's option on the command line."""

    flag: str  # --<flag>
    help: str
    type: Callable[[str], Any] = str
    required: bool = False  # by every command taking it; what each action needs is the request's check
    switch: bool = False  # a flag without a value: the field is true when given

    @property
    def dest(self) -> str:
        return self.flag.replace("-", "_")


# Request field -> its option: shorter names than the request's.
OPTIONS: dict[str, Option] = {
    "topics": Option("topics", "topic names or glob patterns, comma-separated (e.g. 'payments.*,ledger')", _names),
    "broker_pool": Option("pool", "the broker pool"),
    "brokers": Option("brokers", "broker ids, comma-separated (e.g. 7,8)", _ids),
    "reason": Option("reason", "why (required when pool membership changes; recorded with the override)"),
    "reviewed_run_id": Option("run-id", "the dry run whose plan is executed", required=True),
    "log_dirs": Option("log-dirs", "broker:path of each log dir to empty, comma-separated (e.g. "
                                   "3:/data/d2,4:/data/d2)", _names),
    "unregister": Option("unregister", "once the drain is executed and verified, unregister its brokers from the "
                                       "KRaft controller (refused while one is running or holds a replica)",
                         switch=True),
    "replication_factor": Option("replication-factor", "the topics' target replication factor (e.g. 3)", int),
}


def request_params(action: RunAction, args: argparse.Namespace) -> dict[str, Any]:
    """What the command of `action` asks for, as `make_request`'s parameters."""
    return {"action": action.name, **{field: getattr(args, OPTIONS[field].dest) for field in action.fields}}


def _command_help(action: RunAction) -> str:
    # An action that plans stops at its dry run unless --apply; the other kind executes a plan already read.
    if action.plans:
        return f"manual operation {action.name} (dry run unless --apply)"
    return "execute the plan of an earlier dry run after reading it"


def add_parsers(sub: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    for command, action in COMMANDS.items():
        p = sub.add_parser(command, help=_command_help(action))
        common(p)
        for field in action.fields:
            option = OPTIONS[field]
            if option.switch:
                p.add_argument(f"--{option.flag}", action="store_true", help=option.help)
            else:
                p.add_argument(f"--{option.flag}", type=option.type, required=option.required, help=option.help)
        _apply_flags(p)
    p = sub.add_parser("overrides", help="list or revert pool overrides")
    p.add_argument("--config", required=True, type=Path)
    p.add_argument("verb", choices=["list", "revert"])
    p.add_argument("id", nargs="?", type=int, help="revert: the override's id")
    p.add_argument("--bootstrap-servers", help="overrides cluster.bootstrap_servers (revert uncordons a drain's "
                   "brokers)")
    p = sub.add_parser("pools", help="effective brokers and topic rules of every pool, with where each comes from, "
                       "and the cordoned brokers")
    p.add_argument("--config", required=True, type=Path)
    p.add_argument("--bootstrap-servers", help="overrides cluster.bootstrap_servers")


def _apply_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--apply", action="store_true", help="execute after showing the plan and asking to confirm")
    p.add_argument("--yes", action="store_true", help="with --apply: do not ask (scripts)")
    p.add_argument("--throttle-bytes-per-s", type=int, help="replication throttle per broker")
    p.add_argument("--spark-master", default="local[2]")
