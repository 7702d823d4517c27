"""kafka-rebalancer: the pipeline's steps from a terminal, running the same library code as the DAG.

    kafka-rebalancer snapshot --config C [--run-id ID]     capture the cluster into a new run folder
    kafka-rebalancer plan     --config C [--run-id ID]     plan with a local Spark session
    kafka-rebalancer validate --config C [--run-id ID]     the great-expectations suite on the plan
    kafka-rebalancer execute  --config C [--run-id ID] [--pool P] [--apply] [--throttle-bytes-per-s B]
                              [--resume-cancelled]         dry-run unless --apply is given
    kafka-rebalancer cancel   --config C [--run-id ID] [--pool P]
                                                           stop the run's reassignments, clear throttles
    kafka-rebalancer verify   --config C [--run-id ID]     fresh snapshot, band status before/after (a drain
                                                           with --unregister: then unregisters its brokers)
    kafka-rebalancer status   --config C                   band status of the cluster now, reassignments,
                                                           cordoned brokers, fenced brokers holding nothing
    kafka-rebalancer capacity --config C                   growth forecast per pool (disk at +7/+30/+90 days, days
                                                           until a broker and the pool cross the threshold); no plan
    kafka-rebalancer runs     --config C [--limit N]       the cluster's runs (CLI and Airflow), newest first
    kafka-rebalancer runs     --all [--config-dir D]       every cluster's of the fleet folder (README: Fleet);
                                                           events --all likewise
    kafka-rebalancer fleet    [--config-dir D]             the folder's clusters, schedules, the Airflow pool
    kafka-rebalancer show     --config C [RUN]             a run's summary: bands, largest moves, validation, execution
    kafka-rebalancer report   --config C [RUN]             (re)build the run's report/index.html, print its path
    kafka-rebalancer assign   --brokers 1,2,3 --partitions N --replication-factor R [--racks 1:a,2:b,3:c]
                              [--fixed-start-index I] [--start-partition-id P] [--topic T]
                                                           Kafka's own placement, as reassignment JSON

Manual operations (snapshot, plan, validate, summary in a new run folder; executed only with --apply, after
confirming on the terminal or with --yes):
    kafka-rebalancer isolate        --config C --topics 'payments.*' --pool P [--brokers 7,8] --reason R
    kafka-rebalancer drain          --config C --brokers 14 --reason R
    kafka-rebalancer add-brokers    --config C --brokers 7,8,9 --pool P --reason R
    kafka-rebalancer rebalance-pool --config C --pool P
    kafka-rebalancer elect-leaders  --config C [--pool P] [--topics T]
    kafka-rebalancer demote         --config C --brokers 7
    kafka-rebalancer change-replication-factor --config C --topics '__consumer_offsets,orders.*'
                                    --replication-factor 3   replicas added or removed (internal topics too)
    kafka-rebalancer execute-reviewed --config C --run-id ID  the plan of an earlier dry run
    kafka-rebalancer overrides      --config C list | revert ID
    kafka-rebalancer pools          --config C             effective pools, and where each broker and rule
                                                           comes from (config or an override); cordoned brokers,
                                                           fenced brokers holding nothing

Without --run-id, every step after `snapshot` works on the cluster's latest run whose snapshot completed; `cancel`
works on the runs whose reassignments are in flight (else the run that executed last, for its throttles).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from concurrent.futures import Future
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from kafka_rebalancer.cli.commands import COMMANDS, add_parsers
from kafka_rebalancer.cli.fleet import add_config_dir_argument, add_fleet_arguments
from kafka_rebalancer.errors import RebalancerError, UnreachableError
from kafka_rebalancer.log_setup import FORMAT, RUN_LOG, libraries_to_file, quiet_libraries

# The rest of the package is imported where it is used: `plan` starts its Spark JVM (~2 s) as soon as its snapshot
# is checked, and the planner's imports (~1 s) run meanwhile on the other core.
if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from rich.console import Console

    from kafka_rebalancer.config import RebalancerConfig
    from kafka_rebalancer.kafka_admin import KafkaConnection
    from kafka_rebalancer.run_folder import RunFolder

# Exit codes (README: "Exit codes"): 0 done; 1 a fault of the product's own (one line, the traceback in a file);
# 2 bad input, or refused before or while changing the cluster (the message says which, and what was left); 3 no
# broker answered; 130 interrupted. argparse's usage errors are 2 as well.
EXIT_FAULT, EXIT_REFUSED, EXIT_UNREACHABLE, EXIT_INTERRUPTED = 1, 2, 3, 130
RUN_STEPS = ("snapshot", "plan", "validate", "execute", "verify")  # the commands that work on a run

def connection_for(config: RebalancerConfig, bootstrap: str | None) -> KafkaConnection:
    from kafka_rebalancer.kafka_admin import KafkaConnection

    servers = bootstrap or config.cluster.bootstrap_servers
    if not servers:
        raise RebalancerError(f"{config.source_file}: cluster.bootstrap_servers is not set; set it (or "
                              "${KAFKA_BOOTSTRAP_SERVERS} in it) or pass --bootstrap-servers")
    return KafkaConnection(servers, dict(config.cluster.client_config), config.cluster.request_timeout_s)


def _new_run(config: RebalancerConfig, run_id: str | None) -> RunFolder:
    from kafka_rebalancer.run_folder import RunFolder

    run_id = run_id or "cli__" + datetime.now(UTC).strftime("%Y-%m-%dT%H-%M-%SZ")
    run = RunFolder(config.run_dir(run_id))
    run.path.mkdir(parents=True, exist_ok=True)
    return run


def positive_int(text: str) -> int:
    """argparse type of counts and rates: a zero or negative throttle is a mistake, not "the default"."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {value}")
    return value


