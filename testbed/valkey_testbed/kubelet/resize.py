"""In-place pod resize (the pods/resize subresource): allocation, admission on the node, restarts.

A pod's *allocation* is what the kubelet admitted for each container: its
`resources` (requests and limits) when the pod was admitted, and after that
whatever resize the kubelet accepted. The spec may ask for more (a resize); the
allocation only changes when the resize is admitted against the node:

- Infeasible: the pod's new requests alone exceed the node's allocatable
  ("Node didn't have enough capacity: memory, requested: B, capacity: B",
  memory checked first, then cpu in millicores);
- Deferred: they fit the node but not beside the allocations of the node's
  other pods ("Node didn't have enough resource: cpu, requested: m, used: m,
  capacity: m", cpu checked first, then memory, as the scheduler's fit check);
- otherwise the resize is allocated and then actuated, container by container:
  a change of the cpu request, cpu limit or memory limit whose resizePolicy
  is RestartContainer restarts the container; anything else is applied in place.

Pure functions of the pod and the numbers: the kubelet (kubelet.py) gathers the
node's allocations and the pod worker (pods.py) applies the verdict.
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from valkey_testbed.kubelet.envvars import parse_quantity

Obj = dict[str, Any]
Allocation = dict[str, Obj]
"""Container name -> its allocated `resources` ({"requests": {...}, "limits": {...}})."""

INFEASIBLE = "Infeasible"
DEFERRED = "Deferred"
RESTART_CHECKED = (("requests", "cpu"), ("limits", "cpu"), ("limits", "memory"))
"""What a running container is resized to (cgroup cpu weight and quota, memory limit): the values
whose change consults the resizePolicy. A memory request alone is only accounted, never actuated."""


@attrs.frozen
class Verdict:
    """The outcome of admitting a resize: fit, or the PodResizePending reason and message."""

    fit: bool
    reason: str = ""
    message: str = ""


def _resources(container: Obj) -> Obj:
    resources = container.get("resources") or {}
    return {kind: dict(resources[kind]) for kind in ("requests", "limits") if resources.get(kind)}


def allocation_of(pod: Obj) -> Allocation:
    """What the pod's spec asks for, per container (app and init containers)."""
    spec = pod["spec"]
    return {c["name"]: _resources(c) for c in [*(spec.get("initContainers") or []), *spec["containers"]]}


def _canonical(resources: Obj | None) -> dict[tuple[str, str], decimal.Decimal]:
    return {
        (kind, name): parse_quantity(value)
        for kind, values in (resources or {}).items()
        if kind in ("requests", "limits")
        for name, value in (values or {}).items()
    }


def same(a: Obj | None, b: Obj | None) -> bool:
    """Equal resources, quantities compared by value ("1Gi" == "1024Mi")."""
    return _canonical(a) == _canonical(b)


def same_allocation(a: Mapping[str, Obj], b: Mapping[str, Obj]) -> bool:
    return a.keys() == b.keys() and all(same(a[name], b[name]) for name in a)


def needs_restart(container: Obj, actual: Obj | None, desired: Obj | None) -> bool:
    """Whether going from actual to desired restarts the container under its resizePolicy."""
    policy = {p.get("resourceName"): p.get("restartPolicy") for p in container.get("resizePolicy") or []}
    before, after = _canonical(actual), _canonical(desired)
    return any(
        before.get(key) != after.get(key) and policy.get(key[1]) == "RestartContainer"
        for key in RESTART_CHECKED
    )


def _requests(resources: Obj | None) -> dict[str, decimal.Decimal]:
    values = (resources or {}).get("requests") or {}
    return {name: parse_quantity(values[name]) for name in ("cpu", "memory") if name in values}


def _add(
    total: dict[str, decimal.Decimal], more: Mapping[str, decimal.Decimal]
) -> dict[str, decimal.Decimal]:
    return {
        name: total.get(name, decimal.Decimal(0)) + more.get(name, decimal.Decimal(0))
        for name in ("cpu", "memory")
    }


def pod_requests(pod: Obj, allocation: Mapping[str, Obj]) -> dict[str, decimal.Decimal]:
    """The pod's effective cpu/memory requests under an allocation, as the scheduler counts them:
    app containers plus sidecars, or an init container plus the sidecars started before it,
    whichever is larger; plus the pod's overhead."""
    spec = pod["spec"]
    sidecars: dict[str, decimal.Decimal] = {}
    init_peak: dict[str, decimal.Decimal] = {}
    for container in spec.get("initContainers") or []:
        own = _requests(allocation.get(container["name"]))
        if container.get("restartPolicy") == "Always":
            sidecars = _add(sidecars, own)
        else:
            running = _add(sidecars, own)
            init_peak = {
                name: max(init_peak.get(name, decimal.Decimal(0)), running[name]) for name in running
            }
    total = dict(sidecars)
    for container in spec["containers"]:
        total = _add(total, _requests(allocation.get(container["name"])))
    total = {
        name: max(total.get(name, decimal.Decimal(0)), init_peak.get(name, decimal.Decimal(0)))
        for name in ("cpu", "memory")
    }
    return _add(total, _requests({"requests": spec.get("overhead") or {}}))


def sum_requests(pods: Iterable[Mapping[str, decimal.Decimal]]) -> dict[str, decimal.Decimal]:
    total: dict[str, decimal.Decimal] = {}
    for requests in pods:
        total = _add(total, requests)
    return total


def _units(name: str, value: decimal.Decimal) -> int:
    """cpu in millicores, memory in bytes, rounded up (a Quantity's MilliValue / Value)."""
    return math.ceil(value * 1000) if name == "cpu" else math.ceil(value)


def admit(
    requested: Mapping[str, decimal.Decimal],
    others: Mapping[str, decimal.Decimal],
    allocatable: Mapping[str, str],
) -> Verdict:
    """Admit a pod's new requests beside the other pods' allocated requests on its node."""
    capacity = {name: _units(name, parse_quantity(allocatable.get(name, "0"))) for name in ("cpu", "memory")}
    want = {name: _units(name, requested.get(name, decimal.Decimal(0))) for name in ("cpu", "memory")}
    used = {name: _units(name, others.get(name, decimal.Decimal(0))) for name in ("cpu", "memory")}
    for name in ("memory", "cpu"):
        if want[name] > capacity[name]:
            return Verdict(
                False,
                INFEASIBLE,
                f"Node didn't have enough capacity: {name}, requested: {want[name]}, "
                f"capacity: {capacity[name]}",
            )
    for name in ("cpu", "memory"):
        if want[name] > 0 and want[name] > capacity[name] - used[name]:
            return Verdict(
                False,
                DEFERRED,
                f"Node didn't have enough resource: {name}, requested: {want[name]}, "
                f"used: {used[name]}, capacity: {capacity[name]}",
            )
    return Verdict(True)
