"""A NetworkPolicy evaluator: would these policies let a connection in? (ingress only; test bed code)

The test bed has no network plugin, so nothing enforces a NetworkPolicy and no packet can tell
whether one is right. This module answers from the API's documented semantics
(https://kubernetes.io/docs/concepts/services-networking/network-policies/ and the
networking.k8s.io/v1 reference), applied to objects read from the API server:

- A pod is isolated for ingress when some policy of its namespace selects it (spec.podSelector;
  `{}` selects every pod there) and lists Ingress in policyTypes; absent policyTypes always
  means Ingress. A pod no policy isolates accepts every connection.
- An isolated pod accepts a connection that at least one ingress rule of at least one of those
  policies allows (policies and rules add up; none can deny). A policy with no ingress rules
  allows nothing.
- A rule allows a connection when its source matches one of `from` (absent or empty: every
  source) and its port one of `ports` (absent or empty: every port).
- A peer: podSelector alone is pods of the policy's own namespace; namespaceSelector alone is
  every pod of the selected namespaces; both in one peer are ANDed (those pods in those
  namespaces); ipBlock is the source's IP inside cidr and outside every except.
- A selector ANDs matchLabels and matchExpressions (In: the key is present with a listed value;
  NotIn: absent, or not a listed value; Exists; DoesNotExist); an empty selector matches all.
- A port: protocol (default TCP) and port, a number or a name resolved against the destination
  pod's container ports (name and protocol); absent port is every port of the protocol; endPort
  makes a numeric port a range.

Egress is not evaluated: the cluster's policy sets none.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from valkey_operator.core.rest import Obj

__all__ = ["Endpoint", "allows", "external", "isolated", "pod_endpoint", "selects"]

Labels = Mapping[str, str]


@attrs.frozen(kw_only=True)
class Endpoint:
    """One end of a connection: a pod (namespace, labels, its namespace's labels, IP, named ports)
    or an address outside the cluster (namespace None)."""

    namespace: str | None
    labels: Labels = attrs.field(factory=dict)
    namespace_labels: Labels = attrs.field(factory=dict)
    ip: str | None = None
    named_ports: Mapping[tuple[str, str], int] = attrs.field(factory=dict)
    """(port name, protocol) -> containerPort, from every container of the pod."""


def pod_endpoint(pod: Obj, namespace: Obj) -> Endpoint:
    """The endpoint of a pod as read from the API server, with its Namespace object."""
    if namespace["metadata"]["name"] != pod["metadata"]["namespace"]:
        raise ValueError(f"{namespace['metadata']['name']} is not the namespace of {pod['metadata']['name']}")
    named = {
        (port["name"], port.get("protocol", "TCP")): int(port["containerPort"])
        for container in pod["spec"].get("containers", ())
        for port in container.get("ports", ())
        if port.get("name")
    }
    return Endpoint(
        namespace=pod["metadata"]["namespace"],
        labels=dict(pod["metadata"].get("labels") or {}),
        namespace_labels=dict(namespace["metadata"].get("labels") or {}),
        ip=(pod.get("status") or {}).get("podIP"),
        named_ports=named,
    )


def external(ip: str) -> Endpoint:
    """An address outside the cluster: only an ipBlock can match it."""
    return Endpoint(namespace=None, ip=ip)


def selects(selector: Obj, labels: Labels) -> bool:
    """Whether a LabelSelector matches labels (an empty selector matches everything)."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    return all(_requirement(expression, labels) for expression in selector.get("matchExpressions") or ())


def _requirement(expression: Obj, labels: Labels) -> bool:
    key, operator, values = expression["key"], expression["operator"], expression.get("values") or ()
    match operator:
        case "In":
            return key in labels and labels[key] in values
        case "NotIn":
            return key not in labels or labels[key] not in values
        case "Exists":
            return key in labels
        case "DoesNotExist":
            return key not in labels
    raise ValueError(f"unknown label selector operator {operator!r}")


def _ingress_policies(policies: Iterable[Obj], pod: Endpoint) -> list[Obj]:
    """The policies that isolate pod for ingress."""
    return [
        policy
        for policy in policies
        if policy["metadata"].get("namespace") == pod.namespace
        and "Ingress" in (policy["spec"].get("policyTypes") or ["Ingress"])
        and selects(policy["spec"].get("podSelector") or {}, pod.labels)
    ]


def isolated(policies: Iterable[Obj], pod: Endpoint) -> bool:
    """Whether some policy selects pod for ingress (then only what a rule allows gets in)."""
    return bool(_ingress_policies(policies, pod))


def _peer(peer: Obj, policy_namespace: str, source: Endpoint) -> bool:
    if "ipBlock" in peer:
        return _in_block(peer["ipBlock"], source.ip)
    if source.namespace is None:  # outside the cluster: only an ipBlock names it
        return False
    pods, namespaces = peer.get("podSelector"), peer.get("namespaceSelector")
    if pods is None and namespaces is None:
        raise ValueError(f"a peer needs podSelector, namespaceSelector or ipBlock: {peer}")
    if namespaces is None:
        in_namespace = source.namespace == policy_namespace
    else:
        in_namespace = selects(namespaces, source.namespace_labels)
    return in_namespace and (pods is None or selects(pods, source.labels))


def _in_block(block: Obj, ip: str | None) -> bool:
    if ip is None:
        return False
    address = ipaddress.ip_address(ip)
    cidr = ipaddress.ip_network(block["cidr"], strict=False)
    if address.version != cidr.version or address not in cidr:
        return False
    excluded = (ipaddress.ip_network(text, strict=False) for text in block.get("except") or ())
    return not any(address.version == net.version and address in net for net in excluded)


def _port(entry: Obj, destination: Endpoint, port: int, protocol: str) -> bool:
    wanted_protocol = entry.get("protocol") or "TCP"
    if wanted_protocol != protocol:
        return False
    given: Any = entry.get("port")
    if given is None:
        return True
    if isinstance(given, str) and not given.isdigit():
        resolved = destination.named_ports.get((given, protocol))
        return resolved == port
    low = int(given)
    high = int(entry.get("endPort") or low)
    return low <= port <= high


def _rule(
    rule: Obj, namespace: str, source: Endpoint, destination: Endpoint, port: int, protocol: str
) -> bool:
    peers: Sequence[Obj] = rule.get("from") or ()
    ports: Sequence[Obj] = rule.get("ports") or ()
    from_ok = not peers or any(_peer(peer, namespace, source) for peer in peers)
    port_ok = not ports or any(_port(entry, destination, port, protocol) for entry in ports)
    return from_ok and port_ok


def allows(
    policies: Iterable[Obj], source: Endpoint, destination: Endpoint, port: int, protocol: str = "TCP"
) -> bool:
    """Whether a connection from source to destination's port gets in under these policies."""
    applying = _ingress_policies(policies, destination)
    if not applying:
        return True
    return any(
        _rule(rule, policy["metadata"]["namespace"], source, destination, port, protocol)
        for policy in applying
        for rule in policy["spec"].get("ingress") or ()
    )
