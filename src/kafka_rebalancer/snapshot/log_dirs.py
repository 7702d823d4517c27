"""A broker's log directories in the snapshot (JBOD): each directory's usage and capacity, each replica's directory.

DescribeLogDirs reports total and usable bytes per volume, not per directory: directories on one filesystem report
the same numbers. So a directory's capacity comes from the capacity file where it names the directory (Cruise
Control's DISK given per log dir); else from its volume's total when no other directory of the broker reports the
same volume; else the volume's total split evenly between the directories sharing it, with a warning. The table
says which (`capacity_source`). A replica being moved between directories is listed twice by Kafka (its future
copy): it counts once, where it is now, with the future copy's directory beside it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import pandas as pd

from kafka_rebalancer.model.schemas import LOG_DIRS, REPLICA_LOG_DIRS
from kafka_rebalancer.snapshot.capacity import CruiseControlCapacity

FROM_FILE = "capacity file"
FROM_VOLUME = "volume"
UNKNOWN = "unknown"


def log_dir_tables(log_dirs: Mapping[int, dict[str, Any]], capacity_file: CruiseControlCapacity | None
                   ) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """The log_dirs and replica_log_dirs tables, and what the snapshot should warn about."""
    dir_rows, replica_rows, warnings = [], [], []
    for broker, described in sorted(log_dirs.items()):
        dirs: dict[str, dict[str, Any]] = described.get("dirs", {})
        given = capacity_file.log_dir_bytes(broker) if capacity_file is not None else {}
        volumes = Counter((d["total_bytes"], d["usable_bytes"]) for d in dirs.values() if not d["offline"])
        shared = []
        for path, d in sorted(dirs.items()):
            sharing = volumes[(d["total_bytes"], d["usable_bytes"])] if not d["offline"] else 1
            if path in given:
                capacity, source = round(given[path]), FROM_FILE
            elif d["total_bytes"] is None:
                capacity, source = None, UNKNOWN
            elif sharing == 1 or len(dirs) == 1:
                capacity, source = d["total_bytes"], FROM_VOLUME
            else:
                capacity, source = d["total_bytes"] // sharing, f"volume shared by {sharing} directories, split evenly"
                shared.append(path)
            dir_rows.append({"broker_id": broker, "log_dir": path, "capacity_bytes": capacity,
                             "capacity_source": source, "used_bytes": d["used_bytes"],
                             "volume_total_bytes": d["total_bytes"], "volume_usable_bytes": d["usable_bytes"],
                             "cordoned": d["cordoned"], "offline": d["offline"]})
        if shared:
            warnings.append(f"broker {broker}: log dirs {', '.join(shared)} report one volume, so each counts an even "
                            f"share of it; give their capacities per log dir in the capacity file (DISK)")
        sizes, futures = described.get("replicas", {}), described.get("future_dirs", {})
        for (topic, partition), path in sorted(described.get("replica_dirs", {}).items()):
            replica_rows.append({"topic": topic, "partition": partition, "broker_id": broker, "log_dir": path,
                                 "size_bytes": sizes.get((topic, partition), 0),
                                 "future_log_dir": futures.get((topic, partition))})
        if futures:
            moving = [f"{t}-{p} to {path}" for (t, p), path in sorted(futures.items())]
            shown = ", ".join(moving[:5]) + (", ..." if len(moving) > 5 else "")
            warnings.append(f"broker {broker}: {len(moving)} replica(s) moving between log dirs ({shown}): each "
                            f"counts where it is now")
    nullable = dict.fromkeys(("capacity_bytes", "volume_total_bytes", "volume_usable_bytes"), "Int64")
    return (pd.DataFrame(dir_rows, columns=LOG_DIRS.names).astype(nullable),
            pd.DataFrame(replica_rows, columns=REPLICA_LOG_DIRS.names), warnings)
