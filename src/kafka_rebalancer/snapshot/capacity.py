"""Broker capacities: the config, a Cruise Control `capacity.json`, or (disk) the log directories' totals.

Cruise Control's units: DISK in MB (MiB; a JBOD broker gives one value per log dir, summed here), NW_IN / NW_OUT
in KB/s (KiB/s), CPU in percent or as {"num.cores": N}. kafka-rebalancer measures CPU in cores, so a CPU given
only as a percentage cannot be used for the cpu resource. brokerId "-1" is the default for other brokers.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path

from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.errors import ConfigError

MIB = 1024 * 1024
KIB = 1024
# brokers-table column -> (config BrokerCapacity field, resource that needs it)
CAPACITY_FIELDS = {
    "disk_capacity_bytes": ("disk_bytes", "disk"),
    "nw_in_capacity_bytes_per_s": ("nw_in_bytes_per_s", "network_in"),
    "nw_out_capacity_bytes_per_s": ("nw_out_bytes_per_s", "network_out"),
    "cpu_capacity_cores": ("cpu_cores", "cpu"),
}


@dataclass(frozen=True)
class CruiseControlCapacity:
    file: str
    entries: dict[int, dict[str, float]]  # broker id (-1: default) -> config field -> value
    cpu_as_percent: bool  # some entry gave CPU as a percentage only
    # JBOD, from a DISK given per log dir: broker id (-1: default) -> log dir -> bytes
    log_dirs: dict[int, dict[str, float]] = dataclasses.field(default_factory=dict)

    def value(self, broker_id: int, field: str) -> float | None:
        for key in (broker_id, -1):
            if key in self.entries and field in self.entries[key]:
                return self.entries[key][field]
        return None

    def log_dir_bytes(self, broker_id: int) -> dict[str, float]:
        """The broker's log directories' capacities (its own entry's, else the default's), if given per dir."""
        for key in (broker_id, -1):
            if key in self.entries:
                return self.log_dirs.get(key, {})
        return {}


def _number(file: str, field: str, value: object) -> float:
    try:
        number = float(value)  # type: ignore[arg-type]  # any value of the file: float() is the check
    except (TypeError, ValueError):
        raise ConfigError(file, field, f"expected a number (as Cruise Control writes it, e.g. \"100000\"), "
                                       f"got {value!r}") from None
    if not math.isfinite(number) or number <= 0:
        raise ConfigError(file, field, f"expected a positive capacity, got {value!r}")
    return number


def read_cruise_control_capacity(path: str | Path) -> CruiseControlCapacity:
    file = str(path)
    try:
        raw = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ConfigError(file, "", f"cannot read capacity file: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(file, "", f"not valid JSON: {exc}") from exc
    items = raw.get("brokerCapacities") if isinstance(raw, dict) else None
    if not isinstance(items, list):
        raise ConfigError(file, "brokerCapacities", "expected a list of {brokerId, capacity}")
    entries: dict[int, dict[str, float]] = {}
    log_dirs: dict[int, dict[str, float]] = {}
    cpu_as_percent = False
    for i, item in enumerate(items):
        where = f"brokerCapacities[{i}]"
        if not isinstance(item, dict) or "brokerId" not in item or not isinstance(item.get("capacity"), dict):
            raise ConfigError(file, where, "expected an object with brokerId and capacity")
        try:
            broker_id = int(item["brokerId"])
        except (TypeError, ValueError):
            raise ConfigError(file, f"{where}.brokerId", f"expected an integer id, got {item['brokerId']!r}") from None
        if broker_id in entries:  # otherwise the last entry would silently win
            raise ConfigError(file, f"{where}.brokerId", f"broker {broker_id} has a second entry, expected one "
                                                         f"entry per broker")
        capacity, values = item["capacity"], {}
        disk = capacity.get("DISK")
        if isinstance(disk, dict):  # JBOD: one capacity per log dir
            if not disk:
                raise ConfigError(file, f"{where}.capacity.DISK", "no log dirs, expected a capacity per log dir")
            log_dirs[broker_id] = {d: _number(file, f"{where}.capacity.DISK.{d}", v) * MIB for d, v in disk.items()}
            values["disk_bytes"] = sum(log_dirs[broker_id].values())
        elif disk is not None:
            values["disk_bytes"] = _number(file, f"{where}.capacity.DISK", disk) * MIB
        for key, field in (("NW_IN", "nw_in_bytes_per_s"), ("NW_OUT", "nw_out_bytes_per_s")):
            if capacity.get(key) is not None:
                values[field] = _number(file, f"{where}.capacity.{key}", capacity[key]) * KIB
        cpu = capacity.get("CPU")
        if isinstance(cpu, dict) and "num.cores" in cpu:
            values["cpu_cores"] = _number(file, f"{where}.capacity.CPU.num.cores", cpu["num.cores"])
        elif cpu is not None:
            cpu_as_percent = True
        entries[broker_id] = values
    return CruiseControlCapacity(file, entries, cpu_as_percent, log_dirs)


def read_capacity_file(config: RebalancerConfig) -> CruiseControlCapacity | None:
    """The config's Cruise Control capacity file, read and checked; None when the config names none."""
    if config.capacity.cruise_control_file is None:
        return None
    return read_cruise_control_capacity(config.capacity.cruise_control_file)


def resolve_capacities(config: RebalancerConfig, broker_ids: list[int], log_dir_totals: dict[int, int | None],
                       cruise_control: CruiseControlCapacity | None = None) -> dict[str, dict[int, float]]:
    """Capacity per brokers-table column and broker; first match wins: the config's entry for the broker, the
    Cruise Control file (the broker's entry, then its default), the config's default, and for disk the log dirs'
    totals (if enabled). A configured resource without a capacity for some broker is an error naming them.
    `cruise_control`: the config's capacity file if already read (read here otherwise)."""
    cc = cruise_control or read_capacity_file(config)
    out: dict[str, dict[int, float]] = {}
    for column, (field, resource_name) in CAPACITY_FIELDS.items():
        values: dict[int, float] = {}
        missing: list[int] = []
        for b in broker_ids:
            own = config.capacity.brokers.get(b)
            default = config.capacity.default
            value = getattr(own, field) if own is not None else None
            if value is None and cc is not None:
                value = cc.value(b, field)
            if value is None and default is not None:
                value = getattr(default, field)
            if value is None and field == "disk_bytes" and config.capacity.disk_from_log_dirs:
                value = log_dir_totals.get(b)
            if value is None:
                missing.append(b)
            else:
                values[b] = float(value)
        if missing and resource_name in config.resources:
            raise _missing(config, cc, resource_name, field, missing)
        out[column] = {b: values.get(b, 0.0) for b in broker_ids}
    return out


def _missing(config: RebalancerConfig, cc: CruiseControlCapacity | None, resource_name: str, field: str,
             missing: list[int]) -> ConfigError:
    if cc is not None:
        if field == "cpu_cores" and cc.cpu_as_percent:
            return ConfigError(cc.file, "brokerCapacities", "CPU is given as a percentage; the cpu resource needs "
                                                            "cores: {\"CPU\": {\"num.cores\": \"16\"}}")
        return ConfigError(cc.file, "brokerCapacities",
                           f"no {resource_name} capacity for broker(s) {missing} and no default (brokerId -1)")
    return ConfigError(str(config.source_file), "capacity",
                       f"no {resource_name} capacity ({field}) for broker(s) {missing}: set capacity.default, "
                       f"capacity.brokers or capacity.cruise_control_file"
                       + (" or capacity.disk_from_log_dirs" if field == "disk_bytes" else ""))
