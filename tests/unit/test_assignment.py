"""Kafka's own placement: the seeds' examples, Kafka's messages, and a differential test against
Kafka's AdminUtils itself (kafka-server-common 4.0.0, run in one JVM)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from kafka_rebalancer.assignment import (
    AdminOperationError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    assign_replicas_to_brokers,
    rack_alternated_broker_list,
)
from tests.helpers import REPO
from tools.local_kafka import fetch


class Draws:
    """Stands in for Kafka's two random draws (start index, then initial replica shift)."""

    def __init__(self, *values: int) -> None:
        self.values, self.calls = list(values), []

    def randrange(self, stop: int) -> int:
        self.calls.append(stop)
        return self.values.pop(0)


def test_seed_004_walkthrough() -> None:
    # 5 brokers, 10 partitions, RF 3, starting at broker 0: the article's table, partition by partition.
    assert assign_replicas_to_brokers([0, 1, 2, 3, 4], 10, 3, fixed_start_index=0) == {
        0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
        5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2]}


def test_seed_000_rack_aware_example() -> None:
    # Racks {0,1,2} and {3,4,5} alternate as 0, 3, 1, 4, 2, 5. With partition 0's first replica on broker 4
    # (start index 3, shift 0): partition 0 -> 4, 2, 5 and partition 1 -> 2, 5, 0, replicas on both racks.
    racks = {0: "rack1", 1: "rack1", 2: "rack1", 3: "rack2", 4: "rack2", 5: "rack2"}
    assert rack_alternated_broker_list(racks) == [0, 3, 1, 4, 2, 5]
    draws = Draws(3, 0)
    result = assign_replicas_to_brokers([0, 1, 2, 3, 4, 5], 6, 3, racks=racks, rng=draws)
    assert result[0] == [4, 2, 5] and result[1] == [2, 5, 0]
    assert draws.calls == [6, 6]  # two independent draws in [0, n)
    assert all({racks[b] for b in replicas} == {"rack1", "rack2"} for replicas in result.values())


def test_kafkas_documented_rack_alternation() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_broker_list(racks) == [0, 3, 1, 5, 4, 2]


def test_start_partition_id_continues_the_leaders_round_robin() -> None:
    # Adding partitions 8-11 to a topic: the first replicas continue where the topic left off; the follower
    # shift restarts from fixed_start_index (plus one per full round), as in Kafka.
    full = assign_replicas_to_brokers([0, 1, 2, 3, 4], 12, 2, fixed_start_index=1)
    more = assign_replicas_to_brokers([0, 1, 2, 3, 4], 4, 2, fixed_start_index=1, start_partition_id=8)
    assert sorted(more) == [8, 9, 10, 11]
    assert [more[p][0] for p in range(8, 12)] == [full[p][0] for p in range(8, 12)]
    assert more[10] == [1, 4]  # 10 % 5 == 0: shift 1 + 1 = 2; first (10 + 1) % 5 = 1; follower (1 + 1 + 2) % 5 = 4


@pytest.mark.parametrize(("args", "kwargs", "error", "message"), [
    (([1, 2], 0, 1), {}, InvalidPartitionsError, "Number of partitions must be larger than 0."),
    (([1, 2], 3, 0), {}, InvalidReplicationFactorError, "Replication factor must be larger than 0."),
    (([1, 2], 3, 3), {}, InvalidReplicationFactorError, "Replication factor: 3 larger than available brokers: 2."),
    (([1, 2, 3], 3, 2), {"racks": {1: "a", 2: "b"}}, AdminOperationError,
     "Not all brokers have rack information for replica rack aware assignment."),
])
def test_invalid_arguments_raise_kafkas_messages(args: tuple, kwargs: dict, error: type, message: str) -> None:
    with pytest.raises(error) as err:
        assign_replicas_to_brokers(*args, **kwargs)
    assert str(err.value) == message and isinstance(err.value, ValueError)


