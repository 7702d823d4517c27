"""The config's `forecast` section (issue 55): how much log-size history the growth forecast reads from
Prometheus, how far it projects, and when the days left count as short (README: Capacity forecast)."""

from __future__ import annotations

from pydantic import Field, model_validator

from kafka_rebalancer.config_types import StrictModel


class ForecastSettings(StrictModel):
    """`history_days` of hourly log sizes per topic; projections up to `horizon_days`; `warning_days`: a pool whose
    first broker (or whose total) crosses the disk threshold sooner is short (null: never warned)."""

    history_days: int = Field(default=14, ge=2, le=365)
    horizon_days: int = Field(default=90, ge=1, le=3650)
    warning_days: int | None = Field(default=None, ge=1)
    # Rightsizing: the disk capacity of a broker it adds (null: the pool's median broker's).
    added_broker_capacity_bytes: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _warning_inside_horizon(self) -> ForecastSettings:
        if self.warning_days is not None and self.warning_days > self.horizon_days:
            raise ValueError(f"warning_days ({self.warning_days}) is beyond horizon_days ({self.horizon_days}), "
                             f"expected at most the horizon (nothing is projected past it)")
        return self
