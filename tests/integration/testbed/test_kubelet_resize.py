"""In-place pod resize on the test bed's kubelet: what a client of pods/resize sees.

A resize is a strategic merge patch of the pod's `resize` subresource (what
`kubectl patch pod --subresource resize` sends); the API server bumps
metadata.generation and the kubelet admits the new requests against its
node: allocated and actuated (allocatedResources, resources, observedGeneration,
PodResizeInProgress while it acts), or PodResizePending Infeasible / Deferred.
The module runs on a test bed of its own: the Deferred test fills a node.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import own_bed
import pytest
import pytest_asyncio
from kubelet_support import POD_IP_ENV, Pods, busybox, condition, container_status, pod_body

from valkey_operator.core.client import Client
from valkey_operator.core.informer import FuncHandler, SharedInformer
from valkey_operator.core.resource import PODS
from valkey_operator.core.rest import ApiError
from valkey_testbed import images
from valkey_testbed.kubelet import KubeletControl
from valkey_testbed.kubelet.nodes import CAPACITY, NODES
from valkey_testbed.kubelet.pods import STRATEGIC_MERGE_PATCH

kube_control_plane, kubeconfig_path, kubelet = own_bed.FIXTURES

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

Obj = dict[str, Any]
NODE_MEMORY = 128 * 2**30  # the bed's node allocatable (kubelet/nodes.py CAPACITY)
IN_PLACE = [
    {"resourceName": "cpu", "restartPolicy": "NotRequired"},
    {"resourceName": "memory", "restartPolicy": "NotRequired"},
]


async def resize(kube: Client, namespace: str, name: str, resources: Obj) -> Obj:
    """`kubectl patch pod NAME --subresource resize -p '{"spec":{"containers":[...]}}'`."""
    patch = {"spec": {"containers": [{"name": "main", "resources": resources}]}}
    return await kube.patch(
        PODS, name, patch, namespace, patch_type=STRATEGIC_MERGE_PATCH, subresource="resize"
    )


def resize_conditions(pod: Obj) -> list[Obj]:
    return [
        c
        for c in pod.get("status", {}).get("conditions") or []
        if c["type"] in ("PodResizePending", "PodResizeInProgress")
    ]


def settled(pod: Obj, resources: Obj) -> bool:
    """The kubelet has allocated and actuated `resources` for the pod's generation."""
    status = container_status(pod)
    return (
        pod["status"].get("observedGeneration") == pod["metadata"]["generation"]
        and not resize_conditions(pod)
        and status.get("allocatedResources") == resources["requests"]
        and status.get("resources") == resources
    )


@pytest_asyncio.fixture
async def seen_conditions(kube: Client, namespace: str) -> AsyncIterator[list[tuple[str, Obj]]]:
    """Every resize condition any version of a pod in the namespace carried (a watch sees each write)."""
    seen: list[tuple[str, Obj]] = []

    def record(pod: Obj) -> None:
        for entry in resize_conditions(pod):
            seen.append((pod["metadata"]["name"], entry))

    informer = SharedInformer(kube.rest, PODS, namespace=namespace)
    informer.add_event_handler(FuncHandler(on_add=record, on_update=lambda old, new: record(new)))
    informer.start()
    await informer.wait_for_sync()
    try:
        yield seen
    finally:
        await informer.stop()


