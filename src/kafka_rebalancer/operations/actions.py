"""The manual actions, each defined once: its name, its CLI command, the request fields it takes, what it does.

The request's accepted actions (operations/request.py), the CLI's commands and options (cli/commands.py) and the
manual DAG's `action` param (dags/kafka_rebalance_manual.py) are built from this table. It imports nothing: the
CLI reads it before its arguments are parsed and the DAG processor when it parses the DAG.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ManualAction:
    """One action a person may ask for, in the manual DAG or with the CLI."""

    name: str  # the request's `action`, the manual DAG's `action` param
    command: str  # the CLI command
    fields: tuple[str, ...]  # the request fields it takes, in the CLI's order; any other must be left empty
    help: str  # what it does, in the manual DAG's param names
    changes_pools: bool = False  # records a pool override when approved, so the request needs a reason
    plans: bool = True  # False: executes a reviewed dry run's plan (its snapshot, plan and validation are adopted)


MANUAL_ACTIONS: tuple[ManualAction, ...] = (
    ManualAction("isolate-topics", "isolate", ("topics", "broker_pool", "brokers", "reason"),
                 "topics into broker_pool (new pool: with brokers)", changes_pools=True),
    ManualAction("drain-brokers", "drain", ("brokers", "reason"), "brokers give away every replica",
                 changes_pools=True),
    ManualAction("add-brokers", "add-brokers", ("brokers", "broker_pool", "reason"),
                 "empty brokers join broker_pool", changes_pools=True),
    ManualAction("rebalance-pool", "rebalance-pool", ("broker_pool",), "the nightly plan for broker_pool"),
    ManualAction("elect-leaders", "elect-leaders", ("broker_pool", "topics"), "preferred leader election"),
    ManualAction("demote-brokers", "demote", ("brokers",), "leadership off brokers"),
    ManualAction("remove-disks", "remove-disks", ("log_dirs", "reason"),
                 "log_dirs (broker:path) emptied onto their brokers' other log dirs"),
    ManualAction("execute-reviewed", "execute-reviewed", ("reviewed_run_id",), "execute the plan of dry run run_id",
                 plans=False),
)
ACTION_NAMES: tuple[str, ...] = tuple(a.name for a in MANUAL_ACTIONS)
BY_NAME: dict[str, ManualAction] = {a.name: a for a in MANUAL_ACTIONS}


def plans(action: str) -> bool:
    """Whether a run of this action plans (the nightly run does; execute-reviewed adopts a reviewed plan)."""
    return BY_NAME[action].plans if action in BY_NAME else True
