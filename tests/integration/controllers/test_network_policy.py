"""A ValkeyCluster's NetworkPolicy on the real API server, judged against real pods.

The test bed has no network plugin, so no packet can prove a policy; the policy the operator wrote
is read back from the API server and evaluated (testbed/valkey_testbed/netpol.py, the API's
documented semantics) for connections between real pods: the cluster's own, another cluster's in
the same namespace, a pod elsewhere carrying the cluster's very labels, an application pod, the
operator's pod (by the namespace and labels the operator is told) and its neighbour.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from cluster_scoped import ClusterScoped
from inprocess_operator import Operator
from kubernetes_asyncio import client as k8s

from controllers.options import ControllerOptions
from controllers.shared import layout, names
from valkey_operator.api.resources import VALKEY_CLUSTERS, VALKEY_CONFIGS, VALKEY_IMAGES
from valkey_operator.core.client import Client
from valkey_operator.core.resource import NAMESPACES, NETWORK_POLICIES, PODS
from valkey_operator.core.rest import Obj
from valkey_testbed import images
from valkey_testbed.images import BUSYBOX_IMAGE, OPERATOR_IMAGE
from valkey_testbed.netpol import Endpoint, allows, isolated, pod_endpoint
from valkey_testbed.operatorproc import LOOPBACK_NETWORKS
from valkey_testbed.wait import NotYet, eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300), pytest.mark.usefixtures("valkey_crds")]

OPERATOR_LABELS = (("app.kubernetes.io/instance", "netpol"), ("app.kubernetes.io/name", "valkey-operator"))
BUS, CLIENT = layout.CLUSTER_BUS_PORT, layout.VALKEY_PORT


@pytest_asyncio.fixture
async def places(kube: Client, namespace: str) -> AsyncIterator[tuple[str, str]]:
    """Two more namespaces: the operator's, and an unrelated one."""
    made = (f"op-{namespace[-12:]}", f"else-{namespace[-12:]}")
    for name in made:
        await kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield made
    for name in made:
        await kube.delete(NAMESPACES, name)


@pytest_asyncio.fixture
async def catalog(kube: Client, namespace: str) -> AsyncIterator[ClusterScoped]:
    made = ClusterScoped(kube, namespace[-6:])
    yield made
    await made.cleanup()


async def sleeper(kube: Client, namespace: str, name: str, labels: dict[str, str]) -> None:
    """A real pod (busybox sleeping) with these labels."""
    container = {"name": "sleep", "image": BUSYBOX_IMAGE, "command": ["sleep", "3600"]}
    spec = {
        "containers": [container],
        "terminationGracePeriodSeconds": 0,
        "automountServiceAccountToken": False,
    }
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
    }
    await kube.create(PODS, {**body, "spec": spec})


async def create_cluster(kube: Client, namespace: str, name: str, config: str, replicas: int) -> None:
    spec = {"configRef": config, "shards": 1, "replicasPerShard": replicas}
    body = {"metadata": {"name": name, "namespace": namespace}, "spec": spec}
    await kube.create(
        VALKEY_CLUSTERS, {"apiVersion": VALKEY_CLUSTERS.api_version, "kind": VALKEY_CLUSTERS.kind, **body}
    )


async def running(kube: Client, namespace: str, selector: str, count: int) -> list[Obj]:
    """The pods matching selector, once count of them run with an IP."""

    async def ready() -> list[Obj] | NotYet:
        pods = await kube.list(PODS, namespace, label_selector=selector)
        with_ip = [pod for pod in pods if (pod.get("status") or {}).get("podIP")]
        return with_ip if len(with_ip) == count else NotYet([p["metadata"]["name"] for p in with_ip])

    return await eventually(ready, f"{count} pods {selector} in {namespace} running", 120, interval=0.2)


async def endpoints(kube: Client, pods: list[Obj]) -> list[Endpoint]:
    found = []
    for pod in pods:
        namespace = await kube.get(NAMESPACES, pod["metadata"]["namespace"])
        found.append(pod_endpoint(pod, namespace))
    return found


async def policy_where(kube: Client, namespace: str, name: str, holds: str) -> list[Obj]:
    """Every NetworkPolicy of the namespace, once the cluster's is there and mentions holds."""

    async def written() -> list[Obj] | NotYet:
        policies = await kube.list(NETWORK_POLICIES, namespace)
        ours = [p for p in policies if p["metadata"]["name"] == name]
        return (
            policies
            if ours and holds in str(ours[0]["spec"])
            else NotYet([p["metadata"]["name"] for p in policies])
        )

    return await eventually(written, f"the NetworkPolicy {name} holding {holds}", 60, interval=0.2)


