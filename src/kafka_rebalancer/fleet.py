"""A fleet: every cluster's config in one folder (KAFKA_REBALANCER_CONFIG_DIR), one Airflow for all (README: Fleet).

Every `*.yaml` of the folder with a `cluster` section is a cluster; other files (capacity files, broker sets) are
left alone, and `fleet.yaml` holds the fleet-wide settings. A file that does not load is reported with the config
loader's error (file, field, what was expected) and leaves the others working; two files naming the same cluster
are both refused, each naming the other. A cluster without a `schedule` gets a nightly start time of its own,
spread over the fleet's night so that twenty clusters do not snapshot in the same minute.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from kafka_rebalancer.config import RebalancerConfig, format_validation_error, load_config
from kafka_rebalancer.config_file import read_config_file
from kafka_rebalancer.config_types import StrictModel
from kafka_rebalancer.errors import ConfigError

CONFIG_DIR_ENV = "KAFKA_REBALANCER_CONFIG_DIR"
FLEET_FILE = "fleet.yaml"
# fleet.yaml's max_concurrent_executions is this Airflow pool's size (README: Fleet): every cluster's execute tasks
# take a slot of it, so the fleet executes at most that many broker pools at once.
EXECUTION_POOL = "kafka_rebalancer_executions"
_HH_MM = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"


class NightSettings(StrictModel):
    """Where the spread start times fall: [start, end) in UTC (may wrap past midnight)."""

    start: str = Field(default="00:00", pattern=_HH_MM)
    end: str = Field(default="04:00", pattern=_HH_MM)

    def minutes(self) -> tuple[int, int]:
        """(first minute of the day, length in minutes); a night of equal ends is the whole day."""
        first, last = (int(t[:2]) * 60 + int(t[3:]) for t in (self.start, self.end))
        return first, (last - first) % (24 * 60) or 24 * 60


class FleetSettings(StrictModel):
    """fleet.yaml: what holds for every cluster of the folder."""

    max_concurrent_executions: int = Field(default=4, ge=1)
    night: NightSettings = Field(default_factory=NightSettings)


@dataclass(frozen=True)
class FleetCluster:
    name: str
    config_file: Path
    schedule: str  # the config's own, or its spread start time
    config: RebalancerConfig


@dataclass(frozen=True)
class BrokenConfig:
    file: Path
    error: ConfigError


@dataclass(frozen=True)
class Fleet:
    folder: Path
    settings: FleetSettings
    clusters: tuple[FleetCluster, ...]  # by name
    broken: tuple[BrokenConfig, ...]  # by file


def load_fleet(folder: Path) -> Fleet:
    """The folder's clusters, each with its nightly schedule, and the files that did not load (absolute paths:
    the DAGs' config_path is read by workers whose working directory is not the DAG processor's)."""
    folder = folder.resolve()
    if not folder.is_dir():
        raise ConfigError(str(folder), "", f"not a folder ({CONFIG_DIR_ENV}), expected the folder of the clusters' "
                                           f"config files")
    broken: list[BrokenConfig] = []
    settings = FleetSettings()
    if (folder / FLEET_FILE).is_file():
        try:
            settings = load_fleet_settings(folder / FLEET_FILE)
        except ConfigError as exc:
            broken.append(BrokenConfig(folder / FLEET_FILE, exc))
    loaded: list[tuple[Path, RebalancerConfig]] = []
    for file in cluster_files(folder):
        try:
            loaded.append((file, load_config(file)))
        except ConfigError as exc:
            broken.append(BrokenConfig(file, exc))
    good, duplicates = refuse_duplicates(loaded)
    schedules = nightly_schedules([config for _, config in good], settings.night)
    clusters = tuple(sorted((FleetCluster(c.cluster.name, file, schedules[c.cluster.name], c) for file, c in good),
                            key=lambda c: c.name))
    return Fleet(folder, settings, clusters, tuple(sorted(broken + duplicates, key=lambda b: b.file)))


def load_fleet_settings(path: Path) -> FleetSettings:
    try:
        return FleetSettings.model_validate(read_config_file(path))
    except ValidationError as exc:
        raise format_validation_error(str(path), exc) from None


def cluster_files(folder: Path) -> list[Path]:
    """The folder's YAML files with a `cluster` section (and those that cannot be read: they may be clusters)."""
    files = []
    for file in sorted(folder.glob("*.yaml")):
        if file.name == FLEET_FILE or file.name.startswith(".") or not file.is_file():
            continue
        try:
            raw: dict[str, Any] | None = read_config_file(file)
        except ConfigError:
            raw = None  # load_config reports it, as for a cluster
        if raw is None or "cluster" in raw:
            files.append(file)
    return files


def refuse_duplicates(loaded: Sequence[tuple[Path, RebalancerConfig]]
                      ) -> tuple[list[tuple[Path, RebalancerConfig]], list[BrokenConfig]]:
    """(configs whose cluster no other file names, the others refused): two files of one cluster would share its
    run folders, locks and overrides, and which of them the DAGs follow would depend on the order of a listing."""
    files_of: dict[str, list[Path]] = {}
    for file, config in loaded:
        files_of.setdefault(config.cluster.name, []).append(file)
    good, refused = [], []
    for file, config in loaded:
        files = files_of[config.cluster.name]
        if len(files) == 1:
            good.append((file, config))
            continue
        others = ", ".join(str(f) for f in files if f != file)
        refused.append(BrokenConfig(file, ConfigError(
            str(file), "cluster.name", f"cluster {config.cluster.name!r} is also named by {others}, expected each "
                                       f"cluster in one file of the folder")))
    return good, refused


def nightly_schedules(configs: Sequence[RebalancerConfig], night: NightSettings) -> dict[str, str]:
    """Each cluster's nightly cron: its own `schedule`, else a start time spread over the night: the clusters
    without one, by name, evenly apart (the same folder gives the same times)."""
    spread = sorted(c.cluster.name for c in configs if c.schedule is None)
    first, length = night.minutes()
    start_of = {name: (first + i * length // len(spread)) % (24 * 60) for i, name in enumerate(spread)}
    return {c.cluster.name: c.schedule if c.schedule is not None else
            f"{start_of[c.cluster.name] % 60} {start_of[c.cluster.name] // 60} * * *" for c in configs}
