"""What the kubelet tells the operator during a quiet window: pod status changes, per cluster.

A cluster whose pods wait for an image is reconciled on each of their status changes (the kubelet's
pull back-off flips ErrImagePull and ImagePullBackOff), which is input, not a loop. The quiet
window's bound therefore excuses one pass per status-only change of a cluster's pods; a change to
labels, annotations or the spec (the operator's own writes) and pods added or removed excuse
nothing, so an operator that keeps rewriting its pods is still caught.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib

import aiohttp
import orjson

from valkey_operator.core.client import Client
from valkey_operator.core.resource import PODS
from valkey_operator.core.rest import Obj


def owner_cluster(pod: Obj) -> str | None:
    for owner in pod["metadata"].get("ownerReferences") or ():
        if owner.get("kind") == "ValkeyCluster":
            return str(owner.get("name"))
    return None


def status_only_change(before: Obj, after: Obj) -> bool:
    keep = ("labels", "annotations", "finalizers", "deletionTimestamp")
    same_meta = all(before["metadata"].get(key) == after["metadata"].get(key) for key in keep)
    return (
        same_meta and before.get("spec") == after.get("spec") and before.get("status") != after.get("status")
    )


async def pod_status_changes(client: Client, namespace: str, seconds: float) -> collections.Counter[str]:
    """Status-only pod changes per owning cluster ("namespace/name") over the next `seconds`."""
    listed = await client.rest.request("GET", PODS.path(namespace))
    pods = {item["metadata"]["uid"]: item for item in listed.get("items", [])}
    changes: collections.Counter[str] = collections.Counter()
    query = {"watch": "true", "resourceVersion": listed["metadata"]["resourceVersion"]}
    timeout = aiohttp.ClientTimeout(total=seconds + 30)
    with contextlib.suppress(TimeoutError):
        async with (
            asyncio.timeout(seconds),
            client.rest.stream(PODS.path(namespace), query=query, timeout=timeout) as answer,
        ):
            async for line in answer.content:
                event = orjson.loads(line)
                pod = event.get("object") or {}
                uid = (pod.get("metadata") or {}).get("uid")
                if uid is None:
                    continue
                if event.get("type") == "DELETED":
                    pods.pop(uid, None)
                    continue
                before, pods[uid] = pods.get(uid), pod
                cluster = owner_cluster(pod)
                if before is not None and cluster is not None and status_only_change(before, pod):
                    changes[f"{namespace}/{cluster}"] += 1
    return changes