async def test_a_resize_that_fits_is_actuated_in_place_with_the_same_valkey_process(
    kube: Client,
    pods: Pods,
    kubelet: KubeletControl,
    namespace: str,
    seen_conditions: list[tuple[str, Obj]],
) -> None:
    image = images.newest_image()
    assert images.resolve_image(image), f"{image} is not installed: run `python -m valkey_testbed build`"
    container = {
        "image": image,
        "args": ["--bind", "$(POD_IP)", "--port", "6379", "--protected-mode", "no", "--save", ""],
        "env": POD_IP_ENV,
        "readinessProbe": {"tcpSocket": {"port": 6379}, "periodSeconds": 1},
        "resizePolicy": IN_PLACE,
        "resources": {
            "requests": {"cpu": "100m", "memory": "64Mi"},
            "limits": {"cpu": "500m", "memory": "128Mi"},
        },
    }
    created = await pods.create(pod_body("valkey", container))
    pod = await pods.ready("valkey", timeout=90)
    assert settled(pod, container["resources"]), pod["status"]
    assert pod["metadata"]["generation"] == 1 and condition(pod, "Ready") == "True"
    pid = await pods.pid("valkey")

    new = {"requests": {"cpu": "200m", "memory": "96Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}}
    patched = await resize(kube, namespace, "valkey", new)
    assert patched["metadata"]["generation"] == 2

    pod = await pods.wait("valkey", lambda p: settled(p, new), 30, "the resize allocated and actuated")
    assert pod["metadata"]["uid"] == created["metadata"]["uid"]
    assert pod["status"]["observedGeneration"] == 2
    kubelet_conditions = [c for c in pod["status"]["conditions"] if c["type"] != "PodScheduled"]
    assert {c["type"]: c.get("observedGeneration") for c in kubelet_conditions} == {
        "PodReadyToStartContainers": 2,
        "Initialized": 2,
        "Ready": 2,
        "ContainersReady": 2,
    }
    status = container_status(pod)
    assert status["restartCount"] == 0 and "running" in status["state"], status
    assert await pods.pid("valkey") == pid, "an in-place resize keeps the process"
    view = await pods.view("valkey")
    assert view["containers"][0]["restartCount"] == 0
    pong = await kubelet.exec(
        namespace, "valkey", "main", ["valkey-cli", "-h", pod["status"]["podIP"], "ping"]
    )
    assert pong.output.strip() == b"PONG"
    in_progress = [c for name, c in seen_conditions if c["type"] == "PodResizeInProgress"]
    assert in_progress, "PodResizeInProgress is reported while the kubelet actuates the resize"
    assert {(c["status"], c["observedGeneration"]) for c in in_progress} == {("True", 2)}
    assert not [c for _, c in seen_conditions if c["type"] == "PodResizePending"]


async def test_resize_policy_restarts_the_container_only_for_a_resource_that_asks_for_it(
    kube: Client, pods: Pods, namespace: str
) -> None:
    policy = [
        {"resourceName": "cpu", "restartPolicy": "NotRequired"},
        {"resourceName": "memory", "restartPolicy": "RestartContainer"},
    ]
    first = {"requests": {"cpu": "100m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}}
    container = busybox("exec sleep 3600", resizePolicy=policy, resources=first)
    await pods.create(pod_body("sleeper", container))
    await pods.ready("sleeper")
    pid = await pods.pid("sleeper")

    cpu_only = {"requests": {"cpu": "300m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}}
    await resize(kube, namespace, "sleeper", cpu_only)
    pod = await pods.wait("sleeper", lambda p: settled(p, cpu_only), 30, "the cpu resize actuated")
    assert container_status(pod)["restartCount"] == 0 and await pods.pid("sleeper") == pid

    memory = {"requests": {"cpu": "300m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}}
    await resize(kube, namespace, "sleeper", memory)
    pod = await pods.wait(
        "sleeper",
        lambda p: settled(p, memory) and container_status(p).get("restartCount") == 1,
        60,
        "the memory resize actuated by a restart",
    )
    status = container_status(pod)
    assert "running" in status["state"] and "terminated" in status["lastState"], status
    assert pod["status"]["observedGeneration"] == 3
    assert await pods.pid("sleeper") != pid, "RestartContainer starts a new process"


async def test_a_resize_beyond_the_nodes_allocatable_is_infeasible_and_keeps_the_old_allocation(
    kube: Client, pods: Pods, namespace: str, seen_conditions: list[tuple[str, Obj]]
) -> None:
    old = {"requests": {"cpu": "100m", "memory": "64Mi"}}
    body = pod_body("greedy", busybox("exec sleep 3600", resizePolicy=IN_PLACE, resources=old))
    await pods.create(
        {**body, "spec": {**body["spec"], "nodeSelector": {"kubernetes.io/hostname": "node-3"}}}
    )
    await pods.ready("greedy")
    pid = await pods.pid("greedy")

    # The API server refuses a resize beyond the allocatable the Node reports (403, "node didn't
    # have enough allocatable resources"); the kubelet admits against its own. Until the node's next
    # status report (20 s) the Node claims more, as one whose capacity just shrank would.
    claimed = {**CAPACITY, "memory": "512Gi"}
    for attempt in range(3):  # the node's own report may land between the two requests
        await kube.patch_status(NODES, "node-3", {"status": {"allocatable": claimed, "capacity": claimed}})
        try:
            await resize(kube, namespace, "greedy", {"requests": {"cpu": "100m", "memory": "200Gi"}})
            break
        except ApiError as exc:
            if exc.status != 403 or attempt == 2:
                raise

    def infeasible(pod: Obj) -> bool:
        return any(c["type"] == "PodResizePending" for c in resize_conditions(pod))

    pod = await pods.wait("greedy", infeasible, 30, "PodResizePending")
    [pending] = resize_conditions(pod)
    assert (pending["status"], pending["reason"], pending["observedGeneration"]) == ("True", "Infeasible", 2)
    assert pending["message"] == (
        f"Node didn't have enough capacity: memory, requested: {200 * 2**30}, capacity: {NODE_MEMORY}"
    )
    status = container_status(pod)
    assert status["allocatedResources"] == old["requests"] and status["resources"] == old
    assert pod["spec"]["containers"][0]["resources"]["requests"]["memory"] == "200Gi"
    assert status["restartCount"] == 0 and await pods.pid("greedy") == pid
    assert not [c for _, c in seen_conditions if c["type"] == "PodResizeInProgress"]


async def test_a_resize_that_does_not_fit_now_is_deferred_until_another_pod_leaves_the_node(
    kube: Client, pods: Pods, namespace: str
) -> None:
    node = {"kubernetes.io/hostname": "node-2"}
    hog = {"requests": {"memory": "100Gi"}}
    await pods.create(pod_body("hog", busybox("exec sleep 3600", resources=hog), nodeSelector=node))
    small = {"requests": {"memory": "1Gi"}}
    body = pod_body(
        "grower", busybox("exec sleep 3600", resizePolicy=IN_PLACE, resources=small), nodeSelector=node
    )
    await pods.create(body)
    await pods.ready("hog")
    await pods.ready("grower")
    pid = await pods.pid("grower")

    grown = {"requests": {"memory": "40Gi"}}
    await resize(kube, namespace, "grower", grown)
    pod = await pods.wait("grower", lambda p: bool(resize_conditions(p)), 30, "PodResizePending")
    [pending] = resize_conditions(pod)
    assert (pending["type"], pending["reason"], pending["observedGeneration"]) == (
        "PodResizePending",
        "Deferred",
        2,
    )
    assert pending["message"] == (
        f"Node didn't have enough resource: memory, requested: {40 * 2**30}, "
        f"used: {100 * 2**30}, capacity: {NODE_MEMORY}"
    )
    assert container_status(pod)["allocatedResources"] == small["requests"]

    await kube.delete(PODS, "hog", namespace, grace_period_seconds=0)
    pod = await pods.wait("grower", lambda p: settled(p, grown), 30, "the deferred resize allocated")
    assert pod["status"]["observedGeneration"] == 2
    assert container_status(pod)["restartCount"] == 0 and await pods.pid("grower") == pid
