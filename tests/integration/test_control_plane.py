"""The test bed's control plane, on the real binaries."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from valkey_testbed import versions
from valkey_testbed.controlplane import ControlPlane
from valkey_testbed.processes import ProcessRecord
from valkey_testbed.wait import eventually

pytestmark = pytest.mark.integration


async def test_api_server_reports_pinned_version(kube_api: client.ApiClient) -> None:
    info = await client.VersionApi(kube_api).get_code()
    assert info.git_version == versions.KUBERNETES
    assert (info.major, info.minor) == tuple(versions.KUBERNETES.lstrip("v").split(".")[:2])


def test_kubectl_and_helm_report_pinned_versions(kube_control_plane: ControlPlane) -> None:
    bins = kube_control_plane.bins
    kubectl = subprocess.run(
        [bins.kubectl, f"--kubeconfig={kube_control_plane.kubeconfig}", "version", "-o", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    reported = json.loads(kubectl.stdout)
    assert reported["clientVersion"]["gitVersion"] == versions.KUBERNETES
    assert reported["serverVersion"]["gitVersion"] == versions.KUBERNETES
    helm = subprocess.run([bins.helm, "version", "--short"], capture_output=True, text=True, check=True)
    assert helm.stdout.startswith(versions.HELM)


async def test_namespace_is_created_and_finalized_on_delete(kube_api: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    name = "testbed-ns-lifecycle"
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    await core.create_namespaced_config_map(
        name, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="content"), data={"k": "v"})
    )
    await core.delete_namespace(name)

    async def gone() -> bool:
        try:
            await core.read_namespace(name)
        except ApiException as exc:
            return exc.status == 404
        return False

    # The namespace controller must empty it and remove the kubernetes finalizer.
    await eventually(gone, "namespace deletion to complete", 60)


async def test_owned_object_is_garbage_collected(kube_api: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(kube_api)
    owner = await core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="owner"))
    )
    reference = client.V1OwnerReference(
        api_version="v1", kind="ConfigMap", name="owner", uid=owner.metadata.uid
    )
    await core.create_namespaced_config_map(
        namespace,
        client.V1ConfigMap(metadata=client.V1ObjectMeta(name="dependent", owner_references=[reference])),
    )
    await core.delete_namespaced_config_map("owner", namespace)

    async def collected() -> bool:
        names = {cm.metadata.name for cm in (await core.list_namespaced_config_map(namespace)).items}
        return "dependent" not in names

    await eventually(collected, "garbage collection of the dependent", 60)


async def test_service_account_token_is_issued(kube_api: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(kube_api)

    async def default_account_exists() -> bool:
        accounts = await core.list_namespaced_service_account(namespace)
        return any(sa.metadata.name == "default" for sa in accounts.items)

    await eventually(default_account_exists, "the serviceaccount controller to create 'default'", 60)
    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[]))
    issued = await core.create_namespaced_service_account_token("default", namespace, request)
    assert issued.status.token.count(".") == 2  # a JWT

    review = await client.AuthenticationV1Api(kube_api).create_token_review(
        client.V1TokenReview(spec=client.V1TokenReviewSpec(token=issued.status.token))
    )
    assert review.status.authenticated is True
    assert review.status.user.username == f"system:serviceaccount:{namespace}:default"


async def test_restricted_namespace_rejects_privileged_pod(kube_api: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    labels = {"pod-security.kubernetes.io/enforce": "restricted"}
    meta = client.V1ObjectMeta(generate_name="testbed-restricted-", labels=labels)
    name = (await core.create_namespace(client.V1Namespace(metadata=meta))).metadata.name
    try:
        privileged = client.V1Pod(
            metadata=client.V1ObjectMeta(name="privileged"),
            spec=client.V1PodSpec(
                containers=[
                    client.V1Container(
                        name="main",
                        image="valkey/valkey:9.1.2",
                        security_context=client.V1SecurityContext(privileged=True),
                    )
                ]
            ),
        )
        with pytest.raises(ApiException) as rejected:
            await core.create_namespaced_pod(name, privileged)
        assert rejected.value.status == 403
        assert "violates PodSecurity" in rejected.value.body
        assert "privileged" in rejected.value.body
    finally:
        await core.delete_namespace(name)


def _listening_addresses(pid: int) -> set[str]:
    """Local addresses of the TCP sockets pid listens on (from /proc)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = fd.readlink().as_posix()
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    addresses = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and inode in inodes:
                addresses.add(local)
    return addresses


