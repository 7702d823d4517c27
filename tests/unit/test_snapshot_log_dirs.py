"""The snapshot's log directories (JBOD): capacities from the capacity file where it names a directory, else from
the volume (split evenly, with a warning, between directories reporting one volume); a replica moving between
directories counted once, where it is now; an offline directory kept with no load."""

from __future__ import annotations

import json
from pathlib import Path

from kafka_rebalancer.kafka_log_dirs import broker_log_dirs
from kafka_rebalancer.snapshot.capacity import MIB, read_cruise_control_capacity
from kafka_rebalancer.snapshot.log_dirs import log_dir_tables


def described(path: str, total: int, usable: int, partitions: list[tuple[int, int, bool]],
              error_code: int = 0) -> dict:
    """DescribeLogDirs' entry for one directory: partitions of topic t as (index, size, is_future_key)."""
    return {"log_dir": path, "error_code": error_code, "total_bytes": total, "usable_bytes": usable,
            "is_cordoned": False,
            "topics": [{"name": "t", "partitions": [{"partition_index": i, "partition_size": size,
                                                     "is_future_key": future} for i, size, future in partitions]}]}


def test_directories_on_one_volume_split_it_and_a_moving_replica_counts_where_it_is(tmp_path: Path) -> None:
    broker_1 = broker_log_dirs([described("/a", 1000, 600, [(0, 100, False), (1, 50, False)]),
                                described("/b", 1000, 600, [(1, 20, True)])])  # t-1's future copy, 20 of 50
    broker_2 = broker_log_dirs([described("/a", 4000, 100, [(0, 100, False)]),
                                described("/b", 2000, 100, [], error_code=57)])  # offline
    assert broker_1["replicas"] == {("t", 0): 100, ("t", 1): 50}
    dirs, replicas, warnings = log_dir_tables({1: broker_1, 2: broker_2}, None)
    rows = {(r.broker_id, r.log_dir): r for r in dirs.itertuples()}
    assert (rows[(1, "/a")].capacity_bytes, rows[(1, "/b")].capacity_bytes) == (500, 500)
    assert rows[(1, "/a")].capacity_source == "volume shared by 2 directories, split evenly"
    assert (rows[(1, "/a")].used_bytes, rows[(1, "/b")].used_bytes) == (150, 0)
    assert rows[(2, "/a")].capacity_bytes == 4000 and rows[(2, "/a")].capacity_source == "volume"
    assert rows[(2, "/b")].offline and rows[(2, "/b")].used_bytes == 0
    moving = replicas[(replicas["broker_id"] == 1) & (replicas["partition"] == 1)]
    assert moving[["log_dir", "size_bytes", "future_log_dir"]].values.tolist() == [["/a", 50, "/b"]]
    assert len(replicas) == 3  # t-0 and t-1 on broker 1, t-0 on broker 2: the future copy is no replica
    assert any("broker 1: log dirs /a, /b report one volume" in w for w in warnings)
    assert any("broker 1: 1 replica(s) moving between log dirs (t-1 to /b)" in w for w in warnings)


def test_capacities_given_per_directory_in_the_capacity_file_win(tmp_path: Path) -> None:
    path = tmp_path / "capacity.json"
    path.write_text(json.dumps({"brokerCapacities": [
        {"brokerId": "-1", "capacity": {"DISK": {"/a": "100", "/b": "300"}, "NW_IN": "1", "NW_OUT": "1"}},
        {"brokerId": "2", "capacity": {"DISK": "1000", "NW_IN": "1", "NW_OUT": "1"}}]}))
    capacity = read_cruise_control_capacity(path)
    assert capacity.value(1, "disk_bytes") == 400 * MIB
    one_volume = [described("/a", 1000, 600, []), described("/b", 1000, 600, [])]
    dirs, _, warnings = log_dir_tables({1: broker_log_dirs(one_volume), 2: broker_log_dirs(one_volume)}, capacity)
    by_dir = {(r.broker_id, r.log_dir): (r.capacity_bytes, r.capacity_source) for r in dirs.itertuples()}
    assert by_dir[(1, "/a")] == (100 * MIB, "capacity file") and by_dir[(1, "/b")] == (300 * MIB, "capacity file")
    # Broker 2's own entry gives one DISK for the broker: its directories fall back to the volume, with a warning.
    assert by_dir[(2, "/a")] == (500, "volume shared by 2 directories, split evenly")
    assert [w for w in warnings if w.startswith("broker 1")] == []
