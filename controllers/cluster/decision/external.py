"""spec.externalAccess in one pass (pure): each pod's Service, the address its node announces, and
status.externalEndpoints.

A new node's way in: its pod is created; the next pass applies its Service (owned by the pod, so it
needs the pod's uid); the Service gets an address (a nodePort at once, a load balancer's ingress
once the provider writes it); the node is told to announce it (CONFIG SET, with the other runtime
settings: View.runtime_changes); only then is it met (plan._meet waits for `announced`). So a
client is never handed a pod IP: every node answers with hostnames (cluster-preferred-endpoint-type
hostname), and a node has its hostname before any other node knows it (announce.py: what it
announces).
"""

from __future__ import annotations

from collections.abc import Iterable

from controllers.cluster.decision.actions import ApplyObject, DeleteObject, PatchPodMetadata
from controllers.cluster.decision.announce import external_address, wanted
from controllers.cluster.decision.desired import OwnedObject
from controllers.cluster.decision.upkeep import drifted, stamped
from controllers.cluster.decision.view import Node, View
from controllers.cluster.render.external import render_external_service
from controllers.shared import names
from controllers.shared.observation import PodObservation
from valkey_operator.api.external import ExternalEndpoint
from valkey_operator.core.resource import SERVICES


def address(view: View, pod: PodObservation) -> tuple[str, int] | None:
    """(host, port) the pod's Service gives it, once there is one (None without externalAccess)."""
    return external_address(view.desired.external, view.services.get(pod.name), pod.host_ip)


def announced(view: View, node: Node) -> bool:
    """The node may be met: without externalAccess always; with it, once it runs its own address."""
    if view.desired.external is None:
        return True
    if address(view, node.pod) is None or node.obs.config is None:
        return False
    desired = wanted(view.desired.external, view.services.get(node.pod.name), node.pod.host_ip)
    return all(node.obs.config.get(key) == value for key, value in desired.items())


def services(view: View) -> Iterable[ApplyObject | DeleteObject]:
    """Each live pod's Service applied when missing or drifted; every per-pod Service deleted once
    externalAccess is off (a pod's deletion takes its Service with it: it owns it)."""
    external = view.desired.external
    if external is None:
        for name, service in sorted(view.services.items()):
            owners = service["metadata"].get("ownerReferences") or []
            ours = any(owner.get("kind") == "Pod" for owner in owners)
            if ours and not service["metadata"].get("deletionTimestamp"):
                yield DeleteObject(SERVICES, name, service["metadata"]["uid"])
        return
    for pod in view.pods:
        if not pod.live or not pod.uid:
            continue
        body = stamped(render_external_service(external, pod.name, pod.uid))
        if drifted(view.services.get(pod.name), body):
            yield ApplyObject(OwnedObject(SERVICES, body))


def pod_labels(view: View) -> Iterable[PatchPodMetadata]:
    """Pods created before the pod-name label existed get it: their Service selects it."""
    if view.desired.external is None:
        return
    for pod in view.pods:
        if pod.live and not pod.named:
            yield PatchPodMetadata(pod.name, pod.uid, (), labels=((names.POD_NAME_LABEL, pod.name),))


def endpoints(view: View) -> tuple[ExternalEndpoint, ...]:
    """status.externalEndpoints: the live nodes that announce their Service's address this pass."""
    found = []
    for node in view.nodes.values():
        at = address(view, node.pod)
        if at is not None and not node.pod.deleting and announced(view, node):
            found.append(ExternalEndpoint(pod=node.pod.name, host=at[0], port=at[1]))
    return tuple(sorted(found, key=lambda endpoint: endpoint.pod))
