"""The plain-text band table of task logs and `status` (plan/balance/tables.py)."""

from __future__ import annotations

import pandas as pd

from kafka_rebalancer.plan.balance.tables import band_table


def test_each_resource_is_shown_in_its_unit_with_its_band() -> None:
    # Rates and CPU are balanced on usage (a fraction of capacity) like disk: their bands read as percentages, not
    # as the whole numbers of the counts ("0..1" before).
    rows = [("disk", 300 * 2**30, 0.3, 0.27, 0.33), ("network_in", 5 * 2**20, 0.5, 0.4, 0.6),
            ("cpu", 1.5, 0.3, 0.25, 0.35), ("replica_count", 5, 5.0, 4, 6)]
    status = pd.DataFrame([{"broker_pool": "p", "broker_id": 1, "rack": "r1", "alive": True, "resource": r,
                            "load": load, "usage": usage, "lower": lower, "upper": upper, "counted": True,
                            "inside": True} for r, load, usage, lower, upper in rows])
    text = band_table(status)
    line = text.splitlines()[3]
    for cell in ("300.0 GiB (30.0%)", "27.0%..33.0%", "5.0 MiB/s (50.0%)", "40.0%..60.0%", "1.50 cores (30.0%)",
                 "25.0%..35.0%", "4..6"):
        assert cell in line, cell
