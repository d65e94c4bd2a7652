"""The valkey-operator-config ConfigMap: defaults when missing, every key and value validated."""

from __future__ import annotations

import pytest

from valkey_operator.api.cluster import ZoneSpread
from valkey_operator.core.rest import Obj
from valkey_operator.operator_config import OperatorConfig, parse_config_map
from valkey_operator.validation import InvalidValue

WHERE = "ConfigMap ops/valkey-operator-config"


def config_map(data: dict[str, str] | None = None, binary: dict[str, str] | None = None) -> Obj:
    body: Obj = {"metadata": {"name": "valkey-operator-config", "namespace": "ops"}}
    if data is not None:
        body["data"] = data
    if binary is not None:
        body["binaryData"] = binary
    return body


def test_a_missing_or_empty_config_map_means_defaults() -> None:
    defaults = OperatorConfig(default_zone_spread=ZoneSpread.BEST_EFFORT, max_concurrent_rollouts=0)
    assert parse_config_map(None, "ops") == defaults
    assert parse_config_map(config_map(), "ops") == defaults
    assert parse_config_map(config_map({}), "ops") == defaults


def test_every_key_is_read() -> None:
    parsed = parse_config_map(
        config_map({"defaultZoneSpread": "required", "maxConcurrentRollouts": "3"}), "ops"
    )
    assert parsed == OperatorConfig(default_zone_spread=ZoneSpread.REQUIRED, max_concurrent_rollouts=3)
    only_rollouts = parse_config_map(config_map({"maxConcurrentRollouts": "0"}), "ops")
    assert only_rollouts.default_zone_spread is ZoneSpread.BEST_EFFORT
    tls = parse_config_map(config_map({"secretSyncSeconds": "30", "tlsExpiryWarningDays": "14"}), "ops")
    assert (tls.secret_sync_seconds, tls.tls_expiry_warning_days) == (30, 14)
    assert (OperatorConfig().secret_sync_seconds, OperatorConfig().tls_expiry_warning_days) == (120, 7)


@pytest.mark.parametrize(
    ("key", "value", "floor"), [("secretSyncSeconds", "0", 1), ("tlsExpiryWarningDays", "-1", 0)]
)
def test_tls_keys_are_bounded_integers(key: str, value: str, floor: int) -> None:
    with pytest.raises(InvalidValue) as caught:
        parse_config_map(config_map({key: value}), "ops")
    assert str(caught.value) == f'invalid {WHERE} key {key} "{value}": allowed an integer >= {floor}'


@pytest.mark.parametrize("value", ["sometimes", "BestEffort", "", "required "])
def test_zone_spread_is_an_enum(value: str) -> None:
    with pytest.raises(InvalidValue) as caught:
        parse_config_map(config_map({"defaultZoneSpread": value}), "ops")
    assert str(caught.value) == (
        f'invalid {WHERE} key defaultZoneSpread "{value}": allowed bestEffort or required'
    )


@pytest.mark.parametrize("value", ["-1", "two", "1.0", "", " 2", "+2"])
def test_max_concurrent_rollouts_is_a_non_negative_integer(value: str) -> None:
    with pytest.raises(InvalidValue) as caught:
        parse_config_map(config_map({"maxConcurrentRollouts": value}), "ops")
    assert (
        str(caught.value) == f'invalid {WHERE} key maxConcurrentRollouts "{value}": allowed an integer >= 0'
    )


@pytest.mark.parametrize("key", ["defaultZoneSpreads", "zoneSpread", "max-concurrent-rollouts"])
def test_an_unknown_key_is_refused(key: str) -> None:
    with pytest.raises(InvalidValue) as caught:
        parse_config_map(config_map({"defaultZoneSpread": "required", key: "x"}), "ops")
    assert str(caught.value) == (
        f'invalid key in {WHERE} "{key}": allowed the text keys defaultZoneSpread, maxConcurrentRollouts, '
        "secretSyncSeconds, tlsExpiryWarningDays"
    )


def test_binary_data_is_refused_even_under_a_known_key() -> None:
    with pytest.raises(InvalidValue) as caught:
        parse_config_map(config_map(binary={"defaultZoneSpread": "cmVxdWlyZWQ="}), "ops")
    assert caught.value.value == "defaultZoneSpread"
