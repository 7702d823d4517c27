"""`make demo` starts from a clean state: pool overrides an earlier demo run recorded do not shape the new one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafka_rebalancer.operations.overrides import OverrideStore, PoolOverride
from tools.demo import revert_earlier_overrides

CONFIG = {"cluster": {"name": "demo"}, "pools": {"a": {"brokers": [1, 2, 3]}},
          "topic_pools": [{"topics": "t*", "pool": "a"}], "capacity": {"default": {"disk_bytes": 1000}}}


def test_an_earlier_demos_drain_is_reverted_and_named(config_factory: Callable[..., Any]) -> None:
    config = config_factory(CONFIG)
    store = OverrideStore.of(config)
    store.record(PoolOverride(id=1, kind="drain-brokers", brokers=[3], from_pools={3: "a"}, reason="earlier demo",
                              requested_by="me", created_at="2026-11-26T00:00:00+00:00", run_id="manual__1"))
    assert len(store.active()) == 1
    reverted = revert_earlier_overrides(config)
    assert len(reverted) == 1 and "3" in reverted[0]
    assert store.active() == [] and store.read()[0].state == "reverted"
    assert revert_earlier_overrides(config) == []  # nothing left to revert
