"""Broker capacities: the config, a Cruise Control `capacity.json`, or the log directories' totals.

Cruise Control's units: DISK in MB (MiB; a JBOD broker gives one value per log dir, summed here), CPU in percent
or cores, NW_IN / NW_OUT in KB/s. brokerId "-1" is the default for brokers without their own entry.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.errors import ConfigError

MIB = 1024 * 1024


@dataclass(frozen=True)
class CruiseControlCapacity:
    file: str
    disk_bytes: dict[int, int]  # broker id -> bytes; -1 is the default

    def disk_for(self, broker_id: int) -> int | None:
        return self.disk_bytes.get(broker_id, self.disk_bytes.get(-1))


def _number(file: str, field: str, value: object) -> float:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ConfigError(file, field, f"expected a number (as Cruise Control writes it, e.g. \"100000\"), "
                                       f"got {value!r}") from None
    if number <= 0:
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
    entries = raw.get("brokerCapacities") if isinstance(raw, dict) else None
    if not isinstance(entries, list):
        raise ConfigError(file, "brokerCapacities", "expected a list of {brokerId, capacity}")
    disk: dict[int, int] = {}
    for i, entry in enumerate(entries):
        where = f"brokerCapacities[{i}]"
        if not isinstance(entry, dict) or "brokerId" not in entry or not isinstance(entry.get("capacity"), dict):
            raise ConfigError(file, where, "expected an object with brokerId and capacity")
        try:
            broker_id = int(entry["brokerId"])
        except (TypeError, ValueError):
            raise ConfigError(file, f"{where}.brokerId", f"expected an integer id, got {entry['brokerId']!r}") from None
        value = entry["capacity"].get("DISK")
        if value is None:
            raise ConfigError(file, f"{where}.capacity.DISK", "missing (MB, or one MB value per log dir for JBOD)")
        if isinstance(value, dict):  # JBOD: one capacity per log dir
            mib = sum(_number(file, f"{where}.capacity.DISK.{d}", v) for d, v in value.items())
        else:
            mib = _number(file, f"{where}.capacity.DISK", value)
        disk[broker_id] = int(mib * MIB)
    return CruiseControlCapacity(file, disk)


def resolve_disk_capacities(config: RebalancerConfig, broker_ids: list[int],
                            log_dir_totals: dict[int, int | None]) -> dict[int, int]:
    """Disk capacity per broker, first match wins: config per broker, Cruise Control file, config default,
    log-dir totals (if enabled). A broker with none of these is an error naming it."""
    cc = (read_cruise_control_capacity(config.capacity.cruise_control_file)
          if config.capacity.cruise_control_file else None)
    out: dict[int, int] = {}
    missing: list[int] = []
    for b in broker_ids:
        if b in config.capacity.brokers:
            out[b] = config.capacity.brokers[b].disk_bytes
        elif cc is not None and cc.disk_for(b) is not None:
            out[b] = cc.disk_for(b)  # type: ignore[assignment]
        elif config.capacity.default is not None:
            out[b] = config.capacity.default.disk_bytes
        elif config.capacity.disk_from_log_dirs and log_dir_totals.get(b):
            out[b] = int(log_dir_totals[b])  # type: ignore[arg-type]
        else:
            missing.append(b)
    if missing:
        if cc is not None:
            raise ConfigError(cc.file, "brokerCapacities",
                              f"no entry for broker(s) {missing} and no default (brokerId -1)")
        raise ConfigError(str(config.source_file), "capacity",
                          f"no disk capacity for broker(s) {missing}: set capacity.default, capacity.brokers, "
                          f"capacity.cruise_control_file or capacity.disk_from_log_dirs")
    return out
