"""The cluster's NetworkPolicy as rendered, judged by the evaluator (testbed/valkey_testbed/netpol.py):
the bus only from the cluster's own pods, the client port per clientFrom plus the cluster's pods and
the operator, the exporter port per metricsFrom; switched off, it is deleted (only if it is ours)."""

from __future__ import annotations

import attrs
from decide_harness import NAME, NAMESPACE, run, step, world
from render_support import context

from controllers.cluster.decision.actions import DeleteObject
from controllers.cluster.decision.owned import owned_objects, retired_objects
from controllers.cluster.render.network_policy import operator_peer, render_network_policy
from controllers.cluster.render.objects import render_service
from controllers.shared import layout, names
from valkey_operator.core.resource import NETWORK_POLICIES
from valkey_testbed.netpol import Endpoint, allows

PORTS = {("valkey", "TCP"): layout.VALKEY_PORT, ("cluster-bus", "TCP"): layout.CLUSTER_BUS_PORT}
EXPORTER_PORTS = {**PORTS, ("metrics", "TCP"): 9121}
OPERATOR = operator_peer("valkey-system", {"app.kubernetes.io/name": "valkey-operator"})


def pod(namespace: str, ports: dict[tuple[str, str], int] | None = None, **labels: str) -> Endpoint:
    return Endpoint(
        namespace=namespace,
        labels=labels,
        namespace_labels={"kubernetes.io/metadata.name": namespace, "team": namespace},
        ip="127.1.0.9",
        named_ports=ports or {},
    )


def member(
    cluster: str = "cache", namespace: str = "team-a", ports: dict[tuple[str, str], int] = PORTS
) -> Endpoint:
    return pod(namespace, ports, **names.pod_labels(cluster, 0, "h", f"{cluster}-0-bcdfg"))


NODE = member()
SIBLING = member()
OTHER_CLUSTER = member("cache2")
SAME_LABELS_ELSEWHERE = member(namespace="team-b")
APP = pod("team-a", role="app")
STRANGER = pod("team-b", role="app")
OPERATOR_POD = pod("valkey-system", **{"app.kubernetes.io/name": "valkey-operator"})
OTHER_IN_OPERATOR_NS = pod("valkey-system", **{"app.kubernetes.io/name": "other"})


def reach(ctx_policy: dict[str, object], port: int, destination: Endpoint = NODE) -> list[bool]:
    sources = (
        SIBLING,
        OTHER_CLUSTER,
        SAME_LABELS_ELSEWHERE,
        APP,
        STRANGER,
        OPERATOR_POD,
        OTHER_IN_OPERATOR_NS,
    )
    return [allows([ctx_policy], source, destination, port) for source in sources]


def test_by_default_the_bus_is_the_clusters_own_and_clients_are_the_namespace_and_the_operator() -> None:
    policy = render_network_policy(attrs.evolve(context(), operator_peer=OPERATOR))
    assert policy["metadata"]["name"] == "cache"
    assert policy["metadata"]["ownerReferences"][0]["controller"] is True
    #                                       sibling other  elsewhere app   stranger op    op-ns-other
    assert reach(policy, layout.CLUSTER_BUS_PORT) == [True, False, False, False, False, False, False]
    assert reach(policy, layout.VALKEY_PORT) == [True, True, False, True, False, True, False]
    assert reach(policy, 9121) == [False] * 7  # no exporter: nothing else is open
    assert reach(policy, 22) == [False] * 7


def test_client_from_narrows_clients_but_never_the_clusters_pods_or_the_operator() -> None:
    client_from = [{"podSelector": {"matchLabels": {"role": "app"}}, "namespaceSelector": {}}]
    ctx = attrs.evolve(context(networkPolicy={"clientFrom": client_from}), operator_peer=OPERATOR)
    policy = render_network_policy(ctx)
    assert reach(policy, layout.VALKEY_PORT) == [True, False, False, True, True, True, False]
    assert reach(policy, layout.CLUSTER_BUS_PORT) == [True, False, False, False, False, False, False]


def test_without_an_operator_peer_only_the_namespace_and_the_cluster_reach_the_client_port() -> None:
    policy = render_network_policy(context())
    assert reach(policy, layout.VALKEY_PORT) == [True, True, False, True, False, False, False]
    whole_namespace = render_network_policy(
        attrs.evolve(context(), operator_peer=operator_peer("valkey-system", {}))
    )
    assert reach(whole_namespace, layout.VALKEY_PORT)[-2:] == [True, True]
    assert operator_peer(None, {"a": "b"}) is None


def test_the_exporter_port_opens_to_metrics_from_only_while_the_sidecar_runs() -> None:
    prometheus = pod("monitoring", app="prometheus")
    metrics_from = [{"namespaceSelector": {"matchLabels": {"team": "monitoring"}}}]
    on = {"metrics": {"exporter": {"enabled": True}}}
    scraped = member(ports=EXPORTER_PORTS)
    default = render_network_policy(context(**on))
    assert allows([default], APP, scraped, 9121)
    assert not allows([default], prometheus, scraped, 9121)
    narrowed = render_network_policy(context(**on, networkPolicy={"metricsFrom": metrics_from}))
    assert allows([narrowed], prometheus, scraped, 9121)
    assert not allows([narrowed], APP, scraped, 9121)
    assert not allows([narrowed], prometheus, scraped, layout.VALKEY_PORT)


def test_rendered_unless_switched_off_then_retired() -> None:
    on, off = context(), context(networkPolicy={"enabled": False})
    assert [o.resource for o in owned_objects(on, None)].count(NETWORK_POLICIES) == 1
    assert NETWORK_POLICIES not in [o.resource for o in owned_objects(off, None)]
    assert retired_objects(on) == ()
    assert retired_objects(off) == ((NETWORK_POLICIES, "cache"),)
    assert render_network_policy(on)["spec"]["podSelector"] == {
        "matchLabels": render_service(on)["spec"]["selector"]
    }


def test_switched_off_the_policy_is_deleted_and_one_another_owner_controls_is_left() -> None:
    found = run(world(1, 0))
    key = f"NetworkPolicy/{NAME}"
    assert key in found.sim.objects
    found.edit(networkPolicy={"enabled": False})
    decision = step(found)
    deletes = [a for a in decision.actions if isinstance(a, DeleteObject)]
    assert [(a.resource, a.name) for a in deletes] == [(NETWORK_POLICIES, NAME)]
    assert key not in found.sim.objects
    foreign = {
        "metadata": {"name": NAME, "namespace": NAMESPACE, "uid": "someone-elses"},
        "kind": "NetworkPolicy",
    }
    found.sim.objects[key] = foreign
    assert not any(isinstance(a, DeleteObject) for a in step(found).actions)
    assert found.sim.objects[key] == foreign
