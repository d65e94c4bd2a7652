"""The peer's plumbing without the peer: how it is found, its command line, its ValkeyCluster."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from valkey_testbed import peer
from valkey_testbed.datachecker import NonLoopbackError
from valkey_testbed.wait import eventually


def test_absent_names_the_unset_variables() -> None:
    absent = peer.find_peer({})
    assert isinstance(absent, peer.Absent)
    assert "VALKEY_PEER_OPERATOR and VALKEY_PEER_CRDS" in absent.reason
    only_crds = peer.find_peer({peer.ENV_OPERATOR: "/bin/true"})
    assert isinstance(only_crds, peer.Absent) and "set VALKEY_PEER_CRDS (" in only_crds.reason


def test_found_when_both_exist(tmp_path: Path) -> None:
    (tmp_path / "valkey.io_valkeyclusters.yaml").write_text("kind: CustomResourceDefinition\n")
    env = {peer.ENV_OPERATOR: "/bin/true", peer.ENV_CRDS: str(tmp_path)}
    assert peer.find_peer(env) == peer.Peer(Path("/bin/true"), tmp_path)
    missing = peer.find_peer({**env, peer.ENV_OPERATOR: str(tmp_path / "nope")})
    assert isinstance(missing, peer.Absent) and "not an executable file" in missing.reason
    empty = tmp_path / "empty"
    empty.mkdir()
    assert isinstance(peer.find_peer({**env, peer.ENV_CRDS: str(empty)}), peer.Absent)


def test_its_command_line_listens_on_loopback_only_or_not_at_all() -> None:
    found = peer.Peer(Path("/opt/manager"), Path("/crds"))
    argv = peer.peer_argv(found, watch_namespaces=["a"])
    assert argv == [
        "/opt/manager",
        "--leader-elect=false",
        "--metrics-bind-address=0",
        "--health-probe-bind-address=0",
        "--zap-log-level=info",
        "--watch-namespace=a",
    ]
    assert "--health-probe-bind-address=127.0.0.1:8081" in peer.peer_argv(
        found, health_address="127.0.0.1:8081"
    )
    with pytest.raises(NonLoopbackError):
        peer.peer_argv(found, health_address=":8081")


def test_its_cluster_carries_the_test_bed_settings_through_its_own_api() -> None:
    manifest = peer.cluster_manifest("c", "ns", shards=3, replicas=1, image="valkey/valkey:9.1.2")
    assert manifest["apiVersion"] == "valkey.io/v1alpha1" and manifest["kind"] == "ValkeyCluster"
    spec = manifest["spec"]
    assert (spec["shards"], spec["replicas"], spec["image"]) == (3, 1, "valkey/valkey:9.1.2")
    assert spec["exporter"] == {"enabled": False}
    assert spec["containers"] == [
        {"name": "server", "args": ["--bind", "$(POD_IP)", "--cluster-node-timeout", "5000"]}
    ]
    own = peer.cluster_manifest("c", "ns", shards=1, replicas=0, node_timeout_ms=None)
    assert own["spec"]["containers"] == [{"name": "server", "args": ["--bind", "$(POD_IP)"]}]
    assert own["spec"]["image"] == "valkey/valkey:9.0.0", "the peer's own default"
    assert "podSecurityContext" not in own["spec"], "its own defaults unless asked"


def test_a_restricted_cluster_sets_what_the_restricted_pod_security_standard_asks() -> None:
    spec = peer.cluster_manifest("c", "ns", shards=1, replicas=0, restricted=True)["spec"]
    pod = spec["podSecurityContext"]
    assert pod["runAsNonRoot"] is True and pod["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["runAsUser"] == pod["runAsGroup"] == pod["fsGroup"] == peer.VALKEY_UID
    (server,) = spec["containers"]
    assert server["name"] == "server" and server["args"][:2] == ["--bind", "$(POD_IP)"]
    assert server["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def test_usage_of_a_live_process() -> None:
    usage = peer.sample_usage(os.getpid())
    assert usage is not None and usage.cpu_seconds > 0 and usage.peak_rss_bytes > 10 * 2**20
    assert peer.sample_usage(2**22 + 1) is None


def exists(path: Path) -> bool:
    return path.exists()


def read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


async def test_a_started_process_is_stopped_by_pid_with_its_whole_life_usage(tmp_path: Path) -> None:
    """A stand-in binary (it ignores the peer's flags): started, sampled, stopped, reaped."""
    stand_in = tmp_path / "manager"
    stand_in.write_text('#!/bin/sh\necho "KUBECONFIG=$KUBECONFIG $*"\nexec sleep 60\n')
    stand_in.chmod(0o755)
    process = peer.start_peer(peer.Peer(stand_in, tmp_path), tmp_path / "kubeconfig", tmp_path / "peer.log")
    expected = f"KUBECONFIG={tmp_path / 'kubeconfig'} --leader-elect=false"
    await eventually(lambda: expected in read(process.log_file), "the stand-in's output", 10)
    assert process.alive() and process.usage() is not None
    usage = await process.stop(grace=5)
    assert usage is not None and usage.peak_rss_bytes > 0
    assert not process.alive() and not exists(Path(f"/proc/{process.pid}"))
