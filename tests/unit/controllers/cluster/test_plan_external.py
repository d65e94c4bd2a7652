"""spec.externalAccess in the planner (decision/external.py, announce.py): a Service per pod, each
node announcing its Service's address, and no node met before it announces one.

A client outside Kubernetes follows CLUSTER SLOTS and MOVED to whatever the nodes announce: a node
met before it announces its external address would be handed out by its pod IP (or as "?"), so the
MEET waits for the address, and a node announces one only once its Service has it.
"""

from __future__ import annotations

import attrs
import observed
from observed import line

from controllers.cluster.decision.actions import (
    ApplyObject,
    AssignSlots,
    DeleteObject,
    Meet,
    PatchPodMetadata,
    SetConfig,
)
from controllers.cluster.decision.context import Context
from controllers.cluster.decision.desired import Desired
from controllers.cluster.decision.plan import Plan, plan
from controllers.cluster.render.external import DesiredExternal
from controllers.shared import names
from controllers.shared.observation import Observation, PodObservation
from valkey_operator.api.external import ExternalEndpoint, ExternalServiceType
from valkey_operator.api.tunables import PROBED_NAMES
from valkey_operator.core.rest import Obj
from valkey_operator.valkey.slots import SlotRange

NOW = 1_800_000_000.0
AT_NOW = Context(now=NOW)
ALL = (SlotRange(0, 16383),)
A, N = "a" * 40, "n" * 40
NODE_PORT = DesiredExternal(namespace="ns", cluster="vk", type=ExternalServiceType.NODE_PORT)
LOAD_BALANCER = attrs.evolve(NODE_PORT, type=ExternalServiceType.LOAD_BALANCER)
DEFAULTS = {
    "cluster-announce-hostname": "",
    "cluster-announce-client-port": "0",
    "cluster-announce-client-tls-port": "0",
    "cluster-preferred-endpoint-type": "ip",
}


def desired(external: DesiredExternal | None) -> Desired:
    return Desired(shards=2, replicas_per_shard=0, template_hash="t1", image="i", external=external)


def pod(name: str, shard: int, ip: str, host: str, *, named: bool = True) -> PodObservation:
    return observed.pod(
        name, shard, ip, created=f"2027-01-15T08:00:0{shard}Z", uid=f"uid-{name}", host_ip=host, named=named
    )


def config(**announce: str) -> dict[str, str]:
    values = {name: "" for name in PROBED_NAMES} | DEFAULTS
    return values | {key.replace("_", "-"): value for key, value in announce.items()}


def announcing(host: str, port: int) -> dict[str, str]:
    return config(
        cluster_preferred_endpoint_type="hostname",
        cluster_announce_hostname=host,
        cluster_announce_client_port=str(port),
        cluster_announce_client_tls_port=str(port),
    )


def announce_sets(planned: Plan) -> dict[str, dict[str, str]]:
    """The announce directives each node is sent (the other runtime settings left out)."""
    found = {
        a.node: {key: value for key, value in a.settings if key in DEFAULTS}
        for a in planned.actions
        if isinstance(a, SetConfig)
    }
    return {node: settings for node, settings in found.items() if settings}


def service(name: str, node_port: int | None, *, ingress: str | None = None) -> Obj:
    port: Obj = {"name": "valkey", "port": 6379, **({"nodePort": node_port} if node_port else {})}
    found: Obj = {
        "metadata": {"name": name, "uid": f"svc-{name}", "ownerReferences": [{"kind": "Pod", "name": name}]},
        "spec": {"type": "LoadBalancer" if ingress is not None else "NodePort", "ports": [port]},
    }
    if ingress:
        found["status"] = {"loadBalancer": {"ingress": [{"ip": ingress}]}}
    return found


def world(
    new_config: dict[str, str], services: dict[str, Obj], *, seed_config: dict[str, str] | None = None
) -> Observation:
    seed = observed.primary(
        A, slots=ALL, known=(line(A, "10.0.0.1", slots=ALL, me=True),), config=seed_config or config()
    )
    new = observed.primary(N, known=(line(N, "10.0.0.2", me=True),), config=new_config)
    return Observation(
        pods=(pod("vk-0-a", 0, "10.0.0.1", "127.0.100.1"), pod("vk-1-n", 1, "10.0.0.2", "127.0.100.2")),
        nodes={"vk-0-a": seed, "vk-1-n": new},
        services=services,
    )


def test_each_live_pod_gets_a_service_of_its_own_owned_by_it() -> None:
    planned = plan(world(config(), {}), desired(NODE_PORT), AT_NOW)
    applied = {
        a.object.body["metadata"]["name"]: a.object.body
        for a in planned.actions
        if isinstance(a, ApplyObject)
    }
    assert set(applied) == {"vk-0-a", "vk-1-n"}
    body = applied["vk-1-n"]
    assert body["spec"]["type"] == "NodePort"
    assert body["spec"]["externalTrafficPolicy"] == "Local"
    assert body["spec"]["selector"][names.POD_NAME_LABEL] == "vk-1-n"
    assert body["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "vk-1-n", "uid": "uid-vk-1-n"}
    ]


