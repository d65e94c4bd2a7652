"""The cluster actor against the real API server and a real valkey-server (no operator around it).

The actor only carries out what a decision lists, in its order, under one
deadline; these tests check each kind of action on the real thing: a refused
directive is named and, with the next decisions, does not stop the others; a
patch after a reload waits for it; a create never overwrites; a refused ACL
user does not stop the others, metadata patches and deletes hit only the incarnation the plan saw,
and a node that swallows packets cannot hold the pass past its deadline.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from controllers.cluster.actor import Actor
from controllers.cluster.decision.actions import (
    ApplyObject,
    CreateObject,
    DeletePod,
    Failure,
    MarkMember,
    Meet,
    PatchPodMetadata,
    ReloadTls,
    SyncAcl,
)
from controllers.cluster.decision.desired import OwnedObject
from controllers.cluster.decision.memory import Refusals, live_refusals, remember_refusals
from controllers.cluster.decision.refusals import classified
from controllers.cluster.decision.upkeep import config_sets
from controllers.cluster.render.acl import UserAcl
from controllers.cluster.render.context import RenderContext
from controllers.shared import names
from controllers.shared.config_resolve import ResolvedConfig, ResolvedImage
from controllers.shared.observation import PodObservation
from valkey_operator.api.cluster import ValkeyCluster
from valkey_operator.core.client import Client
from valkey_operator.core.resource import CONFIG_MAPS, PODS
from valkey_operator.core.rest import Obj
from valkey_operator.valkey.admin import AdminClient, Credentials
from valkey_testbed import images
from valkey_testbed.operatorproc import LOOPBACK_NETWORKS
from valkey_testbed.valkeyproc import ValkeyServer, server_base_dir, start_server

pytestmark = pytest.mark.integration

HOST = "127.0.93.1"
PASSWORD = "actor-test-password"


@pytest.fixture(scope="module")
def server() -> Iterator[ValkeyServer]:
    entry = images.resolve_image(images.newest_image())
    if entry is None:
        pytest.fail(f"{images.newest_image()} is not installed (python -m valkey_testbed build)")
    base = server_base_dir()
    running = start_server(entry, HOST, base_dir=base, password=PASSWORD)
    yield running
    running.stop()


def context(namespace: str) -> RenderContext:
    cluster = ValkeyCluster.from_dict(
        {
            "metadata": {
                "name": "act",
                "namespace": namespace,
                "uid": "6b1d7c55-0000-4000-8000-000000000001",
            },
            "spec": {"configRef": "cfg"},
        }
    )
    config = ResolvedConfig(
        ("cfg",), ResolvedImage("img", "valkey/valkey", "9.1.2", "9.1.2"), {}, {}, {"runAsUser": 999}
    )
    return RenderContext(cluster=cluster, config=config)


def node_pod(name: str, ip: str) -> Obj:
    """What the actor reads of a pod it talks to: its name and IP."""
    return {"metadata": {"name": name, "namespace": "ns"}, "status": {"podIP": ip}}


def config_get(server: ValkeyServer, *names: str) -> dict[str, str]:
    reply = server.command("CONFIG", "GET", *names)
    assert isinstance(reply, list)
    flat = [item.decode() if isinstance(item, bytes) else str(item) for item in reply]
    return dict(zip(flat[0::2], flat[1::2], strict=True))


def admin(server: ValkeyServer) -> AdminClient:
    return AdminClient(
        credentials=Credentials(username="default", password=PASSWORD),
        port=server.address[1],
        connect_timeout=1.0,
        command_timeout=1.0,
        allowed_networks=LOOPBACK_NETWORKS,
    )


async def test_a_refused_directive_is_named_and_the_others_still_apply(
    server: ValkeyServer, namespace: str, kube: Client
) -> None:
    """The actor sends each CONFIG SET as decided and reports Valkey's refusal by name; the next
    pass's decision (upkeep.config_sets, fed the refusals the reconciler remembers) leaves the
    refused value out, so the others apply within a few passes."""
    wanted = {"maxmemory-policy": "sometimes", "slowlog-max-len": "777", "maxclients": "1000000", "hz": "15"}
    memory = Refusals()
    failures: list[Failure] = []
    for _ in range(len(wanted)):
        running = config_get(server, *wanted)
        changes = {name: value for name, value in wanted.items() if running.get(name) != value}
        actions = config_sets("vk-0", changes, live_refusals(memory, ["vk-0"]))
        if not actions:
            break
        actor = Actor(kube, context(namespace), [node_pod("vk-0", HOST)], admin(server))
        outcome = await actor.run(actions)
        found = [classified(failure) for failure in outcome.failures]  # as decide classifies them
        memory = remember_refusals(memory, actions, found)
        failures += found
    assert sorted(failure.refused or "" for failure in failures) == ["maxclients", "maxmemory-policy"], (
        failures
    )
    assert any("must be one of" in failure.message for failure in failures)
    values = server.command("CONFIG", "GET", "slowlog-max-len", "hz")
    assert dict(zip(values[0::2], values[1::2], strict=True)) == {b"slowlog-max-len": b"777", b"hz": b"15"}
    assert not config_sets("vk-0", {"maxmemory-policy": "sometimes"}, live_refusals(memory, ["vk-0"]))


async def test_a_patch_after_a_reload_waits_for_that_reload_and_a_create_never_overwrites(
    server: ValkeyServer, namespace: str, kube: Client
) -> None:
    """The tls-loaded annotation is patched only after its reload succeeded (first against an
    address nobody listens on, then against the real server); a CreateObject over an existing
    object fails and keeps it."""
    pod = await kube.create(
        PODS,
        {
            "metadata": {"name": "vk-0-tls", "namespace": namespace},
            "spec": {"nodeName": "no-such-node", "containers": [{"name": "c", "image": "none"}]},
        },
    )
    uid = pod["metadata"]["uid"]
    reload = ReloadTls("vk-0-tls", uid, confirm="h1")
    patch = PatchPodMetadata("vk-0-tls", uid, (("example.com/loaded", "h1"),), after=reload)
    kept = {"metadata": {"name": "act-kept", "namespace": namespace}, "data": {"a": "1"}}
    await kube.create(CONFIG_MAPS, kept)
    replaced = CreateObject(
        OwnedObject(
            CONFIG_MAPS, {"metadata": {"name": "act-kept", "namespace": namespace}, "data": {"a": "2"}}
        )
    )
    unreachable = {**pod, "status": {"podIP": "127.0.93.3"}}
    outcome = await Actor(kube, context(namespace), [unreachable], admin(server)).run(
        [reload, patch, replaced]
    )
    assert [failure.action for failure in outcome.failures] == [reload, replaced]
    annotations = (await kube.get(PODS, "vk-0-tls", namespace))["metadata"].get("annotations") or {}
    assert "example.com/loaded" not in annotations
    assert (await kube.get(CONFIG_MAPS, "act-kept", namespace))["data"] == {"a": "1"}

    serving = {**pod, "status": {"podIP": HOST}}
    outcome = await Actor(kube, context(namespace), [serving], admin(server)).run([reload, patch])
    assert not outcome.failures, outcome.failures
    annotations = (await kube.get(PODS, "vk-0-tls", namespace))["metadata"].get("annotations") or {}
    assert annotations.get("example.com/loaded") == "h1"


async def test_acl_sync_sets_and_deletes_users_and_a_refused_user_does_not_stop_the_others(
    server: ValkeyServer, namespace: str, kube: Client
) -> None:
    server.command("ACL", "SETUSER", "stray", "on", ">x", "~*", "+@all")
    actor = Actor(kube, context(namespace), [node_pod("vk-0", HOST)], admin(server))
    good = UserAcl("app", ("reset", "on", "#" + "c" * 64, "(~app:* -@all +@read)"))
    bad = UserAcl("broken", ("reset", "on", "+nosuchcommand"))
    outcome = await actor.run([SyncAcl("vk-0", set_users=(bad, good), delete_users=("stray",))])
    assert [classified(failure).refused for failure in outcome.failures] == ["broken"]
    assert "Unknown command" in outcome.failures[0].message
    listed = [line.decode() for line in server.command("ACL", "LIST")]
    assert any(line.startswith("user app on") for line in listed)
    assert not any(line.startswith(("user stray ", "user broken ")) for line in listed)


async def test_objects_are_applied_and_pods_patched_or_deleted_only_as_the_incarnation_seen(
    namespace: str, kube: Client
) -> None:
    config_map = {"metadata": {"name": "act-config", "namespace": namespace}, "data": {"a": "1"}}
    pod = await kube.create(
        PODS,
        {
            "metadata": {"name": "vk-0-abcde", "namespace": namespace, "annotations": {"other.io/x": "kept"}},
            "spec": {"nodeName": "no-such-node", "containers": [{"name": "c", "image": "none"}]},
        },
    )
    uid = pod["metadata"]["uid"]
    actor = Actor(kube, context(namespace), [pod], None)
    outcome = await actor.run(
        [
            ApplyObject(OwnedObject(CONFIG_MAPS, config_map)),
            PatchPodMetadata("vk-0-abcde", "not-this-uid", (("example.com/a", "1"),)),
            PatchPodMetadata("vk-0-abcde", uid, (("example.com/b", "2"),)),
            DeletePod("vk-0-abcde", "test: another incarnation", "not-this-uid"),
        ]
    )
    assert len(outcome.failures) == 1 and isinstance(outcome.failures[0].action, PatchPodMetadata)
    assert (await kube.get(CONFIG_MAPS, "act-config", namespace))["data"] == {"a": "1"}
    annotations = (await kube.get(PODS, "vk-0-abcde", namespace))["metadata"]["annotations"]
    assert annotations == {"other.io/x": "kept", "example.com/b": "2"}
    assert outcome.deleted == ()  # the uid precondition kept this incarnation

    outcome = await Actor(kube, context(namespace), [pod], None).run([DeletePod("vk-0-abcde", "test", uid)])
    assert outcome.deleted == ("vk-0-abcde",) and not outcome.failures

    # No kubelet runs its node, so the pod stays, marked for deletion.
    assert (await kube.get(PODS, "vk-0-abcde", namespace))["metadata"].get("deletionTimestamp")


async def test_the_member_label_is_set_and_removed_on_the_incarnation_seen_and_other_labels_stay(
    namespace: str, kube: Client
) -> None:
    pod = await kube.create(
        PODS,
        {
            "metadata": {"name": "vk-0-membr", "namespace": namespace, "labels": {"other.io/x": "kept"}},
            "spec": {"nodeName": "no-such-node", "containers": [{"name": "c", "image": "none"}]},
        },
    )
    uid = pod["metadata"]["uid"]

    async def labels() -> dict[str, str]:
        return dict((await kube.get(PODS, "vk-0-membr", namespace))["metadata"].get("labels") or {})

    def actor() -> Actor:
        return Actor(kube, context(namespace), [pod], None)  # one per pass, as the reconciler makes them

    outcome = await actor().run([MarkMember("vk-0-membr", "not-this-uid", member=True)])
    assert len(outcome.failures) == 1 and "metadata.uid" in outcome.failures[0].message
    assert await labels() == {"other.io/x": "kept"}
    outcome = await actor().run([MarkMember("vk-0-membr", uid, member=True)])
    assert not outcome.failures
    assert await labels() == {"other.io/x": "kept", names.MEMBER_LABEL: "true"}
    assert PodObservation.from_pod(await kube.get(PODS, "vk-0-membr", namespace)).member
    outcome = await actor().run([MarkMember("vk-0-membr", uid, member=False)])
    assert not outcome.failures
    assert await labels() == {"other.io/x": "kept"}


async def test_a_node_that_swallows_packets_cannot_hold_the_pass_past_its_deadline(
    namespace: str, kube: Client
) -> None:
    # A listener whose backlog is full: connects to it hang, as to a black-holed address.
    listener = socket.socket()
    listener.bind(("127.0.93.2", 0))
    listener.listen(0)
    fillers = []
    for _ in range(8):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(listener.getsockname())
        fillers.append(filler)
    slow = AdminClient(
        credentials=Credentials(username="default", password="x"),
        port=listener.getsockname()[1],
        connect_timeout=5.0,
        command_timeout=5.0,
        allowed_networks=LOOPBACK_NETWORKS,
    )
    pods = [node_pod(f"vk-{index}", "127.0.93.2") for index in range(4)]
    actions = [Meet(f"vk-{index}", "vk-9", "127.0.0.9") for index in range(4)]
    started = time.monotonic()
    outcome = await Actor(kube, context(namespace), pods, slow).run(actions, deadline=3.0)
    elapsed = time.monotonic() - started
    assert 2.5 <= elapsed < 6.0, elapsed
    assert len(outcome.failures) == 4
    assert sum("not carried out within 3.0s" in failure.message for failure in outcome.failures) >= 3
    for filler in fillers:
        filler.close()
    listener.close()


async def test_a_key_a_new_rendering_drops_is_removed_on_the_server(namespace: str, kube: Client) -> None:
    """Server-side apply by the operator's field manager: it owned the key, so applying a rendering
    without it removes it, while a key another manager added stays."""
    actor = Actor(kube, context(namespace), [], None)
    first = {"metadata": {"name": "drop", "namespace": namespace}, "data": {"a": "1", "b": "2"}}
    assert not (await actor.run([ApplyObject(OwnedObject(CONFIG_MAPS, first))])).failures
    other = Client(kube.rest, field_manager="someone-else")
    await other.apply(CONFIG_MAPS, {"metadata": {"name": "drop", "namespace": namespace}, "data": {"c": "3"}})
    second = {"metadata": {"name": "drop", "namespace": namespace}, "data": {"a": "1"}}
    assert not (await actor.run([ApplyObject(OwnedObject(CONFIG_MAPS, second))])).failures
    assert (await kube.get(CONFIG_MAPS, "drop", namespace))["data"] == {"a": "1", "c": "3"}
