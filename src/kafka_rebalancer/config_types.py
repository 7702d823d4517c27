"""The config's value types shared by its sections: byte sizes, durations and the strict section model (apart from
config.py so that a section kept in a module of its own, e.g. notification_settings.py, uses the same)."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_byte_size(value: Any) -> int:
    """`123`, `"512MiB"`, `"1.5 GB"` -> bytes. Binary (KiB, MiB...) and decimal (KB, MB...) units."""
    if isinstance(value, bool):
        raise ValueError("expected a byte size such as 1073741824 or '1GiB', got a boolean")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"expected a non-negative byte size, got {value}")
        return value
    if isinstance(value, str):
        m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", value)
        if m and m.group(2).lower() in _UNITS:
            size = float(m.group(1)) * _UNITS[m.group(2).lower()]
            if math.isfinite(size):  # hundreds of digits overflow a float
                return int(size)
    raise ValueError(f"expected a byte size such as 1073741824 or '1GiB', got {value!r}")


ByteSize = Annotated[int, BeforeValidator(parse_byte_size)]

_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(value: Any) -> float:
    """`3600`, `"90m"`, `"4h"`, `"1d"`, `"1h30m"` -> seconds."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as '4h' or 3600 (seconds), got a boolean")
    if isinstance(value, int | float):
        if value <= 0:
            raise ValueError(f"expected a positive duration, got {value}")
        return float(value)
    if isinstance(value, str):
        parts = re.findall(r"([0-9]+(?:\.[0-9]+)?)\s*([smhd])", value.strip().lower())
        if parts and re.fullmatch(r"(\s*[0-9]+(?:\.[0-9]+)?\s*[smhd])+\s*", value.lower()):
            seconds = sum(float(n) * _DURATION_UNITS[u] for n, u in parts)
            if seconds > 0:
                return seconds
    raise ValueError(f"expected a duration such as '4h', '90m' or 3600 (seconds), got {value!r}")


Duration = Annotated[float, BeforeValidator(parse_duration)]


class StrictModel(BaseModel):
    """A config section: unknown fields are errors (a misspelt field is not silently ignored), values frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)