def test_a_node_is_not_met_before_it_announces_its_services_address() -> None:
    seed = announcing("127.0.100.1", 30001)
    without_service = plan(world(config(), {}, seed_config=seed), desired(NODE_PORT), AT_NOW)
    assert not [a for a in without_service.actions if isinstance(a, Meet)]
    services = {"vk-0-a": service("vk-0-a", 30001), "vk-1-n": service("vk-1-n", 30002)}
    told = plan(world(config(), services, seed_config=seed), desired(NODE_PORT), AT_NOW)
    assert not [a for a in told.actions if isinstance(a, Meet)]
    sets = announce_sets(told)
    assert sets["vk-1-n"] == {
        "cluster-preferred-endpoint-type": "hostname",
        "cluster-announce-hostname": "127.0.100.2",
        "cluster-announce-client-port": "30002",
        "cluster-announce-client-tls-port": "30002",
    }
    met = plan(
        world(announcing("127.0.100.2", 30002), services, seed_config=seed), desired(NODE_PORT), AT_NOW
    )
    assert Meet(node="vk-0-a", peer="vk-1-n", peer_ip="10.0.0.2") in met.actions
    assert met.status.external_endpoints == (
        ExternalEndpoint(pod="vk-0-a", host="127.0.100.1", port=30001),
        ExternalEndpoint(pod="vk-1-n", host="127.0.100.2", port=30002),
    )


def test_a_load_balancer_node_announces_its_ingress_once_the_provider_wrote_one() -> None:
    pending = {"vk-1-n": service("vk-1-n", None, ingress="")}
    planned = plan(world(config(), pending), desired(LOAD_BALANCER), AT_NOW)
    sets = announce_sets(planned)
    assert sets["vk-1-n"] == {"cluster-preferred-endpoint-type": "hostname"}  # no pod IP, no address yet
    ready = {"vk-1-n": service("vk-1-n", None, ingress="127.0.200.7")}
    planned = plan(world(config(), ready), desired(LOAD_BALANCER), AT_NOW)
    sets = announce_sets(planned)
    assert sets["vk-1-n"]["cluster-announce-hostname"] == "127.0.200.7"
    assert sets["vk-1-n"]["cluster-announce-client-port"] == "6379"


def test_a_lone_seed_takes_no_slots_before_it_announces() -> None:
    lone = observed.primary(A, known=(line(A, "10.0.0.1", me=True),), config=config())
    observation = Observation(pods=(pod("vk-0-a", 0, "10.0.0.1", "127.0.100.1"),), nodes={"vk-0-a": lone})
    one = attrs.evolve(desired(NODE_PORT), shards=1)
    assert not [a for a in plan(observation, one, AT_NOW).actions if isinstance(a, AssignSlots)]
    assert [
        a
        for a in plan(observation, attrs.evolve(one, external=None), AT_NOW).actions
        if isinstance(a, AssignSlots)
    ]


def test_older_pods_get_the_pod_name_label_their_service_selects() -> None:
    observation = attrs.evolve(
        world(config(), {}), pods=(pod("vk-0-a", 0, "10.0.0.1", "127.0.100.1", named=False),)
    )
    planned = plan(observation, desired(NODE_PORT), AT_NOW)
    assert PatchPodMetadata("vk-0-a", "uid-vk-0-a", (), labels=((names.POD_NAME_LABEL, "vk-0-a"),)) in (
        planned.actions
    )
    assert not [
        a for a in plan(observation, desired(None), AT_NOW).actions if isinstance(a, PatchPodMetadata)
    ]


def test_switched_off_the_services_go_and_the_nodes_announce_pod_ips_again() -> None:
    services = {"vk-0-a": service("vk-0-a", 30001), "vk-1-n": service("vk-1-n", 30002)}
    observation = world(
        announcing("127.0.100.2", 30002), services, seed_config=announcing("127.0.100.1", 30001)
    )
    planned = plan(observation, desired(None), AT_NOW)
    deleted = {a.name for a in planned.actions if isinstance(a, DeleteObject)}
    assert deleted == {"vk-0-a", "vk-1-n"}
    sets = announce_sets(planned)
    assert sets["vk-0-a"] == DEFAULTS
    assert planned.status.external_endpoints == ()


def test_nodes_of_a_cluster_without_external_access_are_left_alone() -> None:
    planned = plan(world(config(), {}), desired(None), AT_NOW)
    assert announce_sets(planned) == {}
    older = attrs.evolve(world(config(), {}), nodes={})  # nothing probed: nothing to compare
    assert not [a for a in plan(older, desired(None), AT_NOW).actions if isinstance(a, DeleteObject)]


def test_a_release_that_lacks_the_directives_is_not_asked_for_them_when_off() -> None:
    bare = {name: value for name, value in config().items() if name not in DEFAULTS}
    observation = world(bare, {}, seed_config=bare)
    planned = plan(observation, desired(None), AT_NOW)
    assert announce_sets(planned) == {}