async def test_the_bus_is_the_clusters_own_clients_follow_the_spec_and_off_deletes_the_policy(
    kube: Client, kube_api: k8s.ApiClient, namespace: str, places: tuple[str, str], catalog: ClusterScoped
) -> None:
    operator_ns, elsewhere = places
    reference = images.newest_image()
    version = images.valkey_version(reference)
    image = {"repository": "valkey/valkey", "tag": version, "version": version}
    await catalog.create(VALKEY_IMAGES, {"metadata": {"name": catalog("img")}, "spec": image})
    await catalog.create(
        VALKEY_CONFIGS, {"metadata": {"name": catalog("cfg")}, "spec": {"imageRef": catalog("img")}}
    )
    options = ControllerOptions(
        node_networks=LOOPBACK_NETWORKS,
        operator_image=OPERATOR_IMAGE,
        operator_namespace=operator_ns,
        operator_pod_labels=OPERATOR_LABELS,
    )
    operator = Operator(kube_api, namespace, options=options)
    await operator.start()
    try:
        await create_cluster(kube, namespace, "a", catalog("cfg"), replicas=1)
        await create_cluster(kube, namespace, "b", catalog("cfg"), replicas=0)
        await sleeper(kube, operator_ns, "operator", dict(OPERATOR_LABELS))
        await sleeper(kube, operator_ns, "neighbour", {"app.kubernetes.io/name": "something-else"})
        await sleeper(kube, elsewhere, "impostor", names.pod_labels("a", 0, "forged", "impostor"))
        await sleeper(kube, namespace, "app", {"role": "app"})

        first, second = await endpoints(kube, await running(kube, namespace, f"{names.CLUSTER_LABEL}=a", 2))
        (other_cluster,) = await endpoints(
            kube, await running(kube, namespace, f"{names.CLUSTER_LABEL}=b", 1)
        )
        (app,) = await endpoints(kube, await running(kube, namespace, "role=app", 1))
        (impostor,) = await endpoints(kube, await running(kube, elsewhere, "", 1))
        operator_pod, neighbour = await endpoints(
            kube,
            [await kube.get(PODS, name, operator_ns) for name in ("operator", "neighbour")],
        )
        sources = {
            "a's other pod": second,
            "b's pod": other_cluster,
            "app": app,
            "a's labels elsewhere": impostor,
            "operator": operator_pod,
            "operator's neighbour": neighbour,
        }

        def reach(policies: list[Obj], port: int) -> dict[str, bool]:
            return {what: allows(policies, source, first, port) for what, source in sources.items()}

        # By default: the bus only from a's own pods; the client port from the namespace and the operator.
        policies = await policy_where(kube, namespace, "a", "cluster-bus")
        assert {p["metadata"]["name"] for p in policies} == {"a", "b"}
        assert reach(policies, BUS) == {
            "a's other pod": True,
            "b's pod": False,
            "app": False,
            "a's labels elsewhere": False,
            "operator": False,
            "operator's neighbour": False,
        }
        assert reach(policies, CLIENT) == {
            "a's other pod": True,
            "b's pod": True,
            "app": True,
            "a's labels elsewhere": False,
            "operator": True,
            "operator's neighbour": False,
        }
        assert not allows(policies, app, first, 9121)  # no exporter: no other port is open
        assert allows(policies, first, other_cluster, CLIENT) and not allows(
            policies, first, other_cluster, BUS
        )

        # clientFrom narrows the clients; a's own pods (replication) and the operator stay.
        client_from = [{"podSelector": {"matchLabels": {"role": "app"}}}]
        await kube.patch(
            VALKEY_CLUSTERS, "a", {"spec": {"networkPolicy": {"clientFrom": client_from}}}, namespace
        )
        policies = await policy_where(kube, namespace, "a", "'role': 'app'")
        assert reach(policies, CLIENT) == {
            "a's other pod": True,
            "b's pod": False,
            "app": True,
            "a's labels elsewhere": False,
            "operator": True,
            "operator's neighbour": False,
        }
        assert reach(policies, BUS)["app"] is False

        # Switched off: the policy goes, a's pods are open again; b's policy stays.
        await kube.patch(VALKEY_CLUSTERS, "a", {"spec": {"networkPolicy": {"enabled": False}}}, namespace)

        async def gone() -> list[Obj] | NotYet:
            policies = await kube.list(NETWORK_POLICIES, namespace)
            left = {p["metadata"]["name"] for p in policies}
            return policies if left == {"b"} else NotYet(left)

        policies = await eventually(gone, "a's NetworkPolicy deleted, b's kept", 60, interval=0.2)
        assert not isolated(policies, first)
        assert all(reach(policies, BUS).values())
        assert isolated(policies, other_cluster) and not allows(policies, app, other_cluster, BUS)
    finally:
        await operator.stop()
        for name in ("a", "b"):
            await kube.delete(VALKEY_CLUSTERS, name, namespace)
