"""Which operator log lines are about one ValkeyCluster. Pure.

The operator logs one structlog event per line, JSON by default (`--log-format=json`) or key=value
(`console`). Lines about a cluster carry `cluster=<namespace>/<name>` (the cluster controller's
steps and problems) or `key=<namespace>/<name>` with `controller=valkeycluster` (each reconcile).
Anything else (other clusters, backups, start-up, tracebacks) is left out.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

CLUSTER_CONTROLLER = "valkeycluster"
_PAIR = re.compile(r"""(?:^|\s)([A-Za-z_][\w.]*)=('[^']*'|"[^"]*"|\S+)""")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def fields(line: str) -> dict[str, Any] | None:
    """The structured fields of one log line (JSON or key=value); None for unstructured text."""
    text = line.strip()
    if text.startswith("{"):
        try:
            decoded = orjson.loads(text)
        except orjson.JSONDecodeError:
            return None
        return decoded if isinstance(decoded, dict) else None
    pairs = {key: value.strip("'\"") for key, value in _PAIR.findall(_ANSI.sub("", text))}
    return pairs or None


def about(record: dict[str, Any], namespace: str, name: str) -> bool:
    """Whether a log record names that cluster."""
    key = f"{namespace}/{name}"
    if record.get("cluster") == key:
        return True
    if record.get("key") == key and record.get("controller", CLUSTER_CONTROLLER) == CLUSTER_CONTROLLER:
        return True
    return record.get("namespace") == namespace and name in (record.get("name"), record.get("cluster"))


def matches(line: str, namespace: str, name: str) -> bool:
    record = fields(line)
    return record is not None and about(record, namespace, name)


_FIRST = ("timestamp", "level", "event")


def readable(line: str) -> str:
    """A JSON log line as `time level event key=value ...`; other lines as they are."""
    record = fields(line) if line.lstrip().startswith("{") else None
    if record is None:
        return line
    head = [str(record.get(key, "")) for key in _FIRST]
    rest = [f"{key}={value}" for key, value in record.items() if key not in _FIRST]
    return " ".join(part for part in (*head, *rest) if part)


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"(\d+)([smhd])")


def seconds(duration: str) -> int:
    """kubectl's --since durations: 30s, 5m, 1h30m, 2d; ValueError otherwise."""
    parts = _DURATION.findall(duration)
    if not parts or "".join(number + unit for number, unit in parts) != duration:
        raise ValueError(f"--since {duration!r}: use a duration such as 30s, 5m, 1h30m or 2d")
    return sum(int(number) * _UNITS[unit] for number, unit in parts)
