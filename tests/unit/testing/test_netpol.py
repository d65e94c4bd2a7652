"""The NetworkPolicy evaluator against the cases the Kubernetes documentation spells out."""

from __future__ import annotations

import pytest

from valkey_operator.core.rest import Obj
from valkey_testbed.netpol import Endpoint, allows, external, isolated, pod_endpoint, selects


def pod(
    namespace: str, ip: str = "10.0.0.1", ns_labels: dict[str, str] | None = None, **labels: str
) -> Endpoint:
    return Endpoint(
        namespace=namespace,
        labels=labels,
        namespace_labels={"kubernetes.io/metadata.name": namespace, **(ns_labels or {})},
        ip=ip,
        named_ports={("valkey", "TCP"): 6379, ("cluster-bus", "TCP"): 16379, ("dns", "UDP"): 53},
    )


def policy(namespace: str, spec: Obj, name: str = "p") -> Obj:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec}


DB = pod("prod", "10.0.0.10", role="db")
FRONTEND = pod("prod", "10.0.0.11", role="frontend")
OTHER_NS_FRONTEND = pod("dev", "10.0.1.11", role="frontend")
PROJECT_POD = pod("team", "10.0.2.1", ns_labels={"project": "myproject"}, role="anything")


def test_a_pod_no_policy_selects_accepts_everything() -> None:
    assert allows([], FRONTEND, DB, 6379)
    only_frontend = policy("prod", {"podSelector": {"matchLabels": {"role": "frontend"}}})
    assert not isolated([only_frontend], DB)
    assert allows([only_frontend], OTHER_NS_FRONTEND, DB, 6379)


def test_a_policy_in_another_namespace_does_not_isolate() -> None:
    deny_all = policy("dev", {"podSelector": {}})
    assert allows([deny_all], FRONTEND, DB, 6379)


def test_default_deny_an_empty_pod_selector_and_no_rules() -> None:
    deny_all = policy("prod", {"podSelector": {}, "policyTypes": ["Ingress"]})
    assert isolated([deny_all], DB)
    assert not allows([deny_all], FRONTEND, DB, 6379)


def test_absent_policy_types_means_ingress_and_egress_only_does_not_isolate_ingress() -> None:
    implied = policy("prod", {"podSelector": {}})
    egress_only = policy("prod", {"podSelector": {}, "policyTypes": ["Egress"]})
    assert not allows([implied], FRONTEND, DB, 6379)
    assert allows([egress_only], FRONTEND, DB, 6379)


def test_allow_all_an_empty_rule() -> None:
    allow_all = policy("prod", {"podSelector": {}, "ingress": [{}]})
    assert allows([allow_all], OTHER_NS_FRONTEND, DB, 6379)
    assert allows([allow_all], external("192.0.2.1"), DB, 12345)


def test_pod_selector_alone_means_the_policys_own_namespace() -> None:
    rule = {"from": [{"podSelector": {"matchLabels": {"role": "frontend"}}}]}
    p = policy("prod", {"podSelector": {"matchLabels": {"role": "db"}}, "ingress": [rule]})
    assert allows([p], FRONTEND, DB, 6379)
    assert not allows([p], OTHER_NS_FRONTEND, DB, 6379)


def test_an_empty_pod_selector_peer_is_every_pod_of_the_namespace() -> None:
    p = policy("prod", {"podSelector": {}, "ingress": [{"from": [{"podSelector": {}}]}]})
    assert allows([p], FRONTEND, DB, 6379)
    assert not allows([p], OTHER_NS_FRONTEND, DB, 6379)
    assert not allows([p], external("10.0.0.11"), DB, 6379)


def test_namespace_selector_alone_is_every_pod_there_and_empty_is_every_namespace() -> None:
    project = {"namespaceSelector": {"matchLabels": {"project": "myproject"}}}
    p = policy("prod", {"podSelector": {}, "ingress": [{"from": [project]}]})
    assert allows([p], PROJECT_POD, DB, 6379)
    assert not allows([p], FRONTEND, DB, 6379)  # its own namespace lacks the label
    everywhere = policy("prod", {"podSelector": {}, "ingress": [{"from": [{"namespaceSelector": {}}]}]})
    assert allows([everywhere], OTHER_NS_FRONTEND, DB, 6379)
    assert not allows([everywhere], external("10.0.0.11"), DB, 6379)


def test_both_selectors_in_one_peer_are_anded_in_two_peers_ored() -> None:
    """The documentation's `- namespaceSelector ... podSelector` versus `- namespaceSelector ...
    - podSelector` example."""
    ns = {"matchLabels": {"kubernetes.io/metadata.name": "dev"}}
    pods = {"matchLabels": {"role": "client"}}
    anded = policy(
        "prod", {"podSelector": {}, "ingress": [{"from": [{"namespaceSelector": ns, "podSelector": pods}]}]}
    )
    ored = policy(
        "prod", {"podSelector": {}, "ingress": [{"from": [{"namespaceSelector": ns}, {"podSelector": pods}]}]}
    )
    dev_client, dev_other, prod_client = (
        pod("dev", role="client"),
        pod("dev", role="x"),
        pod("prod", role="client"),
    )
    assert [allows([anded], s, DB, 6379) for s in (dev_client, dev_other, prod_client)] == [
        True,
        False,
        False,
    ]
    assert [allows([ored], s, DB, 6379) for s in (dev_client, dev_other, prod_client)] == [True, True, True]


