"""In-place resize (pure): where a pod's pods/resize stands, and the maxmemory its node runs (SPEC 1.13).

A pod differs from the template in its container's resources only when its shape-hash label is the
desired shape hash (template.shape_hash: the template's inputs without resources and limits) and
its template-hash label is not the desired one. Such a pod is resized in place, not replaced:
1. `Stage.ASK`: its spec asks for other resources than the rendered ones: the planner sends them
   through the pods/resize subresource (rollout.plan_resize paces it);
2. `Stage.WAITING`: the spec asks for them and the kubelet has not reported them yet (a resize
   Deferred or in progress, or a generation it has not observed);
3. `Stage.REPORTED`: the kubelet reports them allocated and running, with no resize condition and
   the pod's generation observed: once the node's maxmemory follows, its template-hash label is
   patched to the desired hash, and the roll never sees it as outdated again.
The roll replaces instead (`in_place` is False) a pod without the shape label (made before it
existed), one of another shape, one whose resources cannot change in place without changing the
pod's QoS class (a limit or request added or removed, requests no longer equal to limits),
whose current ask the kubelet found Infeasible, or has deferred (its node has no room) or failed
to carry out (an in-progress Error) for more than STUCK_LIMIT_S, or whose resize to the current
template the API server refused (`REFUSED_ANNOTATION`, recorded by the pass that sent it), and any
pod not running.

maxmemory, when it follows the memory limit (the config chain does not set it), follows each
node's own pod (`node_maxmemory`): 75% of the smaller of the limit the container runs with and the
desired one. So a shrink lowers maxmemory at once, on every node, before any pod's memory goes
down (and a shrinking pod's resize waits until its node runs the lower value), while a growth
raises a node's maxmemory only once its container runs with the larger limit.
"""

from __future__ import annotations

import enum

from controllers.cluster.decision.actions import PatchPodMetadata, ResizePod
from controllers.cluster.decision.desired import Desired
from controllers.cluster.render.config import maxmemory_of
from controllers.shared.observation import (
    MEMORY_SLACK_BYTES,
    ContainerResources,
    PodObservation,
    PodPhase,
    PodResources,
    same_quantity,
)
from valkey_operator.api.resources import GROUP

REFUSED_ANNOTATION = f"{GROUP}/resize-refused"
"""On a pod whose resize the API server refused (no pods/resize before Kubernetes 1.33, a change it
does not allow): the template hash that resize was for. The roll replaces such a pod instead."""


class Stage(enum.Enum):
    ASK = "ask"
    """The pod's spec asks for other resources than the rendered ones: a resize to send."""
    WAITING = "waiting"
    """Asked; the kubelet has not reported the new resources running yet."""
    REPORTED = "reported"
    """The kubelet runs the rendered resources; the template-hash label follows."""


STUCK_LIMIT_S = 300.0
"""How long the kubelet may defer a pod's resize (its node has no room now) or fail to carry it out
before the roll replaces the pod instead (on a node the scheduler finds room on, with the new
resources from its start)."""


def in_place(pod: PodObservation, desired: Desired, now: float) -> bool:
    """The pod's resources change in place, never by the roll: a running pod of an in-spec shard with
    the desired shape whose resources can change without a new QoS class, and whose current ask the
    kubelet has neither found Infeasible nor deferred or failed for more than STUCK_LIMIT_S."""
    wanted = desired.resources
    asked = pod.resources.asked
    if not desired.shape_hash or wanted is None or asked is None or pod.shape_hash != desired.shape_hash:
        return False
    if not pod.live or pod.phase is not PodPhase.RUNNING or pod.shard is None:
        return False
    if not 0 <= pod.shard < desired.shards or not resizable(asked, wanted):
        return False
    if pod.annotations.get(REFUSED_ANNOTATION) == desired.template_hash:
        return False
    if not asked.same(wanted):
        return True
    stuck = pod.resources.stuck_since()
    return not pod.resources.infeasible and (stuck is None or now - stuck <= STUCK_LIMIT_S)


def record_refusal(step: ResizePod, desired: Desired) -> PatchPodMetadata:
    """Sent after step: records on the pod that the API server refused it, if it does (actions.skipped)."""
    refusal = ((REFUSED_ANNOTATION, desired.template_hash),)
    return PatchPodMetadata(step.pod, step.uid, refusal, refused=step)


def resizable(asked: ContainerResources, wanted: ContainerResources) -> bool:
    """pods/resize can take asked to wanted: the same requests and limits named (the API server
    removes none), and the same QoS class (it refuses a resize that changes it)."""
    same_names = set(asked.requests) == set(wanted.requests) and set(asked.limits) == set(wanted.limits)
    return same_names and guaranteed(asked) == guaranteed(wanted)


def guaranteed(resources: ContainerResources) -> bool:
    """Requests equal limits for cpu and memory: the container counts toward a Guaranteed pod."""
    return all(
        key in resources.limits
        and same_quantity(key, resources.requests.get(key, resources.limits[key]), resources.limits[key])
        for key in ("cpu", "memory")
    )


def stage(pod: PodObservation, desired: Desired, now: float) -> Stage | None:
    """Where the pod's in-place resize stands; None when there is none (the roll's, or nothing to do)."""
    if not in_place(pod, desired, now) or desired.resources is None or pod.resources.asked is None:
        return None
    asked_now = pod.resources.asked.same(desired.resources)
    if pod.template_hash == desired.template_hash:
        # Created with these resources, or labelled once they ran: only an ask that drifted (a
        # resize back after an Infeasible one was reverted) is sent again.
        return None if asked_now else Stage.ASK
    if not asked_now:
        return Stage.ASK
    return Stage.REPORTED if reported(pod.resources, desired.resources) else Stage.WAITING


def reported(resources: PodResources, wanted: ContainerResources) -> bool:
    """The kubelet runs wanted: allocated and running as asked, no resize pending or in progress, and
    the pod's generation observed (when the API server reports one: 1.34 and later)."""
    if resources.in_progress or resources.pending is not None:
        return False
    generation, observed = resources.generation, resources.observed_generation
    if generation is not None and observed is not None and observed < generation:
        return False
    allocated, running = resources.allocated, resources.running
    if allocated is None or running is None:
        return False
    requests, limits = wanted.requests, wanted.limits
    pairs = ((allocated, requests), (running.requests, requests), (running.limits, limits))
    return all(
        same_quantity(key, found.get(key), value) for found, asked in pairs for key, value in asked.items()
    )


def shrinks_memory(pod: PodObservation, desired: Desired) -> bool:
    """The desired memory limit is below the one the pod's spec asks for."""
    wanted = desired.resources.memory_limit if desired.resources is not None else None
    asked = pod.resources.asked.memory_limit if pod.resources.asked is not None else None
    return wanted is not None and asked is not None and wanted < asked - MEMORY_SLACK_BYTES


def node_maxmemory(pod: PodObservation, desired: Desired) -> int | None:
    """The maxmemory (bytes) the node in pod must run, when it follows the memory limit (else None):
    from the smaller of the limit its container runs with (else the one its spec asks for) and the
    desired one. Equal to the desired value on every pod of the current template."""
    wanted = desired.resources.memory_limit if desired.resources is not None else None
    if not desired.maxmemory_derived or wanted is None:
        return None
    current = pod.resources.running or pod.resources.asked
    limit = current.memory_limit if current is not None else None
    if limit is None or limit > wanted - MEMORY_SLACK_BYTES:
        return maxmemory_of(wanted)
    return maxmemory_of(limit)
