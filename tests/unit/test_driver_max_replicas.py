"""Which plans are worked out on the driver: up to a number of replicas, which the environment may change."""

from __future__ import annotations

import pytest

from kafka_rebalancer.errors import RebalancerError
from kafka_rebalancer.plan.balance import transforms
from kafka_rebalancer.spark_settings import DRIVER_MAX_REPLICAS_ENV


def test_the_default_limits_take_one_pool_of_1000_brokers_and_leave_ten_pools_of_them_to_spark(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DRIVER_MAX_REPLICAS_ENV, raising=False)
    assert transforms.plans_on_driver(300_000, 1) and transforms.plans_on_driver(300_000, 4)  # single-200, medium
    assert transforms.plans_on_driver(1_500_000, 1)  # single-1000
    assert not transforms.plans_on_driver(1_500_000, 10)  # large
    assert not transforms.plans_on_driver(transforms.DRIVER_ONE_POOL_MAX_REPLICAS + 1, 1)
    assert transforms.driver_max_replicas(2) == transforms.DRIVER_PLANNING_MAX_REPLICAS
    assert transforms.driver_max_replicas(1) == transforms.DRIVER_ONE_POOL_MAX_REPLICAS


@pytest.mark.parametrize(("value", "limit"), [("0", 0), (" 1000 ", 1000), ("", None)])
def test_the_environment_sets_the_limit(monkeypatch: pytest.MonkeyPatch, value: str, limit: int | None) -> None:
    monkeypatch.setenv(DRIVER_MAX_REPLICAS_ENV, value)
    for broker_pools, default in ((1, transforms.DRIVER_ONE_POOL_MAX_REPLICAS),
                                  (3, transforms.DRIVER_PLANNING_MAX_REPLICAS)):
        assert transforms.driver_max_replicas(broker_pools) == (default if limit is None else limit)
        assert transforms.plans_on_driver(1, broker_pools) is (limit != 0)


@pytest.mark.parametrize("value", ["-1", "1e6", "many"])
def test_a_limit_that_is_not_a_whole_number_is_refused_with_its_name(monkeypatch: pytest.MonkeyPatch,
                                                                      value: str) -> None:
    monkeypatch.setenv(DRIVER_MAX_REPLICAS_ENV, value)
    with pytest.raises(RebalancerError, match=DRIVER_MAX_REPLICAS_ENV):
        transforms.plans_on_driver(1, 1)
