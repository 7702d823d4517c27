"""The config's `access_control` section (README: Fleet, per-cluster access): which Airflow roles may see and work
the cluster's DAGs. Airflow enforces it with the FAB auth manager only (it turns each DAG's `access_control` into
permissions of those roles); Airflow's default, the simple auth manager, has no per-DAG permissions and ignores it."""

from __future__ import annotations

from typing import Literal

from kafka_rebalancer.config_types import StrictModel

DagPermission = Literal["can_read", "can_edit", "can_delete"]
RunPermission = Literal["can_read", "can_create", "can_edit", "can_delete"]


class RoleAccess(StrictModel):
    """What one role may do with the cluster's DAGs (`dags`: can_read sees them, their runs and logs; can_edit is
    what FAB checks for any change under them, an approval's answer too) and their runs (`dag_runs`: can_create
    triggers a manual operation)."""

    dags: tuple[DagPermission, ...] = ("can_read",)
    dag_runs: tuple[RunPermission, ...] = ()


def dag_access_control(roles: dict[str, RoleAccess]) -> dict[str, dict[str, set[str]]] | None:
    """The DAGs' `access_control` argument (FAB's resource names); None: no roles named, Airflow's defaults."""
    if not roles:
        return None
    return {role: {resource: set(permissions) for resource, permissions in
                   (("DAGs", access.dags), ("DAG Runs", access.dag_runs)) if permissions}
            for role, access in roles.items()}
