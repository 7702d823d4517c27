"""Topic spread: how much of one topic a broker may hold (issue 52).

For a topic and a broker of its pool, the replicas and the leaders it holds are held against the topic's share:
its replicas (or leaders) divided by the pool's brokers that take replicas. After a plan no broker holds more of a
topic than its cap, `max(held before the plan, ceil(share) + margin)`: a plan never makes a topic's skew worse
than Kafka's own placement left it, and never piles a topic on a broker (a broker leading 13 partitions of a topic
whose share is 1 takes 13 times its share of that topic's traffic the day the topic gets busy).

Pure functions over counts, plus the config's section (`TopicSpreadSettings`): the planner keeps the caps
(`plan.balance.planner.spread`), the checks read them from a placement (`plan.balance.spread_violations`).
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from kafka_rebalancer.model.topics import matches_any

# A topic left out of the spread (an excluded pattern) has no cap: any count fits under this one.
NO_CAP = np.iinfo(np.int32).max


class TopicSpreadSettings(BaseModel):
    """The config's `topic_spread`: on by default (issue 52), margin 1, topics left out by pattern (shell-style
    globs); `enabled: false` turns it off. On costs about nothing: the planner takes about the CPU and copies about
    the bytes it does off (BENCHMARKS.md, the issue-52 rows), and a plan that piles a topic on a broker hands that
    broker the topic's traffic the day the topic gets busy."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    margin: int = Field(default=1, ge=0, description="replicas (and leaders) a broker may hold above ceil(share)")
    exclude_topics: list[str] = Field(default_factory=list)

    @field_validator("exclude_topics")
    @classmethod
    def _patterns(cls, v: list[str]) -> list[str]:
        for pattern in v:
            if not pattern.strip():
                raise ValueError("topic_spread.exclude_topics holds an empty pattern; expected topic names or "
                                 "shell-style globs such as 'logs.*'")
        return v

    def excluded(self, topic: str) -> bool:
        return matches_any(topic, self.exclude_topics)


def spread_caps(held: np.ndarray, brokers_taking: np.ndarray, margin: int,
                excluded: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per (topic, broker): the cap, and per topic the target `ceil(share) + margin`.

    held: counts per (topic, broker) before the plan (replicas, or leaders); brokers_taking: mask over the brokers
    (columns) that take replicas, whose number divides the topic's total into its share; excluded: mask over
    topics without a cap (NO_CAP)."""
    n_taking = max(int(np.count_nonzero(brokers_taking)), 1)
    totals = held.sum(axis=1, dtype=np.int64)
    # ceil in integers: a float share of 600 / 200 must not round up to 4
    target = (totals + n_taking - 1) // n_taking + margin
    caps = np.maximum(held, target[:, None]).astype(np.int32)
    if excluded is not None and excluded.any():
        caps[excluded] = NO_CAP
        target = np.where(excluded, NO_CAP, target)
    return caps, target


def counts_per_topic_and_broker(topic_index: np.ndarray, broker_index: np.ndarray, n_topics: int,
                                n_brokers: int, weights: np.ndarray | None = None) -> np.ndarray:
    """Per (topic, broker): how many of the rows (a topic index and a broker index each; with weights, the rows
    whose weight is true) fall there, as int32 (a bincount: np.add.at is far slower at millions of rows)."""
    flat = topic_index.astype(np.int64) * n_brokers + broker_index
    if weights is not None:
        flat = flat[weights]
    return np.bincount(flat, minlength=n_topics * n_brokers).astype(np.int32).reshape(n_topics, n_brokers)
