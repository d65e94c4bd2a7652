"""The `valkey-operator-config` ConfigMap (SPEC 1.5): read once at start, every key validated.

A missing ConfigMap (or an unknown operator namespace) means the defaults.
An unknown key is refused like a bad value, so a misspelt key stops the
operator instead of silently leaving the default in force. Changes take effect
when the operator restarts.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp
import attrs

from valkey_operator import validation
from valkey_operator.api.cluster import ZoneSpread
from valkey_operator.core.client import Client
from valkey_operator.core.resource import CONFIG_MAPS
from valkey_operator.core.rest import ApiError, Obj

CONFIG_MAP_NAME = "valkey-operator-config"
DEFAULT_ZONE_SPREAD = "defaultZoneSpread"
MAX_CONCURRENT_ROLLOUTS = "maxConcurrentRollouts"
SECRET_SYNC_SECONDS = "secretSyncSeconds"
TLS_EXPIRY_WARNING_DAYS = "tlsExpiryWarningDays"
KEYS = (DEFAULT_ZONE_SPREAD, MAX_CONCURRENT_ROLLOUTS, SECRET_SYNC_SECONDS, TLS_EXPIRY_WARNING_DAYS)
READ_PATIENCE = 30.0
"""Seconds to retry a ConfigMap read the API server could not answer (down, 5xx, 429)."""


class ConfigMapUnreadable(Exception):
    """The API server refused or kept failing the read; str() is one line."""


@attrs.frozen(kw_only=True)
class OperatorConfig:
    default_zone_spread: ZoneSpread = ZoneSpread.BEST_EFFORT
    max_concurrent_rollouts: int = 0
    secret_sync_seconds: int = 120
    tls_expiry_warning_days: int = 7


def parse_config_map(config_map: Obj | None, namespace: str) -> OperatorConfig:
    """The validated settings of the ConfigMap object (None: not there, so the defaults)."""
    if config_map is None:
        return OperatorConfig()
    where = f"ConfigMap {namespace}/{CONFIG_MAP_NAME}"
    data: dict[str, str] = config_map.get("data") or {}
    for key in sorted({*data, *(config_map.get("binaryData") or {})}):
        if key not in data or key not in KEYS:
            raise validation.InvalidValue(f"key in {where}", key, f"the text keys {', '.join(KEYS)}")
    config = OperatorConfig()
    if DEFAULT_ZONE_SPREAD in data:
        spread = validation.choice(
            f"{where} key {DEFAULT_ZONE_SPREAD}", data[DEFAULT_ZONE_SPREAD], [s.value for s in ZoneSpread]
        )
        config = attrs.evolve(config, default_zone_spread=ZoneSpread(spread))
    if MAX_CONCURRENT_ROLLOUTS in data:
        limit = validation.integer(f"{where} key {MAX_CONCURRENT_ROLLOUTS}", data[MAX_CONCURRENT_ROLLOUTS], 0)
        config = attrs.evolve(config, max_concurrent_rollouts=limit)
    if SECRET_SYNC_SECONDS in data:
        delay = validation.integer(f"{where} key {SECRET_SYNC_SECONDS}", data[SECRET_SYNC_SECONDS], 1)
        config = attrs.evolve(config, secret_sync_seconds=delay)
    if TLS_EXPIRY_WARNING_DAYS in data:
        days = validation.integer(f"{where} key {TLS_EXPIRY_WARNING_DAYS}", data[TLS_EXPIRY_WARNING_DAYS], 0)
        config = attrs.evolve(config, tls_expiry_warning_days=days)
    return config


async def read_operator_config(client: Client, namespace: str | None) -> OperatorConfig:
    """Get the ConfigMap once (no informer: it is read only at start) and validate it.

    Raises InvalidValue for a bad key or value, ConfigMapUnreadable when the API
    server refuses the read or stays unavailable for READ_PATIENCE seconds.
    """
    if namespace is None:
        return OperatorConfig()
    deadline = time.monotonic() + READ_PATIENCE
    delay = 0.5
    while True:
        try:
            found = await client.get_or_none(CONFIG_MAPS, CONFIG_MAP_NAME, namespace)
            return parse_config_map(found, namespace)
        except ApiError as exc:
            if exc.status < 500 and exc.status != 429:
                raise ConfigMapUnreadable(
                    f"cannot read ConfigMap {namespace}/{CONFIG_MAP_NAME}: {exc}"
                ) from None
            failure: Exception = exc
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            failure = exc
        if time.monotonic() + delay > deadline:
            raise ConfigMapUnreadable(
                f"cannot read ConfigMap {namespace}/{CONFIG_MAP_NAME} within {READ_PATIENCE:.0f}s: "
                f"{type(failure).__name__}: {failure}"
            )
        await asyncio.sleep(delay)
        delay = min(delay * 2, 5.0)
