"""A fleet folder (KAFKA_REBALANCER_CONFIG_DIR): which files are clusters, duplicates and broken files refused
alone, fleet.yaml's settings, each cluster's nightly schedule (its own or spread over the night), and the clusters
the DAG files build from it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kafka_rebalancer import fleet as fleet_module
from kafka_rebalancer.access_settings import dag_access_control
from kafka_rebalancer.airflow import deployment
from kafka_rebalancer.cli import main
from kafka_rebalancer.config import load_config
from kafka_rebalancer.errors import ConfigError
from kafka_rebalancer.fleet import FleetSettings, NightSettings, load_fleet, nightly_schedules
from tests.helpers import write_config


def cluster_config(name: str, **more: Any) -> dict[str, Any]:
    return {"cluster": {"name": name}, "pools": {"pool-a": {"brokers": [1, 2, 3]}},
            "capacity": {"default": {"disk_bytes": "1TiB"}}, **more}


def test_fleet_every_yaml_with_a_cluster_section_is_a_cluster(tmp_path: Path) -> None:
    write_config(tmp_path / "eu.yaml", cluster_config("prod-eu", schedule="30 1 * * *"))
    write_config(tmp_path / "us.yaml", cluster_config("prod-us"))
    write_config(tmp_path / "capacity.yaml", {"brokers": {1: {"disk_bytes": "1TiB"}}})  # not a cluster
    (tmp_path / "capacity.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("cluster: no")
    fleet = load_fleet(tmp_path)
    assert [(c.name, c.config_file.name, c.schedule) for c in fleet.clusters] == [
        ("prod-eu", "eu.yaml", "30 1 * * *"), ("prod-us", "us.yaml", "0 0 * * *")]
    assert fleet.broken == () and fleet.settings == FleetSettings()


def test_fleet_two_files_naming_one_cluster_are_both_refused_naming_each_other(tmp_path: Path) -> None:
    write_config(tmp_path / "a.yaml", cluster_config("prod-eu"))
    write_config(tmp_path / "b.yaml", cluster_config("prod-eu"))
    write_config(tmp_path / "c.yaml", cluster_config("prod-us"))
    fleet = load_fleet(tmp_path)
    assert [c.name for c in fleet.clusters] == ["prod-us"]
    a, b = fleet.broken
    assert (a.file.name, a.error.field) == ("a.yaml", "cluster.name") and str(tmp_path / "b.yaml") in str(a.error)
    assert b.file.name == "b.yaml" and str(tmp_path / "a.yaml") in str(b.error)
    assert "also named by" in a.error.message


def test_fleet_a_broken_config_breaks_only_itself_with_the_loaders_error(tmp_path: Path) -> None:
    write_config(tmp_path / "good.yaml", cluster_config("prod-eu"))
    write_config(tmp_path / "typo.yaml", cluster_config("prod-us", execution={"max_moves_per_brokr": 3}))
    (tmp_path / "bad-yaml.yaml").write_text("cluster: [unclosed\n")
    write_config(tmp_path / "cron.yaml", cluster_config("prod-ap", schedule="at two"))
    fleet = load_fleet(tmp_path)
    assert [c.name for c in fleet.clusters] == ["prod-eu"]
    errors = {b.file.name: b.error for b in fleet.broken}
    assert set(errors) == {"typo.yaml", "bad-yaml.yaml", "cron.yaml"}
    assert errors["typo.yaml"].field == "execution.max_moves_per_brokr"
    assert "unknown field" in errors["typo.yaml"].message
    assert "not valid YAML" in errors["bad-yaml.yaml"].message
    assert errors["cron.yaml"].field == "schedule" and "cron expression" in errors["cron.yaml"].message
    for file, error in errors.items():
        assert error.file == str(tmp_path / file)


def test_fleet_settings_from_fleet_yaml(tmp_path: Path) -> None:
    write_config(tmp_path / "fleet.yaml", {"max_concurrent_executions": 2, "night": {"start": "22:00", "end": "02:00"}})
    write_config(tmp_path / "eu.yaml", cluster_config("prod-eu"))
    fleet = load_fleet(tmp_path)
    assert fleet.settings.max_concurrent_executions == 2 and [c.schedule for c in fleet.clusters] == ["0 22 * * *"]


def test_fleet_a_broken_fleet_yaml_is_reported_and_the_defaults_hold(tmp_path: Path) -> None:
    write_config(tmp_path / "fleet.yaml", {"max_concurrent_executions": 0})
    write_config(tmp_path / "eu.yaml", cluster_config("prod-eu"))
    fleet = load_fleet(tmp_path)
    assert [c.name for c in fleet.clusters] == ["prod-eu"] and fleet.settings == FleetSettings()
    (broken,) = fleet.broken
    assert broken.error.field == "max_concurrent_executions" and "greater than or equal to 1" in str(broken.error)


def test_fleet_not_a_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a folder"):
        load_fleet(tmp_path / "missing")


def test_fleet_schedules_spread_over_the_night_one_minute_each(tmp_path: Path) -> None:
    configs = [load_config(write_config(tmp_path / f"c{i}.yaml", cluster_config(f"cluster-{i:02d}")))
               for i in range(20)]
    schedules = nightly_schedules(configs, NightSettings())
    starts = [(int(s.split()[1]), int(s.split()[0])) for s in schedules.values()]
    assert len(set(starts)) == 20 and all(0 <= hour < 4 for hour, _ in starts)
    assert schedules["cluster-00"] == "0 0 * * *" and schedules["cluster-01"] == "12 0 * * *"  # 240 min / 20
    assert nightly_schedules(list(reversed(configs)), NightSettings()) == schedules  # the order of files: no matter


def test_fleet_a_night_past_midnight(tmp_path: Path) -> None:
    night = NightSettings(start="23:00", end="01:00")
    assert night.minutes() == (23 * 60, 120)
    configs = [load_config(write_config(tmp_path / f"c{i}.yaml", cluster_config(f"c{i}"))) for i in range(4)]
    assert nightly_schedules(configs, night) == {"c0": "0 23 * * *", "c1": "30 23 * * *", "c2": "0 0 * * *",
                                                 "c3": "30 0 * * *"}


def test_fleet_schedule_is_out_of_the_fingerprint(tmp_path: Path) -> None:
    """Approved plans stay approved when a config gains a schedule or an access control."""
    plain = load_config(write_config(tmp_path / "a.yaml", cluster_config("prod-eu")))
    scheduled = load_config(write_config(tmp_path / "b.yaml", cluster_config(
        "prod-eu", schedule="15 3 * * *", access_control={"team-eu": {"dags": ["can_read", "can_edit"]}})))
    assert plain.fingerprint() == scheduled.fingerprint()


def test_fleet_access_control_becomes_the_dags_access_control(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path / "eu.yaml", cluster_config("prod-eu", access_control={
        "team-eu": {"dags": ["can_read", "can_edit"], "dag_runs": ["can_create"]}, "auditors": {}})))
    assert dag_access_control(config.access_control) == {
        "team-eu": {"DAGs": {"can_read", "can_edit"}, "DAG Runs": {"can_create"}}, "auditors": {"DAGs": {"can_read"}}}
    assert dag_access_control(load_config(write_config(tmp_path / "us.yaml", cluster_config("prod-us")))
                              .access_control) is None  # none named: Airflow's own roles decide


def test_fleet_access_control_refuses_an_unknown_permission(tmp_path: Path) -> None:
    path = write_config(tmp_path / "eu.yaml", cluster_config("prod-eu", access_control={
        "team-eu": {"dags": ["can_create"]}}))
    with pytest.raises(ConfigError, match=r"eu.yaml: access_control.team-eu.dags\[0\]: .*'can_read', 'can_edit' or "
                                          r"'can_delete' \(got 'can_create'\)"):
        load_config(path)


def test_fleet_deployment_without_a_folder_is_todays_one_cluster(tmp_path: Path) -> None:
    (single,) = deployment.deployed_clusters(tmp_path / "default.yaml", {})
    assert single.named("kafka_rebalance_nightly") == "kafka_rebalance_nightly"
    assert (single.config_path, single.nightly_schedule, single.execution_pool) == (
        str(tmp_path / "default.yaml"), "0 2 * * *", None)
    assert single.tags("manual") == ["kafka", "rebalance", "manual"]
    env = {"KAFKA_REBALANCER_CONFIG": "/etc/kr.yaml"}
    assert deployment.deployed_clusters(tmp_path / "default.yaml", env)[0].config_path == "/etc/kr.yaml"
    assert deployment.fleet_config_errors({}) == []


def test_fleet_deployment_with_a_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_config(tmp_path / "eu.yaml", cluster_config("prod-eu", access_control={"team-eu": {}}))
    write_config(tmp_path / "bad.yaml", cluster_config("prod-us", pools={}))
    env = {deployment.CONFIG_DIR_ENV: str(tmp_path)}
    (eu,) = deployment.deployed_clusters(tmp_path / "default.yaml", env)
    assert eu.named("kafka_rebalance_nightly") == "kafka_rebalance_nightly__prod-eu"
    assert (eu.config_path, eu.execution_pool) == (str(tmp_path / "eu.yaml"), fleet_module.EXECUTION_POOL)
    assert "cluster:prod-eu" in eu.tags() and eu.access_control == {"team-eu": {"DAGs": {"can_read"}}}
    (error,) = deployment.fleet_config_errors(env)
    assert error.startswith(f"{tmp_path / 'bad.yaml'}: pools: ")
    with pytest.raises(Exception, match="1 config file"):
        deployment.raise_fleet_config_errors(env)
    monkeypatch.chdir(tmp_path.parent)
    (relative,) = deployment.deployed_clusters(tmp_path / "default.yaml", {deployment.CONFIG_DIR_ENV: tmp_path.name})
    assert relative.config_path == str(tmp_path / "eu.yaml")
    missing = {deployment.CONFIG_DIR_ENV: str(tmp_path / "nope")}
    assert deployment.deployed_clusters(tmp_path, missing) == []
    assert "not a folder" in deployment.fleet_config_errors(missing)[0]


def test_fleet_one_name_for_the_folders_variable() -> None:
    assert deployment.CONFIG_DIR_ENV == fleet_module.CONFIG_DIR_ENV


def fleet_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "clusters"
    for name in ("prod-eu", "prod-us"):
        write_config(folder / f"{name}.yaml", cluster_config(name, run_root=str(tmp_path / "runs")))
        (tmp_path / "runs" / name / f"manual__{name}").mkdir(parents=True)
        events = tmp_path / "runs" / name / ".automation" / "events.jsonl"
        events.parent.mkdir()
        at = 1_790_000_000 if name == "prod-eu" else 1_790_000_100
        events.write_text(json.dumps({"at": at, "kind": "broker_lost", "broker_id": 3, "decision": "started",
                                      "action": "drain-brokers"}) + "\n")
    write_config(folder / "broken.yaml", cluster_config("prod-ap", default_pool="nope"))
    return folder


def test_fleet_cli_runs_and_events_all(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    folder = fleet_folder(tmp_path)
    assert main(["runs", "--all", "--config-dir", str(folder)]) == 2  # a file did not load: shown, named, exit 2
    out, err = capsys.readouterr()
    assert "manual__prod-eu" in out and "manual__prod-us" in out and "cluster" in out.splitlines()[0]
    assert f"error: {folder / 'broken.yaml'}: default_pool: unknown pool 'nope'" in err
    monkeypatch.setenv("KAFKA_REBALANCER_CONFIG_DIR", str(folder))
    assert main(["events", "--all"]) == 2
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["prod-us", "prod-eu"]  # newest first, across the clusters
    assert "broker_lost" in lines[0] and "drain-brokers" in lines[0]


def test_fleet_cli_fleet_command_and_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    folder = fleet_folder(tmp_path)
    (folder / "broken.yaml").unlink()
    write_config(folder / "fleet.yaml", {"max_concurrent_executions": 3})
    assert main(["fleet", "--config-dir", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "prod-eu: prod-eu.yaml, nightly at '0 0 * * *'" in out
    assert "prod-us: prod-us.yaml, nightly at '0 2 * * *'" in out
    assert "airflow pools set kafka_rebalancer_executions 3 " in out
    monkeypatch.delenv("KAFKA_REBALANCER_CONFIG_DIR", raising=False)
    assert main(["runs", "--all"]) == 2
    assert "give --config-dir or set KAFKA_REBALANCER_CONFIG_DIR" in capsys.readouterr().err
    assert main(["runs", "--all", "--config-dir", str(tmp_path / "none")]) == 2
    assert "not a folder" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["runs", "--all", "--config", str(folder / "prod-eu.yaml")])  # one or the other


def test_fleet_runs_page_and_reports_per_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two clusters' scheduled runs may share a run id: the page links each to its cluster's report."""
    from kafka_rebalancer.airflow.ui import run_report, runs_page

    folder = fleet_folder(tmp_path)
    run_id = "scheduled__2026-11-29T02:00:00+00:00"
    folder_name = "scheduled__2026-11-29T02_00_00_00_00"  # the run id made a folder name (the page's links)
    for name in ("prod-eu", "prod-us"):
        report = tmp_path / "runs" / name / folder_name / "report" / "index.html"
        report.parent.mkdir(parents=True)
        report.write_text(f"report of {name}")
    monkeypatch.delenv("KAFKA_REBALANCER_CONFIG", raising=False)
    monkeypatch.setenv("KAFKA_REBALANCER_CONFIG_DIR", str(folder))
    page = runs_page()
    assert "<h2>cluster prod-eu</h2>" in page and "<h2>cluster prod-us</h2>" in page
    assert f'href="/kafka-rebalancer/report/{folder_name}?cluster=prod-us"' in page
    assert "Left out, its config does not load: " in page and "broken.yaml: default_pool" in page
    assert Path(run_report(run_id, "prod-us").path).read_text() == "report of prod-us"
    assert Path(run_report(run_id, "prod-eu").path).read_text() == "report of prod-eu"
    assert deployment.cluster_of("kafka_rebalance_nightly__prod-us") == "prod-us"
    assert deployment.cluster_of("kafka_rebalance_nightly") is None


