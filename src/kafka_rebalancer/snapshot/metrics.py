"""Per-partition traffic for the network and CPU resources.

- `file`: a CSV or Parquet file with columns topic, partition, bytes_in_per_s, bytes_out_per_s (for example
  exported from Prometheus): one row per partition, rates in bytes per second (numbers >= 0); partitions not
  listed count as idle;
- `sampled`: measured on the cluster itself over `sample_seconds`: bytes in from the growth of each partition's
  end offset, bytes out from the growth of every consumer group's committed offsets, both times the partition's
  average message size (its log size over its offset span).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from kafka_rebalancer.errors import ConfigError, one_line

log = logging.getLogger(__name__)
Key = tuple[str, int]


@dataclass(frozen=True)
class Traffic:
    """Produced (in) and consumed (out) bytes per second per partition; partitions not listed have none."""

    bytes_in: dict[Key, float] = field(default_factory=dict)
    bytes_out: dict[Key, float] = field(default_factory=dict)


TRAFFIC_COLUMNS = ("topic", "partition", "bytes_in_per_s", "bytes_out_per_s")


def _read_csv(path: Path) -> pd.DataFrame:
    # Topic names stay text ("007", "null" and "NA" are topic names too); an empty cell stays empty, not NaN.
    return pd.read_csv(path, dtype={"topic": str}, keep_default_na=False)


_READERS: dict[str, Callable[[Path], pd.DataFrame]] = {".csv": _read_csv, ".parquet": pd.read_parquet}


def read_traffic_file(path: Path) -> Traffic:
    """The metrics file (`metrics.source: file`), checked: one row per partition, rates numbers >= 0 in bytes/s."""
    file = str(path)
    reader = _READERS.get(path.suffix.lower())
    if reader is None:
        raise ConfigError(file, "", f"unknown format {path.suffix or '(no suffix)'!r}, expected a .csv or .parquet "
                                    f"file with columns {', '.join(TRAFFIC_COLUMNS)}")
    try:
        frame = reader(path)
    except (OSError, ValueError, pa.ArrowException) as exc:  # pandas' parse errors are ValueErrors
        raise ConfigError(file, "", f"cannot read traffic metrics ({one_line(exc)}), expected a "
                                    f"{path.suffix.lower()[1:]} file with columns "
                                    f"{', '.join(TRAFFIC_COLUMNS)}") from exc
    twice = frame.columns[frame.columns.duplicated()]
    if len(twice):
        raise ConfigError(file, str(twice[0]), "column given twice, expected each column once")
    missing = [c for c in TRAFFIC_COLUMNS if c not in frame.columns]
    if missing:
        raise ConfigError(file, missing[0], f"missing column (have {[str(c) for c in frame.columns]}), expected "
                                            f"columns {', '.join(TRAFFIC_COLUMNS)}")
    if frame.empty:
        raise ConfigError(file, "", "no rows, expected one row per partition (partitions not listed count as idle)")
    # Rows as the operator counts them: the CSV's line numbers (header on line 1), a Parquet file's rows from 1.
    first_row = 2 if reader is _read_csv else 1
    topics = frame["topic"].tolist()
    unnamed = [row for row, t in enumerate(topics) if not (isinstance(t, str) and t.strip())]
    if unnamed:
        raise ConfigError(file, "topic", f"row {unnamed[0] + first_row} is {_show(topics[unnamed[0]])}, "
                                         f"expected a topic name")
    numbers = {}
    for column in ("partition", "bytes_in_per_s", "bytes_out_per_s"):
        values = np.array([_number(v) for v in frame[column]], dtype=float)
        valid = np.isfinite(values) & (values >= 0)
        if column == "partition":
            valid &= np.floor(values) == values
        bad = np.flatnonzero(~valid)
        if len(bad):
            expected = "a partition number (integer >= 0)" if column == "partition" else "a rate in bytes/s >= 0"
            raise ConfigError(file, column, f"row {int(bad[0]) + first_row} is {_show(frame[column].iloc[bad[0]])}, "
                                            f"expected {expected}")
        numbers[column] = values
    keys = list(zip(topics, numbers["partition"].astype(int).tolist(), strict=True))
    seen: dict[Key, int] = {}
    for row, key in enumerate(keys):
        if key in seen:  # otherwise the last row would silently win
            raise ConfigError(file, "partition", f"row {row + first_row}: topic {key[0]!r} partition {key[1]} "
                                                 f"again (first on row {seen[key] + first_row}), expected one row "
                                                 f"per partition")
        seen[key] = row
    return Traffic(dict(zip(keys, numbers["bytes_in_per_s"].tolist(), strict=True)),
                   dict(zip(keys, numbers["bytes_out_per_s"].tolist(), strict=True)))


def _number(value: Any) -> float:
    """A cell as a float, NaN unless it is a number or text of one (a boolean is not: float(True) would be 1)."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, str | int | float | np.integer | np.floating):
        return math.nan
    try:
        return float(value)
    except ValueError:  # text that is not a number
        return math.nan
    except OverflowError:  # an integer beyond any float
        return math.inf


def _show(value: Any) -> str:
    return repr(value.item() if isinstance(value, np.generic) else value)


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
