"""The cluster's NetworkPolicy (spec.networkPolicy, on by default): who may reach which port.

Without TLS nothing authenticates the cluster bus: any pod that reaches 16379 can gossip its way
into the cluster. The policy selects every pod of the cluster and admits, by named port (the
Valkey container's `valkey` and `cluster-bus`, the sidecar's `metrics`):

- cluster-bus: the cluster's own pods only;
- valkey (clients, replication, the operator's admin connection): the cluster's own pods (a
  replica replicates over it), the operator's pods (`operator_peer`), and spec clientFrom,
  by default every pod of the namespace; with spec.externalAccess and no clientFrom, every
  source (external clients arrive from addresses no selector names: list them in clientFrom's
  ipBlocks to narrow it);
- metrics (only while the exporter sidecar runs): spec metricsFrom, by default every pod of the
  namespace.

Any other port of the pods is closed to everyone once the policy selects them (NetworkPolicy is
allow-list only). Enforcement is the network plugin's: the API server only stores the object.
"""

from __future__ import annotations

from collections.abc import Mapping

from controllers.cluster.render import exporter
from controllers.cluster.render.context import RenderContext
from controllers.shared import names
from valkey_operator.api.network import NetworkPolicyPeer, network_policy_enabled
from valkey_operator.core.rest import Obj

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
"""The label the API server sets on every namespace to its own name (immutable, since 1.22)."""
VALKEY_PORT_NAME = "valkey"
BUS_PORT_NAME = "cluster-bus"
EVERY_POD_OF_THE_NAMESPACE: Obj = {"podSelector": {}}


def enabled(ctx: RenderContext) -> bool:
    return network_policy_enabled(ctx.cluster.spec.network_policy)


def operator_peer(namespace: str | None, pod_labels: Mapping[str, str]) -> Obj | None:
    """The operator's pods: in its namespace, with its pod labels when known (else every pod there).

    None when the operator does not know its namespace (run outside the cluster: it is no pod, and
    whether a policy admits the node's own traffic is the network plugin's choice)."""
    if not namespace:
        return None
    peer: Obj = {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}}}
    if pod_labels:
        peer["podSelector"] = {"matchLabels": dict(pod_labels)}
    return peer


def _peers(given: tuple[NetworkPolicyPeer, ...]) -> list[Obj]:
    return [peer.to_dict() for peer in given] or [EVERY_POD_OF_THE_NAMESPACE]


def _rule(peers: list[Obj], port: str) -> Obj:
    return {"from": peers, "ports": [{"protocol": "TCP", "port": port}]}


def render_network_policy(ctx: RenderContext) -> Obj:
    """The policy as the API server stores it (policyTypes and protocol spelled out: no drift)."""
    spec = ctx.cluster.spec.network_policy
    own = {"podSelector": {"matchLabels": names.cluster_selector(ctx.name)}}
    operator = [ctx.operator_peer] if ctx.operator_peer else []
    given = spec.client_from if spec else ()
    if given or ctx.cluster.spec.external_access is None:
        client_rule = _rule([own, *operator, *_peers(given)], VALKEY_PORT_NAME)
    else:  # clients outside Kubernetes come from addresses no selector names
        client_rule = {"ports": [{"protocol": "TCP", "port": VALKEY_PORT_NAME}]}
    ingress = [_rule([own], BUS_PORT_NAME), client_rule]
    if exporter.enabled(ctx):
        ingress.append(_rule(_peers(spec.metrics_from if spec else ()), exporter.PORT_NAME))
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": ctx.metadata(names.network_policy_name(ctx.name)),
        "spec": {
            "podSelector": {"matchLabels": names.cluster_selector(ctx.name)},
            "policyTypes": ["Ingress"],
            "ingress": ingress,
        },
    }
