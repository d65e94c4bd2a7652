"""spec.networkPolicy: who may reach a cluster's ports, as the Kubernetes NetworkPolicy API spells peers.

The peers are the upstream NetworkPolicyPeer, LabelSelector and IPBlock, field for field, so what a
user writes here is copied into the rendered NetworkPolicy unchanged (controllers/cluster/render/
network_policy.py) and means what the API documents. Admission checks what the API server would
check on the NetworkPolicy itself (a peer is an ipBlock or selectors; In/NotIn need values;
Exists/DoesNotExist take none; CIDRs parse and except lies inside cidr), so a bad peer is refused
at the ValkeyCluster, not discovered when the operator's apply fails.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

import attrs

from valkey_operator.api.convert import Model
from valkey_operator.api.fields import described, item, lit, raw, rule, schema
from valkey_operator.api.limits import (
    LABEL_VALUE,
    MAX_CIDR,
    MAX_CIDR_EXCEPT,
    MAX_LABEL_VALUE,
    MAX_POLICY_PEERS,
    MAX_QUALIFIED_NAME,
    MAX_SELECTOR_EXPRESSIONS,
    MAX_SELECTOR_LABELS,
    MAX_SELECTOR_VALUES,
    QUALIFIED_NAME,
)


class SelectorOperator(enum.StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"


_KEY_MESSAGE = (
    "a label key is [prefix/]name: a DNS subdomain prefix, a name of letters, digits, '-', '_', '.'"
)
_VALUE_MESSAGE = (
    "a label value is at most 63 letters, digits, '-', '_' and '.', starting and ending with a "
    "letter or digit"
)


@described(
    "A label selector requirement: key, operator and values.",
    rules=[
        rule(
            "(self.operator == 'In' || self.operator == 'NotIn') == "
            "(has(self.values) && self.values.size() > 0)",
            "In and NotIn need values; Exists and DoesNotExist take none",
            field_path=".values",
        )
    ],
)
@attrs.frozen(kw_only=True)
class SelectorRequirement(Model):
    key: str = attrs.field(
        metadata=schema(
            "The label key the requirement applies to.",
            min_length=1,
            max_length=MAX_QUALIFIED_NAME,
            rules=[rule(f"self.matches({raw(QUALIFIED_NAME)})", _KEY_MESSAGE)],
        )
    )
    operator: SelectorOperator = attrs.field(
        metadata=schema("In, NotIn, Exists or DoesNotExist.", max_length=16)
    )
    values: tuple[str, ...] = attrs.field(
        default=(),
        metadata=schema(
            "The values of In and NotIn (at least one); empty with Exists and DoesNotExist.",
            max_items=MAX_SELECTOR_VALUES,
            items=item(
                "A label value.",
                max_length=MAX_LABEL_VALUE,
                rules=[rule(f"self.matches({raw(LABEL_VALUE)})", _VALUE_MESSAGE)],
            ),
        ),
    )


@described(
    "A label selector, as in a NetworkPolicy: matchLabels and matchExpressions are ANDed; an empty "
    "selector ({}) selects every pod (or namespace)."
)
@attrs.frozen(kw_only=True)
class LabelSelector(Model):
    match_labels: Mapping[str, str] = attrs.field(
        factory=dict,
        metadata=schema(
            "Labels the object must carry with exactly these values.",
            max_properties=MAX_SELECTOR_LABELS,
            items=item("Label value.", max_length=MAX_LABEL_VALUE),
            rules=[
                rule(f"self.all(k, k.matches({raw(QUALIFIED_NAME)}))", _KEY_MESSAGE),
                rule(f"self.all(k, self[k].matches({raw(LABEL_VALUE)}))", _VALUE_MESSAGE),
            ],
        ),
    )
    match_expressions: tuple[SelectorRequirement, ...] = attrs.field(
        default=(),
        metadata=schema(
            "Requirements the object's labels must all meet.", max_items=MAX_SELECTOR_EXPRESSIONS
        ),
    )


_CIDR_MESSAGE = "must be a CIDR, for example 10.0.0.0/16 or 2001:db8::/48"


@described(
    "An IP block, as in a NetworkPolicy: cidr minus the except ranges. Pod IPs are meant to be "
    "selected by pod and namespace selectors; ipBlock is for addresses outside the cluster.",
    rules=[
        rule(
            "!has(self.except) || !isCIDR(self.cidr) || "
            "self.except.all(e, !isCIDR(e) || (cidr(self.cidr).containsCIDR(e) && "
            "cidr(e).prefixLength() > cidr(self.cidr).prefixLength()))",
            "each except range must lie strictly inside cidr",
            field_path=".except",
        )
    ],
)
@attrs.frozen(kw_only=True)
class IpBlock(Model):
    cidr: str = attrs.field(
        metadata=schema(
            "The addresses allowed, as a CIDR.",
            min_length=1,
            max_length=MAX_CIDR,
            rules=[
                rule(
                    "isCIDR(self)",
                    _CIDR_MESSAGE,
                    message_expression=lit(_CIDR_MESSAGE + "; got ") + " + self",
                )
            ],
        )
    )
    except_: tuple[str, ...] = attrs.field(
        default=(),
        metadata=schema(
            "CIDRs inside cidr that are not allowed.",
            json="except",
            max_items=MAX_CIDR_EXCEPT,
            items=item(
                "A CIDR inside cidr.",
                max_length=MAX_CIDR,
                rules=[rule("isCIDR(self)", _CIDR_MESSAGE)],
            ),
        ),
    )


@described(
    "Who may connect, as a NetworkPolicyPeer: podSelector alone (pods in the cluster's namespace), "
    "namespaceSelector alone (every pod in those namespaces), both (those pods in those namespaces), "
    "or ipBlock alone.",
    rules=[
        rule(
            "has(self.ipBlock) ? !has(self.podSelector) && !has(self.namespaceSelector) : "
            "(has(self.podSelector) || has(self.namespaceSelector))",
            "a peer sets ipBlock alone, or podSelector and/or namespaceSelector",
        )
    ],
)
@attrs.frozen(kw_only=True)
class NetworkPolicyPeer(Model):
    pod_selector: LabelSelector | None = attrs.field(
        default=None,
        metadata=schema(
            "Pods allowed: in the cluster's namespace, or in the namespaces namespaceSelector selects."
        ),
    )
    namespace_selector: LabelSelector | None = attrs.field(
        default=None,
        metadata=schema(
            "Namespaces (by their labels, kubernetes.io/metadata.name among them) whose pods are allowed."
        ),
    )
    ip_block: IpBlock | None = attrs.field(default=None, metadata=schema("Addresses allowed."))


def _peers(description: str) -> tuple[NetworkPolicyPeer, ...]:
    return attrs.field(default=(), metadata=schema(description, max_items=MAX_POLICY_PEERS))


@described(
    "The cluster's NetworkPolicy (on by default): the cluster bus only from the cluster's own pods; "
    "the client port from clientFrom, the cluster's own pods and the operator; the exporter's port "
    "from metricsFrom. It takes effect only where the cluster's network plugin enforces "
    "NetworkPolicy."
)
@attrs.frozen(kw_only=True)
class NetworkPolicySpec(Model):
    enabled: bool = attrs.field(
        default=True,
        metadata=schema(
            "Render the NetworkPolicy <cluster> selecting the cluster's pods. false deletes it, leaving "
            "every port open to every pod.",
            publish_default=True,
        ),
    )
    client_from: tuple[NetworkPolicyPeer, ...] = _peers(
        "Who may connect to the client port (6379) besides the cluster's own pods (replication) and "
        "the operator. Empty: every pod in the cluster's namespace; with spec.externalAccess, every "
        "source (list your external clients' ipBlocks here to narrow it)."
    )
    metrics_from: tuple[NetworkPolicyPeer, ...] = _peers(
        "Who may scrape the exporter sidecar's port (9121, with spec.metrics.exporter.enabled), "
        "typically Prometheus' namespace and pods. Empty: every pod in the cluster's namespace."
    )


def network_policy_enabled(spec: NetworkPolicySpec | None) -> bool:
    """Unset means on: the default is the locked bus."""
    return spec is None or spec.enabled