def _is_loopback_v4(proc_net_address: str) -> bool:
    host = proc_net_address.split(":", maxsplit=1)[0]
    if len(host) != 8:  # an IPv6 socket: never loopback-only for our purposes
        return False
    return bytes.fromhex(host)[::-1][0] == 127


LISTENERS = {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}
"""The components that serve something; the local-path-provisioner only talks to the API server."""


def test_every_component_listens_on_loopback_only(kube_control_plane: ControlPlane) -> None:
    records = kube_control_plane.records()
    assert {record.name for record in records} == LISTENERS | {"local-path-provisioner"}
    for record in records:
        addresses = _listening_addresses(record.pid)
        assert addresses or record.name not in LISTENERS, f"{record.name} listens on nothing"
        assert all(_is_loopback_v4(address) for address in addresses), (record.name, addresses)


def _testbed(*args: str) -> str:
    """Run the test bed's command line exactly as users do."""
    result = subprocess.run(
        [sys.executable, "-m", "valkey_testbed", *args], capture_output=True, text=True, timeout=180
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_cli_down_stops_everything_and_up_again_works(tmp_path: Path) -> None:
    state = tmp_path / "state"
    plane = ControlPlane(state)
    _testbed("up", "--state-dir", str(state))
    first: list[ProcessRecord] = plane.records()
    assert len(first) == 5 and all(record.alive() for record in first)  # with the local-path-provisioner
    assert plane.ready()
    _testbed("up", "--state-dir", str(state))  # idempotent on a running state dir
    assert plane.records() == first

    exports = _testbed("env", "--state-dir", str(state)).splitlines()
    assert exports[0] == f"export KUBECONFIG={state / 'kubeconfig'}"
    assert exports[1].startswith(f"export PATH={plane.bins.bin_dir}:")

    _testbed("down", "--state-dir", str(state))
    assert not any(record.alive() for record in first)
    assert not plane.etcd_data.exists()
    assert not plane.ready()

    _testbed("up", "--state-dir", str(state))  # a second `up` on a used state dir
    try:
        second = plane.records()
        assert plane.ready()
        assert {record.pid for record in second}.isdisjoint(record.pid for record in first)
        status, body = plane.get("/api/v1/namespaces/default")
        assert status == 200 and json.loads(body)["metadata"]["name"] == "default"
    finally:
        _testbed("down", "--state-dir", str(state))
    assert not any(record.alive() for record in second)


def test_a_port_taken_between_picking_and_binding_is_picked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Test beds start in parallel: a port free when picked may be bound by another process before
    etcd or the API server binds it ("bind: address already in use"; CI at 7b71c5f lost a module's
    17 tests so). Here the first five ports picked are held by a real listening socket."""
    import socket

    from valkey_testbed import controlplane, processes

    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    taken = holder.getsockname()[1]
    picks = iter([taken] * 5)
    real_free_port = processes.free_port
    monkeypatch.setattr(controlplane.processes, "free_port", lambda: next(picks, None) or real_free_port())
    plane = ControlPlane(tmp_path / "state", nodes=0)
    try:
        plane.up()
        assert plane.ready()
        assert taken not in set(attrs_values(plane.endpoints()))
        assert "address already in use" in (plane.logs / "etcd.log").read_text()
    finally:
        plane.down()
        holder.close()


def attrs_values(endpoints: object) -> list[int]:
    import attrs

    return [value for value in attrs.asdict(endpoints).values() if isinstance(value, int)]
