"""Which plans are worked out on the driver: up to a number of replicas, which the environment may change."""

from __future__ import annotations

import pytest

from kafka_rebalancer.errors import RebalancerError
from kafka_rebalancer.plan.balance import transforms
from kafka_rebalancer.spark_settings import DRIVER_MAX_REPLICAS_ENV


def test_the_default_limit_takes_the_bench_s_200_broker_pool_and_leaves_1000_brokers_to_spark(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DRIVER_MAX_REPLICAS_ENV, raising=False)
    assert transforms.plans_on_driver(300_000)  # single-200, medium
    assert not transforms.plans_on_driver(1_500_000)  # single-1000, large
    assert transforms.driver_max_replicas() == transforms.DRIVER_PLANNING_MAX_REPLICAS


@pytest.mark.parametrize(("value", "limit"), [("0", 0), (" 1000 ", 1000), ("", None)])
def test_the_environment_sets_the_limit(monkeypatch: pytest.MonkeyPatch, value: str, limit: int | None) -> None:
    monkeypatch.setenv(DRIVER_MAX_REPLICAS_ENV, value)
    assert transforms.driver_max_replicas() == (transforms.DRIVER_PLANNING_MAX_REPLICAS if limit is None else limit)
    assert transforms.plans_on_driver(1) is (limit != 0)


@pytest.mark.parametrize("value", ["-1", "1e6", "many"])
def test_a_limit_that_is_not_a_whole_number_is_refused_with_its_name(monkeypatch: pytest.MonkeyPatch,
                                                                      value: str) -> None:
    monkeypatch.setenv(DRIVER_MAX_REPLICAS_ENV, value)
    with pytest.raises(RebalancerError, match=DRIVER_MAX_REPLICAS_ENV):
        transforms.plans_on_driver(1)
