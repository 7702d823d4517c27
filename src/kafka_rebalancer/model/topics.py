"""Topic names against the patterns a config or a request gives (shell-style globs, case-sensitive)."""

from __future__ import annotations

import fnmatch


def matches_any(topic: str, patterns: tuple[str, ...] | list[str]) -> bool:
    return any(fnmatch.fnmatchcase(topic, p) for p in patterns)
