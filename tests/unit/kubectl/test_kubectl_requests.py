"""The annotations the plugin writes for the operator: names and values."""

from __future__ import annotations

import argparse
import datetime

import pytest

from controllers.shared.names import CLUSTER_LABEL, SHARD_LABEL
from valkey_operator.api.switchover import Request, parse
from valkey_operator.kubectl import common, requests, view

NOW = datetime.datetime(2026, 12, 3, 13, 20, 0, 500000, tzinfo=datetime.UTC)


def test_a_switchover_names_the_shard_the_pod_and_a_fresh_token() -> None:
    assert requests.switchover_value(2, None, NOW) == "2@20261203T132000Z"
    assert requests.switchover_value(0, "cache-0-b", NOW) == "0/cache-0-b@20261203T132000Z"
    later = NOW + datetime.timedelta(seconds=1)
    assert requests.switchover_value(2, None, later) != requests.switchover_value(2, None, NOW)


def test_the_token_is_utc_whatever_the_clock_zone() -> None:
    local = NOW.astimezone(datetime.timezone(datetime.timedelta(hours=-5)))
    assert requests.token(local) == "20261203T132000Z"


def test_what_the_plugin_writes_the_operator_reads_back() -> None:
    assert parse(requests.switchover_value(0, "cache-0-b", NOW)) == Request(
        0, "cache-0-b", "20261203T132000Z"
    )
    assert parse(requests.switchover_value(3, None, NOW)) == Request(3, None, "20261203T132000Z")


def test_bad_switchover_targets_are_refused() -> None:
    with pytest.raises(ValueError, match="numbered from 0"):
        requests.switchover_value(-1, None, NOW)
    with pytest.raises(ValueError, match="not a pod name"):
        requests.switchover_value(0, "Cache_0", NOW)


def test_pause_sets_and_resume_removes_the_annotation() -> None:
    assert requests.pause_patch(True) == {
        "metadata": {"annotations": {"valkey.gomomento.com/paused": "true"}}
    }
    assert requests.pause_patch(False) == {"metadata": {"annotations": {"valkey.gomomento.com/paused": None}}}


def test_restart_writes_rfc3339_utc() -> None:
    patch = requests.restart_patch(NOW)
    assert patch == {
        "metadata": {"annotations": {"valkey.gomomento.com/restartedAt": "2026-12-03T13:20:00Z"}}
    }


def test_the_plugin_reads_pods_by_the_labels_the_operator_sets() -> None:
    assert requests.CLUSTER_LABEL == CLUSTER_LABEL
    assert view.SHARD_LABEL == SHARD_LABEL


def test_a_backup_is_named_apart_from_the_schedules_and_not_labelled_scheduled() -> None:
    assert requests.backup_name("cache", NOW) == "cache-manual-20261203132000"
    body = requests.backup_body("shop", "b1", "cache", {"bucket": "x"})
    assert body["metadata"] == {"name": "b1", "namespace": "shop", "labels": {CLUSTER_LABEL: "cache"}}
    assert body["spec"] == {"clusterName": "cache", "destination": {"bucket": "x"}}
    assert body["kind"] == "ValkeyBackup"


def test_timeouts_take_seconds_or_durations() -> None:
    assert [common.duration(text) for text in ("300", "2.5", "90s", "5m", "1h30m")] == [
        300,
        2.5,
        90,
        300,
        5400,
    ]
    with pytest.raises(argparse.ArgumentTypeError, match="use seconds or a duration"):
        common.duration("soon")
