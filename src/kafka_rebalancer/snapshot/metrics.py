"""Per-partition traffic for the network and CPU resources.

- `file`: a CSV or Parquet file with columns topic, partition, bytes_in_per_s, bytes_out_per_s (for example
  exported from Prometheus);
- `sampled`: measured on the cluster itself over `sample_seconds`: bytes in from the growth of each partition's
  end offset, bytes out from the growth of every consumer group's committed offsets, both times the partition's
  average message size (its log size over its offset span).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from kafka_rebalancer.errors import ConfigError

log = logging.getLogger(__name__)
Key = tuple[str, int]


@dataclass(frozen=True)
class Traffic:
    """Produced (in) and consumed (out) bytes per second per partition; partitions not listed have none."""

    bytes_in: dict[Key, float] = field(default_factory=dict)
    bytes_out: dict[Key, float] = field(default_factory=dict)


def read_traffic_file(path: Path) -> Traffic:
    file = str(path)
    try:
        frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    except (OSError, ValueError) as exc:
        raise ConfigError(file, "", f"cannot read traffic metrics: {exc}") from exc
    for column in ("topic", "partition", "bytes_in_per_s", "bytes_out_per_s"):
        if column not in frame.columns:
            raise ConfigError(file, column, f"missing column (have {list(frame.columns)})")
    for column in ("partition", "bytes_in_per_s", "bytes_out_per_s"):
        values = pd.to_numeric(frame[column], errors="coerce")
        bad = frame.index[values.isna() | (values < 0)]
        if len(bad):
            raise ConfigError(file, column, f"row {int(bad[0]) + 2}: expected a number >= 0, "
                                            f"got {frame.at[bad[0], column]!r}")
    keys = list(zip(frame["topic"].astype(str), frame["partition"].astype(int), strict=True))
    return Traffic(dict(zip(keys, frame["bytes_in_per_s"].astype(float), strict=True)),
                   dict(zip(keys, frame["bytes_out_per_s"].astype(float), strict=True)))


def sample_traffic(admin: Any, keys: Iterable[Key], sizes: dict[Key, int], seconds: float,
                   sleep: Callable[[float], None] = time.sleep) -> Traffic:
    """Measure traffic over `seconds` (admin: a ClusterAdmin)."""
    keys = sorted(keys)
    log.info("sampling traffic of %d partitions for %.0fs", len(keys), seconds)
    start_offsets = admin.offsets(keys, "earliest")
    first_end, first_groups, started = admin.offsets(keys, "latest"), admin.committed_offsets(), time.monotonic()
    sleep(seconds)
    second_end, second_groups = admin.offsets(keys, "latest"), admin.committed_offsets()
    elapsed = max(time.monotonic() - started, 1e-3)
    bytes_in: dict[Key, float] = {}
    bytes_out: dict[Key, float] = {}
    for key in keys:
        messages = max(second_end.get(key, 0) - start_offsets.get(key, 0), 1)
        per_message = sizes.get(key, 0) / messages
        bytes_in[key] = max(second_end.get(key, 0) - first_end.get(key, 0), 0) * per_message / elapsed
        consumed = sum(max(second_groups[g].get(key, 0) - first_groups.get(g, {}).get(key, 0), 0)
                       for g in second_groups if key in second_groups[g] and key in first_groups.get(g, {}))
        bytes_out[key] = consumed * per_message / elapsed
    return Traffic(bytes_in, bytes_out)