def _chosen_pools(given: list[str] | None, known: list[str], where: str) -> list[str]:
    unknown = sorted(set(given or []) - set(known))
    if unknown:
        raise RebalancerError(f"--pool {', '.join(unknown)}: no such pool in {where}; pools: {', '.join(known)}")
    return given or known


def _spark(master: str) -> SparkSession:
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from kafka_rebalancer.log_setup import library_output
    from kafka_rebalancer.spark_settings import plan_spark_conf

    # No stage bars from Spark: the plan draws its own progress on the terminal.
    conf = SparkConf().setMaster(master).setAppName("kafka-rebalancer-plan").setAll(
        [("spark.ui.enabled", "false"), ("spark.ui.showConsoleProgress", "false"), *plan_spark_conf().items()])
    output = library_output()
    if output is not None and SparkContext._active_spark_context is None:
        from pyspark.java_gateway import launch_gateway

        # The driver JVM as SparkContext would launch it, but printing into the run's log file (Spark's and
        # log4j's start-up lines, the JVM's warnings, its Python workers' output) instead of on the terminal.
        gateway = launch_gateway(conf, popen_kwargs={"stdout": output, "stderr": output})
        SparkContext(conf=conf, gateway=gateway)
    return SparkSession.builder.config(conf=conf).getOrCreate()


