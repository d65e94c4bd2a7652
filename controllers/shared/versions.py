"""Valkey binary versions: parsed from what a server reports, and the operator's floor (pure)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from valkey_operator.api.resources import VERSION_FLOOR

Version = tuple[int, int, int]


def parse_version(text: str | None) -> Version | None:
    """'9.0.1' -> (9, 0, 1); None (absent or not MAJOR.MINOR.PATCH) means 'not a Valkey we run'."""
    match = re.fullmatch(r"\s*(\d+)\.(\d+)\.(\d+)\s*", text or "")
    if match is None:
        return None
    major, minor, patch = (int(group) for group in match.groups())
    return (major, minor, patch)


def format_version(version: Version | None) -> str | None:
    return None if version is None else ".".join(map(str, version))


def version_from_info(info: Mapping[str, object]) -> Version | None:
    """The binary's version from parsed `INFO server`: valkey_version only (Redis reports none)."""
    value = info.get("valkey_version")
    return parse_version(str(value)) if value is not None else None


def meets_floor(version: Version | None) -> bool:
    return version is not None and version >= VERSION_FLOOR
