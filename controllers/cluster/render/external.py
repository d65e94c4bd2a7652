"""The per-pod Services of spec.externalAccess, and the address each node announces through one.

Each pod gets a Service named after it, selecting only it (names.POD_NAME_LABEL) and owned by it, so
the pod's deletion garbage-collects its Service: a replaced pod is a new node with a new name, a new
Service and a new address. publishNotReadyAddresses: a node is met (and may serve) before its
readiness probe passes, and clients are sent to it as soon as it serves slots.

NodePort uses externalTrafficPolicy Local: the node announces its own Kubernetes node's address, so
no second hop is needed, and a client's source address is kept.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from controllers.shared import layout, names
from valkey_operator.api.external import ExternalServiceType
from valkey_operator.core.rest import Obj


@attrs.frozen(kw_only=True)
class DesiredExternal:
    """What every per-pod Service of a cluster with spec.externalAccess is rendered from."""

    namespace: str
    cluster: str
    type: ExternalServiceType
    annotations: Mapping[str, str] = attrs.field(factory=dict)


def render_external_service(external: DesiredExternal, pod: str, pod_uid: str) -> Obj:
    """The Service of `pod` (owned by it, by uid), with the operator's labels and the user's annotations."""
    spec: Obj = {
        "type": str(external.type),
        "selector": {**names.cluster_selector(external.cluster), names.POD_NAME_LABEL: pod},
        "publishNotReadyAddresses": True,
        "ports": [{"name": "valkey", "port": layout.VALKEY_PORT, "targetPort": "valkey", "protocol": "TCP"}],
    }
    if external.type is ExternalServiceType.NODE_PORT:
        spec["externalTrafficPolicy"] = "Local"
    metadata: Obj = {
        "name": pod,
        "namespace": external.namespace,
        "labels": {**names.common_labels(external.cluster), names.POD_NAME_LABEL: pod},
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": pod_uid}],
    }
    if external.annotations:
        metadata["annotations"] = dict(external.annotations)
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata, "spec": spec}


def announced_address(service: Obj | None, host_ip: str | None) -> tuple[str, int] | None:
    """(host, port) clients reach the pod at through its Service, once the Service has one: the
    node's address and the nodePort, or the load balancer's first ingress IP (else hostname) and
    the Service port."""
    if service is None:
        return None
    spec = service.get("spec") or {}
    ports = spec.get("ports") or []
    if not ports:
        return None
    if spec.get("type") == ExternalServiceType.LOAD_BALANCER:
        ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
        for entry in ingress:
            host = entry.get("ip") or entry.get("hostname")
            if host:
                return str(host), int(ports[0].get("port") or layout.VALKEY_PORT)
        return None
    node_port = ports[0].get("nodePort")
    if not node_port or not host_ip:
        return None
    return host_ip, int(node_port)