class _SparkStart:
    """`_spark` on a thread of its own, begun as soon as `plan`'s snapshot is checked: the JVM starts while the main
    thread imports the planner. A session the plan did not take (it stopped on bad input first) is waited for and
    stopped, so no JVM outlives the command."""

    def __init__(self, master: str) -> None:
        import pyspark.sql  # noqa: F401 - here, so the two threads never import the same modules at once

        self.session: Future[SparkSession] = Future()
        self.taken = False
        threading.Thread(target=self._start, args=(master,), name="spark-start").start()

    def _start(self, master: str) -> None:
        try:
            self.session.set_result(_spark(master))
        except BaseException as exc:  # noqa: BLE001 - raised where the plan takes the session
            self.session.set_exception(exc)

    def take(self) -> SparkSession:
        self.taken = True
        return self.session.result()

    def close(self) -> None:
        if not self.taken and self.session.exception() is None:
            self.session.result().stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kafka-rebalancer", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("snapshot", "plan", "validate", "execute", "cancel", "verify", "status", "capacity"):
        p = sub.add_parser(name)
        p.add_argument("--config", required=True, type=Path)
        if name not in ("status", "capacity"):
            p.add_argument("--run-id")
        if name in ("snapshot", "execute", "cancel", "verify", "status", "capacity"):
            p.add_argument("--bootstrap-servers", help="overrides cluster.bootstrap_servers")
        if name == "plan":
            p.add_argument("--spark-master", default="local[2]")
        if name in ("execute", "cancel"):
            p.add_argument("--pool", action="append", help="only this pool (repeatable); default: all pools")
        if name == "execute":
            p.add_argument("--apply", action="store_true", help="really execute; without it, a dry run")
            p.add_argument("--throttle-bytes-per-s", type=positive_int,
                           help="replication throttle per broker; default: execution.throttle_bytes_per_s")
            p.add_argument("--resume-cancelled", action="store_true",
                           help="execute a pool of this run even though it was cancelled")
    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--config", required=True, type=Path)
        p.add_argument("--bootstrap-servers", help="overrides cluster.bootstrap_servers")

    add_parsers(sub, common)
    runs = sub.add_parser("runs", help="the cluster's runs, newest first (CLI and Airflow alike)")
    add_fleet_arguments(runs, "the runs")
    runs.add_argument("--limit", type=positive_int, default=30)
    events = sub.add_parser("events", help="what the cluster's watcher saw and the decisions taken, newest first")
    add_fleet_arguments(events, "the events")
    events.add_argument("--limit", type=positive_int, default=50)
    fleet = sub.add_parser("fleet", help="the fleet folder's clusters, their nightly schedules, the Airflow pool")
    add_config_dir_argument(fleet)
    show = sub.add_parser("show", help="a run's summary: bands before -> after, largest moves, validation, execution")
    show.add_argument("--config", required=True, type=Path)
    show.add_argument("run_id", nargs="?", help="default: the newest run")
    report = sub.add_parser("report", help="(re)build a run's report/index.html and print its path")
    report.add_argument("--config", required=True, type=Path)
    report.add_argument("run_id", nargs="?", help="default: the newest run")
    notify_test = sub.add_parser("notify-test", help="send one test message on every configured notification "
                                                     "channel and say which worked")
    notify_test.add_argument("--config", required=True, type=Path)
    assign = sub.add_parser("assign", help="Kafka's assignReplicasToBrokers, printed as reassignment JSON")
    assign.add_argument("--brokers", required=True, help="broker ids in order, e.g. 1,2,3")
    assign.add_argument("--partitions", required=True, type=int)
    assign.add_argument("--replication-factor", required=True, type=int)
    assign.add_argument("--racks", help="broker:rack pairs, e.g. 1:a,2:b,3:c (rack-aware placement)")
    assign.add_argument("--fixed-start-index", type=int, default=-1)
    assign.add_argument("--start-partition-id", type=int, default=-1)
    assign.add_argument("--topic", default="topic")
    args = parser.parse_args(argv)
    try:
        from kafka_rebalancer import terminal_progress

        logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format=FORMAT)
        quiet_libraries()
        with terminal_progress.bars_on(sys.stderr):
            return _dispatch(args)
    except UnreachableError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except RebalancerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except KeyboardInterrupt:
        print(f"kafka-rebalancer {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - a fault of ours: one line to the operator, the traceback to a file
        print(f"kafka-rebalancer {args.command}: unexpected error: {type(exc).__name__}: {exc} (full traceback "
              f"in {_traceback_file(args.command)}; please report it)", file=sys.stderr)
        return EXIT_FAULT


def _traceback_file(command: str) -> Path:
    """The current exception's traceback, written where the operator can attach it to a report."""
    import tempfile
    import traceback

    folder = Path(tempfile.gettempdir()) / "kafka-rebalancer-errors"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{datetime.now(UTC).strftime('%Y-%m-%dT%H-%M-%SZ')}-{command}-{os.getpid()}.txt"
    path.write_text(f"kafka-rebalancer {' '.join(sys.argv[1:])}\n{traceback.format_exc()}")
    return path


def _assign(args: argparse.Namespace) -> int:
    from kafka_rebalancer.assignment import assign_replicas_to_brokers
    from kafka_rebalancer.model.reassignment import dumps

    try:
        brokers = [int(b) for b in args.brokers.split(",")]
        racks = {int(b): r for b, r in (pair.split(":", 1) for pair in args.racks.split(","))} if args.racks else None
    except ValueError:
        raise RebalancerError("--brokers takes ids like 1,2,3 and --racks pairs like 1:a,2:b") from None
    try:
        result = assign_replicas_to_brokers(brokers, args.partitions, args.replication_factor, racks=racks,
                                            fixed_start_index=args.fixed_start_index,
                                            start_partition_id=args.start_partition_id)
    except ValueError as exc:
        raise RebalancerError(str(exc)) from exc
    print(dumps({"version": 1, "partitions": [{"topic": args.topic, "partition": p, "replicas": r}
                                              for p, r in sorted(result.items())]}), end="")
    return 0


def _notify_test(args: argparse.Namespace) -> int:
    """One test message per channel, sent now (not recorded: a test is never a duplicate). Exit 2 when a channel
    failed or none is configured. The connections are Airflow's: run it where Airflow's connections resolve."""
    from kafka_rebalancer.config import load_config
    from kafka_rebalancer.notify.channels import send_on_channel
    from kafka_rebalancer.notify.messages import test_notice

    config = load_config(args.config)
    channels = config.notifications.channels
    if not channels:
        print("no channels under notifications.channels in the config: nothing sent")
        return EXIT_REFUSED
    results = [send_on_channel(name, channel, test_notice(config.cluster.name, name))
               for name, channel in channels.items()]
    for result in results:
        channel = channels[result.channel]
        outcome = "sent" if result.ok else f"FAILED: {result.error}"
        print(f"{result.channel} ({channel.kind}, connection {channel.airflow_connection_id}): {outcome}")
    return 0 if all(r.ok for r in results) else EXIT_REFUSED


def _dispatch(args: argparse.Namespace) -> int:
    from kafka_rebalancer.cli import operations as operations_cli
    from kafka_rebalancer.operations.request import run_config

    if args.command == "assign":
        return _assign(args)
    if args.command == "notify-test":
        return _notify_test(args)
    if args.command == "overrides":
        return operations_cli.overrides_command(args, lambda c: connection_for(c, args.bootstrap_servers))
    if args.command == "pools":
        return operations_cli.pools_command(args, lambda c: connection_for(c, args.bootstrap_servers))
    if args.command == "fleet" or getattr(args, "all", False):
        return _fleet(args)
    config = run_config(args.config)
    if args.command in COMMANDS or args.command in RUN_STEPS:
        from kafka_rebalancer.holds.claims import command_holds_pools

        # While it works on a run, the command holds every pool: automation starts no run on them meanwhile.
        with command_holds_pools(config, args.command, getattr(args, "run_id", None), config.pools):
            if args.command in COMMANDS:
                return operations_cli.operate(args, lambda c: connection_for(c, args.bootstrap_servers),
                                              _plan_locally, _confirm)
            return _run_step(args, config)
    if args.command in ("runs", "show", "report"):
        return _review(args, config)
    if args.command == "events":
        return _events(config, args.limit)
    if args.command == "status":
        _status(config, connection_for(config, args.bootstrap_servers))
        return 0
    if args.command == "capacity":
        from kafka_rebalancer.cli.capacity import capacity_command

        return capacity_command(config, connection_for(config, args.bootstrap_servers), _console())
    assert args.command == "cancel", args.command  # argparse knows every command; this is the last
    return _cancel(args, config)


def _run_step(args: argparse.Namespace, config: RebalancerConfig) -> int:
    from kafka_rebalancer.operations.request import run_config
    from kafka_rebalancer.runs import existing_run, mark_latest

    run = _new_run(config, args.run_id) if args.command == "snapshot" else existing_run(config, args.run_id)
    config = run_config(args.config, run)
    if args.command == "snapshot":
        from kafka_rebalancer.snapshot import take_snapshot

        manifest = take_snapshot(config, connection_for(config, args.bootstrap_servers), run)
        mark_latest(config, run)
        print(f"{run.path}: {manifest['rows']} (hash {manifest['content_hash'][:12]})")
    elif args.command == "plan":
        from kafka_rebalancer.run_folder import SNAPSHOT
        from kafka_rebalancer.snapshot.store import check_snapshot

        run.require(SNAPSHOT)  # before Spark starts: a changed snapshot never reaches it
        with libraries_to_file(run_log(run)):
            starting = _SparkStart(args.spark_master)
            from kafka_rebalancer.plan.summary import totals_sentence

            try:
                check_snapshot(run)  # one written before records began: its rows, while the JVM starts
                summary = _plan_locally(config, run, args.spark_master, starting)
            finally:
                starting.close()
        print(f"plan {summary['plan_hash'][:12]}: {totals_sentence(summary['totals'])}")
    elif args.command == "validate":
        from kafka_rebalancer.validate.suite import validate_plan

        with libraries_to_file(run_log(run)):
            report = validate_plan(config, run)
        print(f"plan {report['plan_hash'][:12]} passed {report['expectations']} expectations")
    elif args.command == "execute":
        from kafka_rebalancer.execute.executor import run_execute

        pools = _chosen_pools(args.pool, sorted(config.pools), f"the config {config.source_file}")
        connection = connection_for(config, args.bootstrap_servers)
        for pool in pools:
            result = run_execute(config, connection, run, pool, dry_run=not args.apply,
                                 throttle_bytes_per_s=args.throttle_bytes_per_s,
                                 resume_cancelled=args.resume_cancelled)
            if result.get("dry_run"):
                print(f"{pool}: dry run, {len(result['moves'])} move(s); pass --apply to execute")
            else:
                print(f"{pool}: {result['completed']}/{result['moves']} moves complete, "
                      f"{len(result['skipped'])} skipped")
    else:  # verify
        from kafka_rebalancer.cli.operations import verify_and_unregister

        verify_and_unregister(config, connection_for(config, args.bootstrap_servers), run)
    return 0


def _fleet(args: argparse.Namespace) -> int:
    """`fleet`, `runs --all`, `events --all`: what loads is shown, a file that does not is named (exit code 2)."""
    from kafka_rebalancer.cli import fleet as fleet_cli

    fleet = fleet_cli.fleet_of(args)
    if args.command == "fleet":
        fleet_cli.fleet_command(fleet)
    elif args.command == "runs":
        fleet_cli.runs_all(fleet, _console(), args.limit)
    else:
        fleet_cli.events_all(fleet, args.limit)
    return EXIT_REFUSED if fleet_cli.report_broken(fleet) else 0


def _events(config: RebalancerConfig, limit: int) -> int:
    from kafka_rebalancer.automation.events_log import automation_dir, event_line, read_events

    entries = read_events(config)
    if not entries:
        print(f"no events recorded under {automation_dir(config)} (the watcher runs while the events DAG is unpaused)")
    for entry in reversed(entries[-limit:]):
        print(event_line(entry))
    return 0


def _latest_events(config: RebalancerConfig, shown: int = 5) -> None:
    """Below the runs, the watcher's latest events and what they started, when there are any."""
    from kafka_rebalancer.automation.events_log import event_line, read_events

    entries = read_events(config)
    if entries:
        print(f"latest events of the cluster's watcher ({len(entries)} recorded; kafka-rebalancer events for more):")
        for entry in reversed(entries[-shown:]):
            print("  " + event_line(entry))


def _console() -> Console:
    from rich.console import Console

    return Console(width=None if sys.stdout.isatty() else 1000, markup=False, highlight=False)  # pipes: no wrap


def _review(args: argparse.Namespace, config: RebalancerConfig) -> int:
    from kafka_rebalancer.cli.tables import runs_table, show_run
    from kafka_rebalancer.report.overview import list_runs
    from kafka_rebalancer.runs import existing_run

    console = _console()
    if args.command == "runs":
        runs = list_runs(config.run_root, config.cluster.name)
        if not runs:
            print(f"no runs under {config.run_root / config.cluster.name}")
        runs_table(console, runs[:args.limit])
        _latest_events(config)
        return 0
    if args.run_id is None:  # the newest run, by the CLI or by Airflow
        runs = list_runs(config.run_root, config.cluster.name)
        if not runs:
            raise RebalancerError(f"no runs under {config.run_root / config.cluster.name}")
        args.run_id = runs[0].run_id
    run = existing_run(config, args.run_id)
    run.check_stages()  # a run whose files changed since they were written is refused, not shown
    if args.command == "report":
        from kafka_rebalancer.report.run_report import write_report

        print(write_report(run))
        return 0
    show_run(console, run)
    return 0


def _cancel(args: argparse.Namespace, config: RebalancerConfig) -> int:
    """The brake: the given run, else every run whose reassignments are in flight (else the run that executed
    last, for its throttles). Depends on nothing but the run folder and the cluster."""
    from kafka_rebalancer.execute.cancel import run_cancel
    from kafka_rebalancer.execute.moves import run_pools
    from kafka_rebalancer.kafka_admin import ClusterAdmin
    from kafka_rebalancer.runs import existing_run, runs_to_cancel

    connection = connection_for(config, args.bootstrap_servers)
    if args.run_id is not None:
        runs = [existing_run(config, args.run_id)]
    else:
        with ClusterAdmin(connection) as admin:
            admin.check_reachable()
            runs = runs_to_cancel(config, admin.list_reassignments())
    for run in runs:
        print(f"cancelling run {run.path.name}")
        planned = run_pools(run)  # a pool of the config may be named too: the run's own list may be unreadable
        for pool in _chosen_pools(args.pool, sorted(set(planned) | set(config.pools)), f"run {run.path.name}") \
                if args.pool else planned:
            result = run_cancel(config, connection, run, pool)
            print(f"{pool}: cancelled {len(result['cancelled'])} reassignment(s), throttles "
                  + ("cleared" if result["throttles_cleared"] else "NOT all cleared (a broker down?)")
                  + (f"; still in progress: {result['still_in_progress']}" if result["still_in_progress"] else ""))
    return 0


def _plan_locally(config: RebalancerConfig, run: RunFolder, spark_master: str,
                  starting: _SparkStart | None = None) -> dict:
    """Plan with a local Spark session: the one `starting` began, else a new one; what the libraries print goes to
    the run's log file (`run_log`)."""
    from kafka_rebalancer.plan.job import SessionStop, run_plan

    with libraries_to_file(run_log(run)):
        spark = starting.take() if starting is not None else _spark(spark_master)
        stop = SessionStop(spark)
        try:
            return run_plan(spark, config, run, release=stop)
        finally:
            stop.join()


def run_log(run: RunFolder) -> Path:
    """The run's log file of the CLI's plan and validate: the product's log records and, around them, what the
    libraries print (the terminal shows the product's lines only)."""
    return run.path / RUN_LOG


def _confirm(question: str) -> bool:
    from kafka_rebalancer import terminal_progress

    with terminal_progress.paused():
        return input(question).strip().lower() == "yes"


def _status(config: RebalancerConfig, connection: KafkaConnection) -> None:
    from kafka_rebalancer.cli.operations import fenced_brokers
    from kafka_rebalancer.execute.cordon import cordon_report
    from kafka_rebalancer.kafka_admin import ClusterAdmin
    from kafka_rebalancer.model.band_status import band_status, broker_load_frame
    from kafka_rebalancer.plan.balance.pool_bands import bands_frame
    from kafka_rebalancer.plan.balance.tables import band_table
    from kafka_rebalancer.runs import executions_in_progress
    from kafka_rebalancer.snapshot import capture

    tables, _ = capture(config, connection)
    load = broker_load_frame(tables.brokers, tables.replicas, config.resource_list())
    print(band_table(band_status(load, bands_frame(load, config))))
    with ClusterAdmin(connection) as admin:
        ongoing = admin.list_reassignments()
        cordons = cordon_report(admin)
    print(f"reassignments in progress: {len(ongoing)}")
    for (topic, partition), state in sorted(ongoing.items()):
        print(f"  {topic}-{partition}: adding {state['adding_replicas']}, removing {state['removing_replicas']}")
    for line in executions_in_progress(config):
        print(line)
    print(cordons)
    print(fenced_brokers(config, lambda _: connection))


if __name__ == "__main__":
    sys.exit(main())
