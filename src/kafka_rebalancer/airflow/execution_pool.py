"""The fleet's Airflow pool (kafka_rebalancer.fleet.EXECUTION_POOL), created and sized from fleet.yaml by the API
server (README: Fleet). Until the pool exists the scheduler leaves every execute task unscheduled without a word,
and the DAG processor, which reads fleet.yaml, cannot write Airflow's database; the API server can. The UI
plugin's app (ui.py) runs `keep_execution_pool` for as long as the API server runs: at its start and every
SYNC_INTERVAL_S after, so a change of fleet.yaml resizes the pool within a minute, without a restart.

Nothing happens without KAFKA_REBALANCER_CONFIG_DIR (one config executes in Airflow's default pool).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from kafka_rebalancer.airflow.deployment import CONFIG_DIR_ENV

SYNC_INTERVAL_ENV = "KAFKA_REBALANCER_POOL_SYNC_S"  # how often fleet.yaml is read again (default below)
SYNC_INTERVAL_S = 60.0
DESCRIPTION = "kafka-rebalancer: broker pools executing at once across the fleet (fleet.yaml's " \
              "max_concurrent_executions; kept at that size by the API server)"
log = logging.getLogger(__name__)


def slots_to_set(current: int | None, wanted: int | None) -> int | None:
    """The pool's new size, or None to leave it as it is. `current`: the pool's slots (None: there is no pool);
    `wanted`: fleet.yaml's max_concurrent_executions (None: fleet.yaml does not load). A fleet.yaml that does not
    load leaves an existing pool alone and creates a missing one with one slot: no pool would hold every
    execution back, and one at a time is within any limit fleet.yaml can say."""
    if wanted is None:
        return 1 if current is None else None
    return None if current == wanted else wanted


def wanted_slots(folder: Path) -> int | None:
    """fleet.yaml's max_concurrent_executions (its default without the file); None, logged, if it does not load
    (the DAG processor's import error names it too: kafka_rebalance_fleet_errors)."""
    from kafka_rebalancer.errors import ConfigError
    from kafka_rebalancer.fleet import fleet_settings

    try:
        return fleet_settings(folder).max_concurrent_executions
    except ConfigError as exc:
        log.warning("the fleet's execution pool keeps its size: %s", exc)
        return None


def sync_execution_pool(environ: Mapping[str, str] = os.environ) -> str | None:
    """Create or resize the pool to fleet.yaml's size (a process with Airflow's database: the API server); what
    was done, or None. A hand-made pool keeps its description and include_deferred."""
    folder = environ.get(CONFIG_DIR_ENV)
    if not folder:
        return None
    from airflow.models.pool import Pool
    from airflow.utils.session import create_session
    from sqlalchemy.exc import IntegrityError

    from kafka_rebalancer.fleet import EXECUTION_POOL

    wanted = wanted_slots(Path(folder))
    try:
        with create_session() as session:
            pool = Pool.get_pool(EXECUTION_POOL, session=session)
            slots = slots_to_set(None if pool is None else pool.slots, wanted)
            if slots is None:
                return None
            if pool is None:
                session.add(Pool(pool=EXECUTION_POOL, slots=slots, description=DESCRIPTION, include_deferred=False))
                done = f"created the Airflow pool {EXECUTION_POOL} with {slots} slot(s)"
            else:
                done = f"resized the Airflow pool {EXECUTION_POOL} from {pool.slots} to {slots} slot(s)"
                pool.slots = slots
    except IntegrityError:  # another API server worker created it at the same moment: the next look sizes it
        return None
    log.info("%s (fleet.yaml of %s)", done, folder)
    return done


def sync_interval_s(environ: Mapping[str, str] = os.environ) -> float:
    return float(environ.get(SYNC_INTERVAL_ENV) or SYNC_INTERVAL_S)


@contextlib.asynccontextmanager
async def keep_execution_pool(app: Any) -> AsyncIterator[None]:
    """The UI app's lifespan (Airflow's API server enters its plugins' apps' lifespans): the pool synced in the
    background while the server runs, the server's start not held up by it."""
    if not os.environ.get(CONFIG_DIR_ENV):
        yield
        return
    keeper = asyncio.create_task(_sync_forever(sync_interval_s()))
    try:
        yield
    finally:
        keeper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await keeper


async def _sync_forever(interval_s: float) -> None:
    while True:
        try:
            await asyncio.to_thread(sync_execution_pool)  # the database calls block
        except Exception:  # the next look tries again; the UI serves on
            log.exception("the fleet's execution pool was not synced")
        await asyncio.sleep(interval_s)
