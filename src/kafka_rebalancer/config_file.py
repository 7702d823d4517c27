"""Reading a config file: YAML in UTF-8 with each key once per mapping, `${VAR}` and `${VAR:-default}` taken from
the environment, and Cruise Control's broker sets file for the pools; every problem a ConfigError naming the file,
the field or line and what was expected."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import yaml

from kafka_rebalancer.errors import ConfigError


def read_config_file(path: Path) -> dict[str, Any]:
    """The file's top-level mapping, environment variables expanded."""
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(file, "", f"cannot read config file: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(file, "", f"byte {exc.start} is not UTF-8 text, expected a YAML file in UTF-8") from None
    try:
        raw = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader: plain data only
    except _DuplicateKey as exc:
        raise ConfigError(file, str(exc.key), f"line {exc.line}: key given twice (first on line {exc.first_line}), "
                                              f"expected each key once per mapping") from None
    except yaml.YAMLError as exc:
        raise ConfigError(file, "", f"not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(file, "", "expected a mapping at the top level (cluster:, pools:, ...)")
    return _expand_env(raw, file)


_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _expand_env(value: Any, file: str, path: str = "") -> Any:
    if isinstance(value, dict):
        return {k: _expand_env(v, file, f"{path}.{k}" if path else str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand_env(v, file, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, str):
        def sub(m: re.Match[str]) -> str:
            name, default = m.group(1), m.group(2)
            if name in os.environ:
                return os.environ[name]
            if default is not None:
                return default
            raise ConfigError(file, path, f"environment variable {name} is not set (and no ${{{name}:-default}})")
        return _ENV.sub(sub, value)
    return value


class _DuplicateKey(yaml.YAMLError):
    def __init__(self, key: Any, line: int, first_line: int) -> None:
        self.key, self.line, self.first_line = key, line, first_line
        super().__init__(f"key {key!r} on line {line} was given before on line {first_line}")


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML keeps the last of two equal keys; a config edited by hand must not silently lose the first."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor` merges defaults the mapping may override
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                seen = first_line.get(key)
            except TypeError:  # an unhashable key: the base class reports it
                continue
            if seen is not None:
                raise _DuplicateKey(key, key_node.start_mark.line + 1, seen)
            first_line[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def load_pools_file(path: Path) -> dict[str, dict[str, list[int]]]:
    """Cruise Control `brokerSets.json`: {"brokerSets": [{"brokerSetId": ..., "brokerIds": [...]}]}."""
    try:
        raw = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(str(path), "", f"cannot read broker sets: {exc}") from exc
    sets = raw.get("brokerSets") if isinstance(raw, dict) else None
    if not isinstance(sets, list):
        raise ConfigError(str(path), "brokerSets", "expected a list of {brokerSetId, brokerIds}")
    pools: dict[str, dict[str, list[int]]] = {}
    for i, entry in enumerate(sets):
        if not isinstance(entry, dict) or "brokerSetId" not in entry or "brokerIds" not in entry:
            raise ConfigError(str(path), f"brokerSets[{i}]", "expected an object with brokerSetId and brokerIds")
        ids = entry["brokerIds"]
        if not isinstance(ids, list) or not all(isinstance(b, int) and not isinstance(b, bool) for b in ids):
            raise ConfigError(str(path), f"brokerSets[{i}].brokerIds", f"expected a list of integers, got {ids!r}")
        pools[str(entry["brokerSetId"])] = {"brokers": ids}
    return pools
