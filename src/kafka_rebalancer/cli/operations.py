"""Manual operations from a terminal: the same request, plan, validation, approval and execution as the manual
DAG, in one command. Without --apply the run stops after the summary (a dry run; execute it later with
`execute-reviewed --run-id`); with --apply the summary is shown and a person confirms on the terminal (--yes for
scripts), which is the approval recorded with the plan hash."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from kafka_rebalancer.cli.commands import COMMANDS, request_params
from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.errors import RebalancerError
from kafka_rebalancer.log_setup import RUN_LOG, libraries_to_file
from kafka_rebalancer.operations.overrides import CONFIG, OverrideStore, current_user, layout
from kafka_rebalancer.operations.request import run_config
from kafka_rebalancer.run_folder import RunFolder

_CLUSTER_CHECK_TIMEOUT_S = 10.0  # `pools` and `overrides revert` do their own work first: a dead cluster is a line


def operate(args: argparse.Namespace, connect: Callable[[RebalancerConfig], Any],
            plan: Callable[[RebalancerConfig, RunFolder, str], object],
            confirm: Callable[[str], bool] | None = None) -> int:
    """One manual operation end to end; returns the exit code."""
    from kafka_rebalancer.approve.approval import PlanFacts, approval_body, write_decision
    from kafka_rebalancer.execute.executor import run_execute
    from kafka_rebalancer.operations.request import record_override
    from kafka_rebalancer.snapshot.start import start_run
    from kafka_rebalancer.validate.suite import validate_plan

    if args.throttle_bytes_per_s is not None and args.throttle_bytes_per_s < 1:
        raise RebalancerError(f"--throttle-bytes-per-s must be a positive number of bytes, got "
                              f"{args.throttle_bytes_per_s}")
    action = COMMANDS[args.command]
    run_id = f"cli__{action.name}__{datetime.now(UTC).strftime('%Y-%m-%dT%H-%M-%SZ')}"
    run = start_run(args.config, run_id, request_params(action, args), connect)
    config = run_config(args.config, run)
    if action.plans:
        plan(config, run, args.spark_master)
    with libraries_to_file(run.path / RUN_LOG):  # great-expectations' notes: the run's log, not the terminal
        validate_plan(config, run)
    facts = PlanFacts.read(config, run, args.throttle_bytes_per_s)
    print(approval_body(config, run, facts, []))
    if not args.apply:
        write_decision(run, facts.plan_hash, "dry-run", current_user(), "dry run (no --apply)")
        print(f"\ndry run: nothing changed. To execute this plan after review: kafka-rebalancer execute-reviewed "
              f"--config {args.config} --run-id {run.path.name} --apply")
        return 0
    if not args.yes:
        if confirm is None or not sys.stdin.isatty():
            raise RebalancerError("--apply asks for confirmation on a terminal; pass --yes to execute without "
                                  "asking (scripts)")
        if not confirm(f"Execute plan {facts.plan_hash[:12]} on cluster {config.cluster.name}? Type 'yes': "):
            write_decision(run, facts.plan_hash, "rejected", current_user(), "not confirmed on the terminal")
            print("not confirmed: nothing changed")
            return 2
    write_decision(run, facts.plan_hash, "approved", current_user(), "confirmed with --apply"
                   + (" --yes" if args.yes else " on the terminal"))
    override = record_override(config, run, current_user())
    if override is not None:
        print(f"pool override recorded: {override.describe()}")
    connection = connect(config)
    for pool in sorted(config.pools):
        result = run_execute(config, connection, run, pool, dry_run=False,
                             throttle_bytes_per_s=args.throttle_bytes_per_s, require_approval=True)
        print(f"{pool}: {result['completed']}/{result['moves']} moves complete, {len(result['skipped'])} skipped")
    verify_and_unregister(config, connection, run)
    return 0


def verify_and_unregister(config: RebalancerConfig, connection: Any, run: RunFolder) -> None:
    """The run's verify, then, for a drain that asked for it, its brokers unregistered (`verify --run-id` of such a
    drain tries that again after a refusal)."""
    from kafka_rebalancer.verify.unregister import unregister_drained
    from kafka_rebalancer.verify.verification import verify_run

    summary = verify_run(config, connection, run)
    print(f"out of band: {summary['out_of_band_before']} before, {summary['out_of_band_after']} after")
    unregistered = unregister_drained(config, connection, run)
    for broker, outcome in (unregistered or {}).get("brokers", {}).items():
        print(f"broker {broker}: {outcome}")


def overrides_command(args: argparse.Namespace, connect: Callable[[RebalancerConfig], Any]) -> int:
    config = run_config(args.config)  # also checks that every stored override still fits
    store = OverrideStore.of(config)
    if args.verb == "revert":
        if args.id is None:
            raise RebalancerError("overrides revert needs the override's id (see: kafka-rebalancer overrides list)")
        from kafka_rebalancer.execute.cordon import revert_override

        reverted, uncordoned = revert_override(store, args.id, current_user(), lambda: _reachable(config, connect))
        print(f"reverted {reverted.describe()}; the next run plans with the config's pools for these brokers")
        if uncordoned is not None:
            print(uncordoned)
        return 0
    overrides = store.read()
    if not overrides:
        print(f"no pool overrides ({store.path})")
    for o in overrides:
        print(f"{o.describe()}  [{o.state}] by {o.requested_by}"
              + (f", approved by {o.approved_by}" if o.approved_by else "")
              + f", {o.created_at}, run {o.run_id}: {o.reason}")
    return 0


def pools_command(args: argparse.Namespace, connect: Callable[[RebalancerConfig], Any]) -> int:
    from kafka_rebalancer.config import load_config
    from kafka_rebalancer.execute.cordon import cordon_report

    base = load_config(args.config)
    result = layout(base, OverrideStore.of(base).active())
    for pool in sorted(result.pools):
        print(f"{pool}:")
        for b in sorted(result.pools[pool]):
            print(f"  broker {b:<6} {result.broker_source[b]}")
        for (pattern, rule_pool), source in zip(result.topic_rules, result.rule_source, strict=True):
            if rule_pool == pool:
                print(f"  topics {pattern!r:<20} {source}")
        if base.default_pool == pool:
            print(f"  topics (default)       {CONFIG}")
    for b, source in sorted(result.drained.items()):
        print(f"drained: broker {b} ({source}; in no pool)")
    print(_on_cluster(base, connect, cordon_report, "cordoned brokers: not shown"))
    print(fenced_brokers(base, connect))
    return 0


def fenced_brokers(config: RebalancerConfig, connect: Callable[[RebalancerConfig], Any]) -> str:
    """The fenced brokers that hold nothing, for `pools` and `status` (Kafka's ClusterTool lists fenced brokers:
    the Python clients cannot); one line saying why not where they cannot be listed."""
    from kafka_rebalancer.kafka_cluster_tool import ClusterTool
    from kafka_rebalancer.verify.unregister import fenced_report

    return _on_cluster(config, connect, lambda admin: fenced_report(
        admin, ClusterTool(admin.connection, config.cluster.kafka_libs)), "fenced brokers: not shown")


def _on_cluster(config: RebalancerConfig, connect: Callable[[RebalancerConfig], Any],
                read: Callable[[Any], str], failed: str) -> str:
    """`read(admin)` on the config's cluster, for a command whose own work needs no cluster: a cluster that
    cannot be reached is one line (`failed`, and why), not an error."""
    try:
        with _reachable(config, connect) as admin:
            return read(admin)
    except RebalancerError as exc:  # unreachable, no bootstrap servers set, a permission missing
        return f"{failed} ({exc})"
    except Exception as exc:  # noqa: BLE001 - a broker's error answer; the command's own work stands
        return f"{failed} ({type(exc).__name__}: {exc})"


@contextmanager
def _reachable(config: RebalancerConfig, connect: Callable[[RebalancerConfig], Any]) -> Iterator[Any]:
    """An admin client of the config's cluster, once the cluster answers (RebalancerError when it does not)."""
    from kafka_rebalancer.kafka_admin import ClusterAdmin

    with ClusterAdmin(connect(config)) as admin:
        admin.check_reachable(timeout_s=_CLUSTER_CHECK_TIMEOUT_S)
        yield admin