def _cases(n: int, seed: int) -> list[tuple[list[int], dict[int, str] | None, int, int, int, int]]:
    rng = random.Random(seed)
    cases = []
    for _ in range(n):
        brokers = rng.sample(range(0, 40), rng.randint(1, 12))
        racks = None
        if rng.random() < 0.6:
            names = [rng.choice(["r1", "r2", "rack-b", "rack-a", "Z", "z", "ä"]) for _ in range(rng.randint(1, 4))]
            racks = {b: rng.choice(names) for b in brokers}
            if rng.random() < 0.05:
                racks.pop(brokers[0])  # only some brokers have a rack: an error
        rf = rng.randint(0, len(brokers) + 1) if rng.random() < 0.1 else rng.randint(1, len(brokers))
        partitions = rng.randint(-1, 3) if rng.random() < 0.05 else rng.randint(1, 60)
        cases.append((brokers, racks, partitions, rf, rng.randint(0, 2 * len(brokers)),
                      rng.choice([-1, 0, 3, 7, 25])))
    return cases


def test_same_output_as_kafkas_adminutils() -> None:
    jars = fetch(REPO / "tools" / "kafka" / "adminutils" / "pom.xml", REPO / ".cache" / "kafka-adminutils")
    cases = _cases(500, seed=2026)
    lines = []
    for brokers, racks, partitions, rf, fixed, start in cases:
        rack_field = "" if racks is None else ",".join(racks.get(b, "-") for b in brokers)
        lines.append("\t".join([",".join(map(str, brokers)), rack_field, str(partitions), str(rf), str(fixed),
                                str(start)]))
    oracle = subprocess.run(["java", "-cp", f"{jars}/*", str(REPO / "tools/kafka/adminutils/AssignOracle.java")],
                            input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=300, check=True)
    expected = oracle.stdout.splitlines()
    assert len(expected) == len(cases)
    errors = 0
    for (brokers, racks, partitions, rf, fixed, start), want in zip(cases, expected, strict=True):
        try:
            got = assign_replicas_to_brokers(brokers, partitions, rf, racks=racks, fixed_start_index=fixed,
                                             start_partition_id=start)
            text = ";".join(f"{p}:{','.join(map(str, r))}" for p, r in sorted(got.items()))
        except ValueError as exc:
            errors += 1
            kind = {"InvalidPartitionsError": "InvalidPartitionsException",
                    "InvalidReplicationFactorError": "InvalidReplicationFactorException",
                    "AdminOperationError": "AdminOperationException"}[type(exc).__name__]
            text = f"error:{kind}:{exc}"
        assert text == want, (brokers, racks, partitions, rf, fixed, start)
    assert 0 < errors < len(cases) // 4  # both outcomes exercised


def test_random_draws_land_in_range_and_keep_kafkas_properties() -> None:
    for seed in range(50):
        result = assign_replicas_to_brokers([3, 1, 4, 5, 9], 20, 3, rng=random.Random(seed))
        assert sorted(result) == list(range(20))
        assert all(len(set(r)) == 3 and set(r) <= {1, 3, 4, 5, 9} for r in result.values())
        leaders = [r[0] for r in result.values()]
        assert all(leaders.count(b) == 4 for b in (1, 3, 4, 5, 9))  # first replicas round-robin


def test_cli_prints_reassignment_json() -> None:
    cli = Path(sys.executable).parent / "kafka-rebalancer"
    out = subprocess.run([str(cli), "assign", "--brokers", "0,1,2,3,4", "--partitions", "10",
                          "--replication-factor", "3", "--fixed-start-index", "0", "--topic", "orders"],
                         capture_output=True, text=True, check=True).stdout
    doc = json.loads(out)
    assert doc["version"] == 1 and doc["partitions"][5] == {"topic": "orders", "partition": 5, "replicas": [0, 2, 3]}
    bad = subprocess.run([str(cli), "assign", "--brokers", "1,2", "--partitions", "3", "--replication-factor", "3"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "Replication factor: 3 larger than available brokers: 2." in bad.stderr
