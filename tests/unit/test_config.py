"""The config: valid files load, bad ones fail fast naming the file, the field and what was expected."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_rebalancer.config import load_config, parse_byte_size
from kafka_rebalancer.errors import ConfigError
from kafka_rebalancer.snapshot.capacity import KIB, MIB, read_cruise_control_capacity, resolve_capacities
from tests.helpers import FIXTURES, REPO, write_config

BASE = {"cluster": {"name": "c1"}, "pools": {"a": {"brokers": [1, 2]}, "b": {"brokers": [3]}},
        "capacity": {"default": {"disk_bytes": "1GiB"}}}


def load(tmp_path: Path, body: dict) -> object:
    return load_config(write_config(tmp_path / "c.yaml", body))


def test_demo_config_loads() -> None:
    config = load_config(REPO / "config" / "demo.yaml")
    assert sorted(config.pools) == ["pool-a", "pool-b"]
    assert config.topic_pool("orders") == "pool-a" and config.topic_pool("logs") == "pool-b"
    assert config.topic_pool("unknown") is None
    assert config.resources["disk"].threshold == 1.10
    assert config.run_root == (REPO / "runs").resolve()


def test_wrong_type_names_file_field_and_expectation(tmp_path: Path) -> None:
    body = {**BASE, "resources": {"disk": {"threshold": "high"}, "replica_count": {}}}
    with pytest.raises(ConfigError) as err:
        load(tmp_path, body)
    assert err.value.file.endswith("c.yaml")
    assert err.value.field == "resources.disk.threshold"
    assert "valid number" in err.value.message and "'high'" in err.value.message


def test_list_index_in_field_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load(tmp_path, {**BASE, "pools": {"a": {"brokers": [1, "two"]}}})
    assert err.value.field == "pools.a.brokers[1]"


def test_unknown_field_is_a_typo(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"budgets.max_moves: unknown field"):
        load(tmp_path, {**BASE, "budgets": {"max_moves": 3}})


def test_topic_rule_naming_an_unknown_pool(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load(tmp_path, {**BASE, "topic_pools": [{"topics": "x*", "pool": "a"}, {"topics": "y*", "pool": "nope"}]})
    assert err.value.field == "topic_pools[1].pool"
    assert "unknown pool 'nope' (known: a, b)" in err.value.message


def test_broker_in_two_pools(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="broker 2 is in two pools"):
        load(tmp_path, {**BASE, "pools": {"a": {"brokers": [1, 2]}, "b": {"brokers": [2]}}})


def test_unknown_resource_and_threshold_range(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown resource 'gpu'"):
        load(tmp_path, {**BASE, "resources": {"gpu": {}}, "priority": ["gpu"]})
    with pytest.raises(ConfigError, match=r"resources.disk.threshold: Input should be greater than 1"):
        load(tmp_path, {**BASE, "resources": {"disk": {"threshold": 0.9}}, "priority": ["disk"]})


def test_environment_variables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOOT", "k1:9092")
    config = load(tmp_path, {**BASE, "cluster": {"name": "c1", "bootstrap_servers": "${BOOT}"}})
    assert config.cluster.bootstrap_servers == "k1:9092"
    monkeypatch.delenv("BOOT")
    with pytest.raises(ConfigError, match="environment variable BOOT is not set"):
        load(tmp_path, {**BASE, "cluster": {"name": "c1", "bootstrap_servers": "${BOOT}"}})


def test_missing_file_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "missing.yaml")
    (tmp_path / "bad.yaml").write_text("cluster: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(tmp_path / "bad.yaml")


def test_byte_sizes() -> None:
    assert parse_byte_size("1GiB") == 2**30 and parse_byte_size("1.5 GB") == 1_500_000_000
    assert parse_byte_size(512) == 512
    with pytest.raises(ValueError, match="byte size"):
        parse_byte_size("lots")


def test_pools_from_cruise_control_broker_sets(tmp_path: Path) -> None:
    body = {k: v for k, v in BASE.items() if k != "pools"}
    config = load(tmp_path, {**body, "pools_file": str(FIXTURES / "cruise-control" / "brokerSets.json")})
    assert {name: p.brokers for name, p in config.pools.items()} == {"brokerSet0": [0]}


def test_cruise_control_capacity_files() -> None:
    plain = read_cruise_control_capacity(FIXTURES / "cruise-control" / "capacity.json")
    assert plain.value(0, "disk_bytes") == 500000 * MIB and plain.value(7, "disk_bytes") == 100000 * MIB
    assert plain.value(0, "nw_in_bytes_per_s") == 50000 * KIB and plain.value(7, "nw_out_bytes_per_s") == 10000 * KIB
    assert plain.value(0, "cpu_cores") is None and plain.cpu_as_percent
    jbod = read_cruise_control_capacity(FIXTURES / "cruise-control" / "capacityJBOD.json")
    assert jbod.value(1, "disk_bytes") == 500000 * MIB and jbod.value(5, "disk_bytes") == 500000 * MIB
    cores = read_cruise_control_capacity(FIXTURES / "cruise-control" / "capacityCores.json")
    assert cores.value(0, "cpu_cores") == 32 and cores.value(3, "cpu_cores") == 16 and not cores.cpu_as_percent


def test_broker_missing_from_capacity_file(tmp_path: Path) -> None:
    cc = tmp_path / "cap.json"
    cc.write_text('{"brokerCapacities": [{"brokerId": "1", "capacity": {"DISK": "100"}}]}')
    config = load(tmp_path, {**{k: v for k, v in BASE.items() if k != "capacity"},
                             "capacity": {"cruise_control_file": str(cc)}})
    with pytest.raises(ConfigError) as err:
        resolve_capacities(config, [1, 2, 3], {})
    assert err.value.file == str(cc) and "no disk capacity for broker(s) [2, 3]" in err.value.message


def test_capacity_file_with_a_bad_value(tmp_path: Path) -> None:
    cc = tmp_path / "cap.json"
    cc.write_text('{"brokerCapacities": [{"brokerId": "-1", "capacity": {"DISK": "lots"}}]}')
    with pytest.raises(ConfigError) as err:
        read_cruise_control_capacity(cc)
    assert err.value.field == "brokerCapacities[0].capacity.DISK"


def test_no_capacity_at_all(tmp_path: Path) -> None:
    config = load(tmp_path, {k: v for k, v in BASE.items() if k != "capacity"})
    with pytest.raises(ConfigError, match=r"no disk capacity \(disk_bytes\) for broker\(s\) \[1\]"):
        resolve_capacities(config, [1], {})
    enabled = load(tmp_path, {**{k: v for k, v in BASE.items() if k != "capacity"},
                              "capacity": {"disk_from_log_dirs": True}})
    assert resolve_capacities(enabled, [1], {1: 5000})["disk_capacity_bytes"] == {1: 5000}


def test_traffic_resources_need_metrics_and_capacities(tmp_path: Path) -> None:
    traffic = {"disk": {}, "cpu": {}, "network_in": {}}
    with pytest.raises(ConfigError, match=r"resources \['cpu', 'network_in'\] need traffic metrics"):
        load(tmp_path, {**BASE, "resources": traffic})
    cc = FIXTURES / "cruise-control" / "capacity.json"
    config = load(tmp_path, {**BASE, "resources": traffic, "metrics": {"source": "sampled"},
                             "capacity": {"cruise_control_file": str(cc)}})
    with pytest.raises(ConfigError, match=r"CPU is given as a percentage; the cpu resource needs cores"):
        resolve_capacities(config, [1], {})
    cores = FIXTURES / "cruise-control" / "capacityCores.json"
    config = load(tmp_path, {**BASE, "resources": traffic, "metrics": {"source": "sampled"},
                             "capacity": {"cruise_control_file": str(cores)}})
    capacities = resolve_capacities(config, [0, 1], {})
    assert capacities["cpu_capacity_cores"] == {0: 32.0, 1: 16.0}
    assert capacities["nw_in_capacity_bytes_per_s"][1] == 10000 * KIB


def test_fingerprint_ignores_execution_settings(tmp_path: Path) -> None:
    a = load(tmp_path, BASE)
    b = load(tmp_path, {**BASE, "execution": {"max_moves_per_broker": 2}})
    c = load(tmp_path, {**BASE, "budgets": {"max_replica_moves": 2}})
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()


def test_throttle_control_needs_prometheus_and_a_throttle(tmp_path: Path) -> None:
    control = {"execution": {"throttle_control": {"produce_latency_ms": 50}}}
    with pytest.raises(ConfigError, match=r"throttle_control reads the brokers' load from Prometheus and "
                                          r"lowers their replication throttle, but metrics\.prometheus is not set"):
        load(tmp_path, BASE | control)
    prometheus = {"metrics": {"prometheus": {"url": "http://prometheus:9090"}}}
    with pytest.raises(ConfigError, match=r"execution\.throttle_bytes_per_s is null"):
        load(tmp_path, BASE | prometheus | {"execution": {"throttle_control": {"produce_latency_ms": 50},
                                                          "throttle_bytes_per_s": None}})
    with pytest.raises(ConfigError, match=r"c\.yaml: execution\.throttle_control: no line set"):
        load(tmp_path, BASE | prometheus | {"execution": {"throttle_control": {"interval_s": 5}}})
    config = load(tmp_path, BASE | prometheus | control)
    assert config.execution.throttle_control.produce_latency_ms == 50  # type: ignore[attr-defined]