def test_fleet_notices_link_the_clusters_report_as_the_runs_page_does(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Every notice of a fleet cluster's run (a task failed, an execution stalled, the automation started a run,
    the approval waits) links the report with the cluster, by the runs page's and the task link's one builder."""
    from types import SimpleNamespace

    from kafka_rebalancer.airflow import notifications
    from kafka_rebalancer.airflow.operators import PlanApprovalOperator, send_approval_notice
    from kafka_rebalancer.airflow.ui import RunReportLink
    from kafka_rebalancer.notify import automation_events, outbox
    from kafka_rebalancer.notify.messages import approval_waiting_notice, report_url

    sent: list[Any] = []
    for module in (outbox, automation_events):
        monkeypatch.setattr(module, "deliver", lambda settings, notice, record: sent.append(notice))
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "http://airflow.example:8080/")
    kinds = ["run_failed", "execution_stalled", "automation_event", "approval_waiting"]
    path = write_config(tmp_path / "eu.yaml", cluster_config("prod-eu", run_root=str(tmp_path / "runs"), notifications={
        "channels": {"pager": {"kind": "webhook", "airflow_connection_id": "hook"}},
        "routes": [{"kinds": kinds, "channels": ["pager"]}]}))
    config = load_config(path)
    run_dir = config.run_dir("manual__1")
    run_dir.mkdir(parents=True)
    ti = SimpleNamespace(id="0190-ti", dag_id="kafka_rebalance_manual__prod-eu", run_id="manual__1",
                         task_id="approve", map_index=-1)
    context = {"ti": ti, "task_instance": ti, "run_id": "manual__1", "exception": RuntimeError("spark-submit"),
               "params": {"config_path": str(path)}}

    notifications.notify_task_failed(context)
    notifications.stall_notifier(config, "manual__1", run_dir, "pool-a", "prod-eu")(["t-0"])
    notifications.notify_automation_events(config, [{
        "kind": "broker_lost", "broker_id": 3, "broker_pool": "pool-a", "decided_at": 100.0, "decision": "started",
        "action": "drain-brokers", "run_id": "manual__1", "mode": "approve", "why": "drain of [3]"}], "prod-eu")
    operator = PlanApprovalOperator(task_id="approve", run_dir=str(run_dir))
    context["task"] = operator
    plan = {"cluster": "prod-eu", "run_id": "manual__1", "action": "rebalance", "pool": None, "reason": "",
            "replica_moves": 1, "moved_bytes": 1, "duration_s": 1.0, "why_asked": []}
    send_approval_notice(context, operator, {"plan": plan, "report_file": "/r/index.html"},
                         lambda p, approval, report: approval_waiting_notice(p, approval, report, "12:00:00"))
    assert [n.kind for n in sent] == kinds
    link = "/kafka-rebalancer/report/manual__1?cluster=prod-eu"
    assert {n.links["report"] for n in sent} == {f"http://airflow.example:8080{link}"}
    assert report_url("manual__1", "prod-eu") == link
    assert RunReportLink().get_link(SimpleNamespace(task_id="plan"), ti_key=ti) == link  # type: ignore[arg-type]
