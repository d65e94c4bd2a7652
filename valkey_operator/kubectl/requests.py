"""The requests the plugin writes for the operator to carry out: annotation names and values.

Pure: "now" is passed in. Anyone can write the same annotations with `kubectl annotate`; the
plugin only spells them right and waits for the operator's answer in the status.
"""

from __future__ import annotations

import datetime
import re

from valkey_operator.api.cluster import SwitchoverPhase
from valkey_operator.api.resources import (
    GROUP,
    PAUSED_ANNOTATION,
    RESTARTED_AT_ANNOTATION,
    VALKEY_BACKUPS,
)
from valkey_operator.core import clock

CLUSTER_LABEL = f"{GROUP}/cluster"
"""The label on a cluster's pods (controllers/shared/names.py; a unit test keeps them equal)."""

TERMINAL_SWITCHOVER_PHASES = (SwitchoverPhase.SUCCEEDED, SwitchoverPhase.REFUSED, SwitchoverPhase.FAILED)
"""The phases that answer a request: the plugin stops waiting."""
_POD_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def pause_patch(paused: bool) -> dict[str, object]:
    """A merge patch setting (or, with paused False, removing) the paused annotation."""
    return {"metadata": {"annotations": {PAUSED_ANNOTATION: "true" if paused else None}}}


def token(now: datetime.datetime) -> str:
    """A fresh request token: the UTC time to the second, e.g. 20261203T132000Z."""
    return now.astimezone(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")


def switchover_value(shard: int, to_pod: str | None, now: datetime.datetime) -> str:
    """The switchover annotation's value; each call with a later `now` is a distinct request."""
    if shard < 0:
        raise ValueError(f"shard {shard}: shards are numbered from 0")
    if to_pod is not None and (not _POD_NAME.match(to_pod) or len(to_pod) > 253):
        raise ValueError(f"--to {to_pod!r} is not a pod name")
    target = f"{shard}/{to_pod}" if to_pod else str(shard)
    return f"{target}@{token(now)}"


def rfc3339(now: datetime.datetime) -> str:
    """UTC, to the second, with a Z: the restartedAt value and how Kubernetes writes times."""
    return clock.rfc3339(now.timestamp())


def restart_patch(now: datetime.datetime) -> dict[str, object]:
    """A merge patch setting restartedAt to now."""
    return {"metadata": {"annotations": {RESTARTED_AT_ANNOTATION: rfc3339(now)}}}


def backup_name(cluster: str, now: datetime.datetime) -> str:
    """`<cluster>-manual-<yyyymmddhhmmss>`: apart from the schedule's `<cluster>-<yyyymmddhhmmss>`."""
    return f"{cluster}-manual-{now.astimezone(datetime.UTC).strftime('%Y%m%d%H%M%S')}"


def backup_body(namespace: str, name: str, cluster: str, destination: dict[str, object]) -> dict[str, object]:
    """A ValkeyBackup of cluster to destination, labelled with the cluster (not as scheduled)."""
    return {
        "apiVersion": VALKEY_BACKUPS.api_version,
        "kind": VALKEY_BACKUPS.kind,
        "metadata": {"name": name, "namespace": namespace, "labels": {CLUSTER_LABEL: cluster}},
        "spec": {"clusterName": cluster, "destination": destination},
    }
