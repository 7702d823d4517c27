"""What a run does, each action defined once: its name, its CLI command, the request fields it takes, and what
differs per action (whether its receivers must run, whether it drains, its promise, its place among automatic
runs, whether its brokers' log dirs are balanced).

The action names are written here and nowhere else in the package: every other module names an action by its
`Action` member (a misspelt one fails at import), and the steps after the request read the planning scope the
request's resolver wrote (operations/request.py), not the name. The request's accepted actions, the CLI's commands
and options (cli/commands.py) and the manual DAG's `action` param (dags/kafka_rebalance_manual.py) are built from
this table. It imports nothing of the package: the CLI reads it before its arguments are parsed and the DAG
processor when it parses the DAG.

An action's parts, one per step: its resolver, which decides the pool override and the planning scope
(operations/request.py); the pool change (operations/overrides.py); the partitions no pool balances that a drain or
a demotion still touches (snapshot/evacuation.py); the forced moves the re-check holds the plan to
(plan/recheck.py); its promise (plan/promises.py); a drain's cordon and its undoing on revert (execute/cordon.py); a
replication factor change's checks against the cluster (operations/replication_factor.py) and its placement
(plan/replication_factor.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Action(StrEnum):
    """A run's action: the scheduled run's, or one a person (or the cluster's events) asks for. A member is its
    name wherever a string is expected (request.json, the DAG's params, the runs table)."""

    NIGHTLY = "nightly"
    ISOLATE_TOPICS = "isolate-topics"
    DRAIN_BROKERS = "drain-brokers"
    ADD_BROKERS = "add-brokers"
    REBALANCE_POOL = "rebalance-pool"
    ELECT_LEADERS = "elect-leaders"
    DEMOTE_BROKERS = "demote-brokers"
    REMOVE_DISKS = "remove-disks"
    CHANGE_REPLICATION_FACTOR = "change-replication-factor"
    EXECUTE_REVIEWED = "execute-reviewed"


@dataclass(frozen=True)
class RunAction:
    """One action and its behaviour."""

    action: Action
    command: str  # the CLI command
    fields: tuple[str, ...]  # the request fields it takes, in the CLI's order; any other must be left empty
    help: str  # what it does, in the manual DAG's param names
    changes_pools: bool = False  # records a pool override when approved, so the request needs a reason
    plans: bool = True  # False: executes a reviewed dry run's plan (its snapshot, plan and validation are adopted)
    receivers_must_run: bool = False  # its brokers receive replicas, so they must be running (a drained one may not)
    drains: bool = False  # its brokers leave their pools and give away every replica (cordoned while it runs)
    promises: bool = False  # it promises more than the bands (plan/promises.py says what and checks it)
    balances_log_dirs: bool = False  # its plan also moves replicas between each planned broker's log dirs
    automatic_precedence: int | None = None  # the order the cluster's events start it in (None: they never do)

    @property
    def name(self) -> str:
        return self.action.value

    @property
    def names_pool(self) -> bool:
        """Whether the request names a pool (a drain's brokers leave theirs, whichever it is)."""
        return "broker_pool" in self.fields


NIGHTLY = RunAction(Action.NIGHTLY, "", (), "the nightly plan for every pool", balances_log_dirs=True)
MANUAL_ACTIONS: tuple[RunAction, ...] = (
    RunAction(Action.ISOLATE_TOPICS, "isolate", ("topics", "broker_pool", "brokers", "reason"),
              "topics into broker_pool (new pool: with brokers)", changes_pools=True, receivers_must_run=True,
              promises=True),
    RunAction(Action.DRAIN_BROKERS, "drain", ("brokers", "reason", "unregister"),
              "brokers give away every replica (unregister: dead ones are then unregistered, KRaft)",
              changes_pools=True, drains=True, promises=True,
              automatic_precedence=0),  # a lost broker's partitions are short of a replica until it runs
    RunAction(Action.ADD_BROKERS, "add-brokers", ("brokers", "broker_pool", "reason"),
              "empty brokers join broker_pool", changes_pools=True, receivers_must_run=True,
              promises=True, automatic_precedence=1),
    RunAction(Action.REBALANCE_POOL, "rebalance-pool", ("broker_pool",), "the nightly plan for broker_pool",
              balances_log_dirs=True, automatic_precedence=2),
    RunAction(Action.ELECT_LEADERS, "elect-leaders", ("broker_pool", "topics"), "preferred leader election"),
    RunAction(Action.DEMOTE_BROKERS, "demote", ("brokers",), "leadership off brokers",
              promises=True),
    RunAction(Action.REMOVE_DISKS, "remove-disks", ("log_dirs", "reason"),
              "log_dirs (broker:path) emptied onto their brokers' other log dirs",
              promises=True),
    RunAction(Action.CHANGE_REPLICATION_FACTOR, "change-replication-factor",
              ("topics", "replication_factor", "reason"),
              "topics (internal ones too) to replication_factor: replicas added or removed", promises=True),
    RunAction(Action.EXECUTE_REVIEWED, "execute-reviewed", ("reviewed_run_id",), "execute the plan of dry run run_id",
              plans=False),
)
ACTION_NAMES: tuple[str, ...] = tuple(a.name for a in MANUAL_ACTIONS)
BY_ACTION: dict[Action, RunAction] = {a.action: a for a in (NIGHTLY, *MANUAL_ACTIONS)}
# The actions the cluster's events start, first the one that goes first when a pool has several.
AUTOMATIC: tuple[Action, ...] = tuple(a.action for a in sorted(
    (a for a in MANUAL_ACTIONS if a.automatic_precedence is not None), key=lambda a: a.automatic_precedence or 0))


def taking(field: str) -> str:
    """The manual actions whose request takes `field`, for a parameter's description."""
    return ", ".join(a.name for a in MANUAL_ACTIONS if field in a.fields)


def run_action(action: Action | str) -> RunAction:
    """The record of an action (ValueError names the known ones when `action` is none of them)."""
    return BY_ACTION[Action(action)]
