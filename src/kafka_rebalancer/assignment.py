"""Kafka's own replica placement: `AdminUtils.assignReplicasToBrokers` (README: How a plan is made, seeds 000 and 004).

A line-for-line port of Kafka's algorithm (Scala `kafka.admin.AdminUtils` through 3.x, Java
`org.apache.kafka.admin.AdminUtils` in kafka-server-common up to 4.0): for the same arguments and the same two
random draws it returns exactly what Kafka returns, rack-unaware and rack-aware, and it raises `ValueError`
subclasses carrying Kafka's messages. (From Kafka 4.1, `kafka-reassign-partitions.sh --generate` places
replicas with the KRaft controller's ReplicaPlacer instead; this is the classic algorithm the design names.)
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Protocol


class AdminOperationError(ValueError):
    """Kafka's AdminOperationException."""


class InvalidPartitionsError(AdminOperationError):
    """Kafka's InvalidPartitionsException."""


class InvalidReplicationFactorError(AdminOperationError):
    """Kafka's InvalidReplicationFactorException."""


class RandomSource(Protocol):
    def randrange(self, stop: int, /) -> int: ...  # positional-only, as random.Random's first parameter is


def _replica_index(first_replica_index: int, second_replica_shift: int, replica_index: int, n_brokers: int) -> int:
    shift = 1 + (second_replica_shift + replica_index) % (n_brokers - 1)
    return (first_replica_index + shift) % n_brokers


def _java_string_key(s: str) -> bytes:
    """Java's String.compareTo order (UTF-16 code units), which Kafka uses to sort rack names."""
    return s.encode("utf-16-be")


def rack_alternated_broker_list(racks: Mapping[int, str]) -> list[int]:
    """Brokers sorted within each rack, racks sorted, then one broker per rack in turn: racks a={0,1,2},
    b={3,4,5} give 0, 3, 1, 4, 2, 5 (Kafka's getRackAlternatedBrokerList)."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in racks.items():
        by_rack.setdefault(rack, []).append(broker)
    iterators = {rack: iter(sorted(brokers)) for rack, brokers in by_rack.items()}
    rack_names = sorted(iterators, key=_java_string_key)
    result: list[int] = []
    rack_index = 0
    while len(result) < len(racks):
        next_broker = next(iterators[rack_names[rack_index]], None)
        if next_broker is not None:
            result.append(next_broker)
        rack_index = (rack_index + 1) % len(rack_names)
    return result


def assign_replicas_to_brokers(brokers: list[int], n_partitions: int, replication_factor: int, *,
                               racks: dict[int, str] | None = None, fixed_start_index: int = -1,
                               start_partition_id: int = -1, rng: RandomSource | None = None) -> dict[int, list[int]]:
    """Partition id -> replica list (first = preferred leader), as Kafka computes it.

    `racks` maps broker -> rack: None (or no broker with a rack) is rack-unaware; a map that covers only some
    brokers is an error. Without `fixed_start_index`, the start index and the initial replica shift are two
    independent draws in [0, n) from `rng` (default: a fresh `random.Random()`), in that order, as in Kafka.
    """
    if n_partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.")
    rack_of = {b: racks[b] for b in brokers if racks and racks.get(b) is not None}
    if not rack_of:
        return _rack_unaware(n_partitions, replication_factor, list(brokers), fixed_start_index,
                             start_partition_id, rng or random.Random())
    if len(rack_of) < len(brokers):
        raise AdminOperationError("Not all brokers have rack information for replica rack aware assignment.")
    return _rack_aware(n_partitions, replication_factor, rack_of, fixed_start_index, start_partition_id,
                       rng or random.Random())


def _walk(n: int, n_partitions: int, fixed_start_index: int, start_partition_id: int,
          rng: RandomSource) -> Iterator[tuple[int, int, int]]:
    """Kafka's walk over the partitions, shared by both placements: (partition id, index of its first replica,
    the shift for the others), the shift growing by one after every n partitions."""
    start_index = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    current_partition_id = max(0, start_partition_id)
    next_replica_shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    for _ in range(n_partitions):
        if current_partition_id > 0 and current_partition_id % n == 0:
            next_replica_shift += 1
        yield current_partition_id, (current_partition_id + start_index) % n, next_replica_shift
        current_partition_id += 1


def _rack_unaware(n_partitions: int, replication_factor: int, broker_list: Sequence[int], fixed_start_index: int,
                  start_partition_id: int, rng: RandomSource) -> dict[int, list[int]]:
    n = len(broker_list)
    ret: dict[int, list[int]] = {}
    for partition_id, first_replica_index, shift in _walk(n, n_partitions, fixed_start_index, start_partition_id,
                                                          rng):
        ret[partition_id] = [broker_list[first_replica_index]] + [
            broker_list[_replica_index(first_replica_index, shift, j, n)] for j in range(replication_factor - 1)]
    return ret


def _rack_aware(n_partitions: int, replication_factor: int, rack_of: Mapping[int, str], fixed_start_index: int,
                start_partition_id: int, rng: RandomSource) -> dict[int, list[int]]:
    num_racks = len(set(rack_of.values()))
    arranged = rack_alternated_broker_list(rack_of)
    n = len(arranged)
    ret: dict[int, list[int]] = {}
    for partition_id, first_replica_index, next_replica_shift in _walk(n, n_partitions, fixed_start_index,
                                                                       start_partition_id, rng):
        leader = arranged[first_replica_index]
        replicas = [leader]
        racks_with_replicas = {rack_of[leader]}
        brokers_with_replicas = {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[_replica_index(first_replica_index, next_replica_shift * num_racks, k, n)]
                rack = rack_of[broker]
                k += 1
                # A broker is taken only if its rack has no replica yet (or every rack has one) and it has none
                # (or every broker has one).
                if (rack not in racks_with_replicas or len(racks_with_replicas) == num_racks) and \
                        (broker not in brokers_with_replicas or len(brokers_with_replicas) == n):
                    replicas.append(broker)
                    racks_with_replicas.add(rack)
                    brokers_with_replicas.add(broker)
                    break
        ret[partition_id] = replicas
    return ret
