"""PoolModel takes its replicas in (topic, partition, position) order: the frame itself when it is in that order
already (no copy), else a stable sort's; either way the same rows as the sort gives."""

import numpy as np
import pandas as pd

from kafka_rebalancer.plan.balance.model import _in_partition_order

KEYS = ["topic", "partition", "position"]


def _frames(seed: int = 52) -> list[pd.DataFrame]:
    rng = np.random.default_rng(seed)
    frames = []
    for trial in range(600):
        n = int(rng.integers(0, 12))
        frame = pd.DataFrame({"topic": rng.choice(["a", "b", "c"], n),
                              "partition": rng.integers(0, 3, n).astype(np.int32),
                              "position": rng.integers(0, 3, n).astype(np.int32), "row": np.arange(n)})
        if trial % 2:
            frame = frame.sort_values(KEYS, kind="mergesort").reset_index(drop=True)
        if trial % 3 == 0:  # the plan job's topics: categories in sorted order
            frame["topic"] = pd.Categorical(frame["topic"], categories=["a", "b", "c"])
        frames.append(frame)
    return frames


def test_the_rows_are_those_a_stable_sort_gives_whatever_their_order():
    for frame in _frames():
        expected = frame.sort_values(KEYS, kind="mergesort").reset_index(drop=True)
        pd.testing.assert_frame_equal(_in_partition_order(frame), expected)


def test_a_frame_in_order_is_taken_as_it_is():
    frame = pd.DataFrame({"topic": pd.Categorical(["a", "a", "b"], categories=["a", "b"]), "partition": [0, 1, 0],
                          "position": [0, 0, 0]})
    assert _in_partition_order(frame) is frame


def test_a_frame_in_order_but_numbered_otherwise_or_with_a_missing_topic_is_sorted():
    renumbered = pd.DataFrame({"topic": ["a", "b"], "partition": [0, 0], "position": [0, 0]}, index=[5, 6])
    assert list(_in_partition_order(renumbered).index) == [0, 1]
    missing_first = pd.DataFrame({"topic": pd.Categorical([None, "a"], categories=["a"]), "partition": [0, 0],
                                  "position": [0, 0]})
    assert _in_partition_order(missing_first)["topic"].tolist()[0] == "a"
