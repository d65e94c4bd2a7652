"""spec.externalAccess and status.externalEndpoints: cluster clients outside Kubernetes.

A cluster client follows MOVED redirects and CLUSTER SLOTS to the addresses the nodes announce. With
externalAccess every pod gets a Service of its own (NodePort or LoadBalancer) and every node
announces that Service's address to clients (cluster-announce-hostname and -client-port), while the
cluster bus and the operator keep using pod IPs (docs/external-access.md).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

import attrs

from valkey_operator.api.convert import Model
from valkey_operator.api.fields import described, item, qualified_keys, schema
from valkey_operator.api.limits import MAX_ANNOTATION_VALUE, MAX_ANNOTATIONS, MAX_NAME


class ExternalServiceType(enum.StrEnum):
    NODE_PORT = "NodePort"
    LOAD_BALANCER = "LoadBalancer"


@described(
    "Reach the cluster from outside Kubernetes: one Service per pod, whose address every node "
    "announces to clients."
)
@attrs.frozen(kw_only=True)
class ExternalAccess(Model):
    type: ExternalServiceType = attrs.field(
        metadata=schema(
            "NodePort: each pod's Service gets a nodePort and the node announces its Kubernetes node's "
            "address (the pod's status.hostIP, the node's InternalIP) with that port "
            "(externalTrafficPolicy Local: no second hop). LoadBalancer: each pod's Service gets a load "
            "balancer and the node announces its ingress IP (or hostname) with port 6379; a replaced pod "
            "gets a new Service, so a new load balancer. A node joins the cluster only once its "
            "address is announced.",
            max_length=16,
        )
    )
    service_annotations: Mapping[str, str] = attrs.field(
        factory=dict,
        metadata=schema(
            "Annotations on every per-pod Service (for example a cloud's load-balancer settings). "
            "A change is applied to the existing Services.",
            max_properties=MAX_ANNOTATIONS,
            items=item("Annotation value.", max_length=MAX_ANNOTATION_VALUE),
            rules=[qualified_keys("annotation")],
        ),
    )


@described("The address one node announces to clients.")
@attrs.frozen(kw_only=True)
class ExternalEndpoint(Model):
    pod: str = attrs.field(metadata=schema("Name of the pod running the node.", max_length=MAX_NAME))
    host: str = attrs.field(
        metadata=schema(
            "The announced host: the node's address (NodePort) or the load balancer's ingress IP or "
            "hostname (LoadBalancer).",
            max_length=MAX_NAME,
        )
    )
    port: int = attrs.field(
        metadata=schema(
            "The announced port: the nodePort, or the Service port (6379) of a load balancer.",
            fmt="int32",
            minimum=1,
            maximum=65535,
        )
    )
