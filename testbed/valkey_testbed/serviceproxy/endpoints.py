"""A Service's endpoints, computed from its pods as the EndpointSlice controller would.

The EndpointSlice controller cannot serve here: the API server refuses loopback addresses in
EndpointSlices (ValidateEndpointIP), and every pod IP of the bed is a 127.x address. So the proxy
applies the controller's rules to the pods itself: a pod in the Service's namespace whose labels
match its selector, with a pod IP and not Succeeded/Failed; `ready` when its Ready condition is
True and it is not terminating (or the Service publishes not-ready addresses), `serving` when
Ready regardless of terminating.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

import attrs

Obj = dict[str, Any]
EXTERNAL_TYPES = ("NodePort", "LoadBalancer")


@attrs.frozen
class Backend:
    """One endpoint of one Service port."""

    ip: str
    port: int
    node: str
    ready: bool
    serving: bool


@attrs.frozen
class Route:
    """What a listener forwards to: a Service's port, on one node's endpoints only (Local) or any."""

    service: str
    """namespace/name"""
    port: str
    """the Service port's name, or its number when unnamed"""
    node: str | None = None


def service_key(service: Obj) -> str:
    return f"{service['metadata']['namespace']}/{service['metadata']['name']}"


def is_external(service: Obj) -> bool:
    return (service.get("spec") or {}).get("type") in EXTERNAL_TYPES


def is_load_balancer(service: Obj) -> bool:
    """A LoadBalancer Service we implement: one without a loadBalancerClass of someone else's."""
    spec = service.get("spec") or {}
    return spec.get("type") == "LoadBalancer" and not spec.get("loadBalancerClass")


def is_local(service: Obj) -> bool:
    return (service.get("spec") or {}).get("externalTrafficPolicy") == "Local"


def tcp_ports(service: Obj) -> list[Obj]:
    """The Service's TCP ports (the proxy forwards nothing else)."""
    ports = (service.get("spec") or {}).get("ports") or []
    return [port for port in ports if port.get("protocol", "TCP") == "TCP"]


def port_key(port: Obj) -> str:
    return str(port.get("name") or port["port"])


def selects(service: Obj, pod: Obj) -> bool:
    selector = (service.get("spec") or {}).get("selector") or {}
    if not selector or pod["metadata"].get("namespace") != service["metadata"]["namespace"]:
        return False
    labels = pod["metadata"].get("labels") or {}
    return all(labels.get(key) == value for key, value in selector.items())


def target_port(service_port: Obj, pod: Obj) -> int | None:
    """The pod port a Service port reaches: a number, or a named container port (None: not exposed)."""
    target = service_port.get("targetPort") or service_port["port"]
    if isinstance(target, int):
        return target
    if str(target).isdigit():
        return int(target)
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("name") == target and port.get("protocol", "TCP") == "TCP":
                return int(port["containerPort"])
    return None


def _condition(pod: Obj, kind: str) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def backends(service: Obj, service_port: Obj, pods: Iterable[Obj]) -> list[Backend]:
    """Every endpoint of one Service port among pods, ready or not."""
    publish = bool((service.get("spec") or {}).get("publishNotReadyAddresses"))
    found = []
    for pod in pods:
        status = pod.get("status") or {}
        if not selects(service, pod) or not status.get("podIP"):
            continue
        if status.get("phase") in ("Succeeded", "Failed"):
            continue
        port = target_port(service_port, pod)
        if port is None:
            continue
        serving = publish or _condition(pod, "Ready")
        terminating = bool(pod["metadata"].get("deletionTimestamp"))
        ready = publish or (serving and not terminating)
        node = (pod.get("spec") or {}).get("nodeName") or ""
        found.append(Backend(status["podIP"], port, node, ready, serving))
    return found


def choose(endpoints: Iterable[Backend], node: str | None) -> list[Backend]:
    """Candidates for a new connection, in random order: the ready endpoints (on `node` only, for
    Local), else the serving terminating ones, as kube-proxy falls back to them."""
    local = [b for b in endpoints if node is None or b.node == node]
    picked = [b for b in local if b.ready] or [b for b in local if b.serving]
    random.shuffle(picked)
    return picked


def slim_pod(pod: Obj) -> Obj:
    """What the proxy needs of a pod (the informer caches only this)."""
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    return {
        "metadata": {
            key: metadata[key]
            for key in ("name", "namespace", "uid", "labels", "deletionTimestamp", "resourceVersion")
            if key in metadata
        },
        "spec": {
            "nodeName": spec.get("nodeName"),
            "containers": [{"ports": c.get("ports") or []} for c in spec.get("containers") or []],
        },
        "status": {
            "podIP": status.get("podIP"),
            "phase": status.get("phase"),
            "conditions": [c for c in status.get("conditions") or [] if c.get("type") == "Ready"],
        },
    }


def same_pod(old: Obj, new: Obj) -> bool:
    """Equal but for resourceVersion: nothing the proxy reads changed."""

    def bare(pod: Obj) -> Obj:
        metadata = {k: v for k, v in pod["metadata"].items() if k != "resourceVersion"}
        return {**pod, "metadata": metadata}

    return bare(old) == bare(new)
