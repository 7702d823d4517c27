"""The fleet's Airflow pool kept at fleet.yaml's size by the API server (kafka_rebalancer.airflow.execution_pool):
what size it is given, and that the UI app's lifespan keeps syncing it (the database side is the integration
test's: tests/integration/test_fleet_airflow.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kafka_rebalancer.airflow import execution_pool
from kafka_rebalancer.airflow.execution_pool import keep_execution_pool, slots_to_set, wanted_slots
from tests.helpers import write_config


def test_fleet_pool_size_follows_fleet_yaml() -> None:
    assert slots_to_set(None, 3) == 3  # created
    assert slots_to_set(4, 2) == 2  # resized
    assert slots_to_set(2, 2) is None  # as it is: no write


def test_fleet_pool_a_fleet_yaml_that_does_not_load_leaves_the_pool_or_creates_one_slot() -> None:
    assert slots_to_set(5, None) is None
    assert slots_to_set(None, None) == 1


def test_fleet_pool_wanted_slots_from_the_folder(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert wanted_slots(tmp_path) == 4  # no fleet.yaml: the default
    write_config(tmp_path / "fleet.yaml", {"max_concurrent_executions": 2})
    assert wanted_slots(tmp_path) == 2
    write_config(tmp_path / "fleet.yaml", {"max_concurrent_executions": "two"})
    assert wanted_slots(tmp_path) is None
    assert "keeps its size" in caplog.text and "fleet.yaml: max_concurrent_executions" in caplog.text


def test_fleet_pool_nothing_without_a_fleet_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKA_REBALANCER_CONFIG_DIR", raising=False)
    assert execution_pool.sync_execution_pool({}) is None  # without touching Airflow's database
    synced: list[int] = []
    monkeypatch.setattr(execution_pool, "sync_execution_pool", lambda: synced.append(1))

    async def serve() -> None:
        async with keep_execution_pool(None):
            await asyncio.sleep(0.05)

    asyncio.run(serve())
    assert synced == []


def test_fleet_pool_synced_at_the_start_and_again_while_the_server_runs(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_REBALANCER_CONFIG_DIR", str(tmp_path))
    monkeypatch.setenv(execution_pool.SYNC_INTERVAL_ENV, "0.01")
    calls: list[str] = []

    def sync() -> None:
        calls.append("sync")
        if len(calls) == 2:
            raise RuntimeError("database locked")  # logged; the next look tries again

    monkeypatch.setattr(execution_pool, "sync_execution_pool", sync)

    async def serve() -> int:
        async with keep_execution_pool(None):
            await asyncio.sleep(0.2)
        seen = len(calls)
        await asyncio.sleep(0.05)
        return seen

    seen = asyncio.run(serve())
    assert seen >= 3 and len(calls) == seen  # synced repeatedly, past a failure; stopped with the server