def test_ip_block_with_except() -> None:
    block = {"ipBlock": {"cidr": "172.17.0.0/16", "except": ["172.17.1.0/24"]}}
    p = policy("prod", {"podSelector": {}, "ingress": [{"from": [block]}]})
    assert allows([p], external("172.17.2.9"), DB, 6379)
    assert not allows([p], external("172.17.1.9"), DB, 6379)
    assert not allows([p], external("10.1.1.1"), DB, 6379)
    assert not allows([p], external("2001:db8::1"), DB, 6379)


def test_ports_numeric_range_named_and_protocol() -> None:
    def with_ports(*ports: Obj) -> Obj:
        return policy("prod", {"podSelector": {}, "ingress": [{"ports": list(ports)}]})

    assert allows([with_ports({"port": 6379})], FRONTEND, DB, 6379)  # protocol defaults to TCP
    assert not allows([with_ports({"port": 6379})], FRONTEND, DB, 6380)
    assert not allows([with_ports({"protocol": "UDP", "port": 6379})], FRONTEND, DB, 6379)
    assert allows([with_ports({"port": 32000, "endPort": 32768})], FRONTEND, DB, 32768)
    assert not allows([with_ports({"port": 32000, "endPort": 32768})], FRONTEND, DB, 32769)
    assert allows([with_ports({"protocol": "TCP"})], FRONTEND, DB, 1)  # no port: all of the protocol
    named = with_ports({"port": "cluster-bus"})
    assert allows([named], FRONTEND, DB, 16379)
    assert not allows([named], FRONTEND, DB, 6379)
    bare = Endpoint(namespace="prod", labels={"role": "db"}, ip="10.0.0.12")  # no such named port
    assert not allows([named], FRONTEND, bare, 16379)
    assert allows([with_ports({"protocol": "UDP", "port": "dns"})], FRONTEND, DB, 53, "UDP")


def test_a_rule_needs_both_its_source_and_its_port() -> None:
    rule = {"from": [{"podSelector": {"matchLabels": {"role": "frontend"}}}], "ports": [{"port": 6379}]}
    p = policy("prod", {"podSelector": {}, "ingress": [rule]})
    assert allows([p], FRONTEND, DB, 6379)
    assert not allows([p], FRONTEND, DB, 16379)
    assert not allows([p], pod("prod", role="db"), DB, 6379)


def test_policies_and_rules_add_up() -> None:
    bus = policy("prod", {"podSelector": {}, "ingress": [{"ports": [{"port": 16379}]}]}, "bus")
    frontends = {"from": [{"podSelector": {"matchLabels": {"role": "frontend"}}}]}
    clients = policy("prod", {"podSelector": {}, "ingress": [frontends]}, "clients")
    assert allows([bus, clients], pod("prod", role="db"), DB, 16379)
    assert allows([bus, clients], FRONTEND, DB, 6379)
    assert not allows([bus, clients], pod("prod", role="db"), DB, 6379)


@pytest.mark.parametrize(
    ("expression", "labels", "expected"),
    [
        ({"key": "tier", "operator": "In", "values": ["a", "b"]}, {"tier": "a"}, True),
        ({"key": "tier", "operator": "In", "values": ["a", "b"]}, {"tier": "c"}, False),
        ({"key": "tier", "operator": "In", "values": ["a"]}, {}, False),
        ({"key": "tier", "operator": "NotIn", "values": ["a"]}, {"tier": "b"}, True),
        ({"key": "tier", "operator": "NotIn", "values": ["a"]}, {}, True),  # absent key matches NotIn
        ({"key": "tier", "operator": "NotIn", "values": ["a"]}, {"tier": "a"}, False),
        ({"key": "tier", "operator": "Exists"}, {"tier": ""}, True),
        ({"key": "tier", "operator": "Exists"}, {}, False),
        ({"key": "tier", "operator": "DoesNotExist"}, {}, True),
        ({"key": "tier", "operator": "DoesNotExist"}, {"tier": "a"}, False),
    ],
)
def test_match_expressions(expression: Obj, labels: dict[str, str], expected: bool) -> None:
    assert selects({"matchExpressions": [expression]}, labels) is expected


def test_match_labels_and_expressions_are_anded_and_empty_matches_all() -> None:
    selector = {"matchLabels": {"app": "x"}, "matchExpressions": [{"key": "tier", "operator": "Exists"}]}
    assert selects(selector, {"app": "x", "tier": "1"})
    assert not selects(selector, {"app": "x"})
    assert not selects(selector, {"tier": "1"})
    assert selects({}, {}) and selects({}, {"any": "thing"})
    with pytest.raises(ValueError, match="operator"):
        selects({"matchExpressions": [{"key": "k", "operator": "Gt", "values": ["1"]}]}, {"k": "2"})


def test_pod_endpoint_reads_labels_namespace_ip_and_named_ports() -> None:
    body = {
        "metadata": {"name": "p", "namespace": "prod", "labels": {"role": "db"}},
        "spec": {
            "containers": [
                {"name": "a", "ports": [{"name": "valkey", "containerPort": 6379}]},
                {
                    "name": "b",
                    "ports": [
                        {"name": "metrics", "containerPort": 9121, "protocol": "TCP"},
                        {"containerPort": 1},
                    ],
                },
            ]
        },
        "status": {"podIP": "127.1.0.5"},
    }
    namespace = {"metadata": {"name": "prod", "labels": {"kubernetes.io/metadata.name": "prod"}}}
    endpoint = pod_endpoint(body, namespace)
    assert endpoint.named_ports == {("valkey", "TCP"): 6379, ("metrics", "TCP"): 9121}
    assert (endpoint.ip, endpoint.namespace, endpoint.labels) == ("127.1.0.5", "prod", {"role": "db"})
    with pytest.raises(ValueError):
        pod_endpoint(body, {"metadata": {"name": "dev"}})
