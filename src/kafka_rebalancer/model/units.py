"""Units as the product writes them for people."""

from __future__ import annotations

DAY_S = 86400.0


def human_bytes(n: float) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def human_duration(seconds: float | None) -> str:
    """`1h05m`, `4m07s`; None: an unthrottled copy has no estimate."""
    if seconds is None:
        return "unknown (unthrottled)"
    hours, rest = divmod(round(seconds), 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"
