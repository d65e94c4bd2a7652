"""The image catalog's real Valkey binaries: true versions, non-root, TLS, and a hand-built cluster."""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from valkey.asyncio.cluster import ValkeyCluster

from valkey_testbed import versions
from valkey_testbed.images import (
    BUSYBOX_IMAGE,
    OPERATOR_IMAGE,
    TLS_RECORD,
    ImageEntry,
    image_prefix,
    install_images,
    resolve_image,
    tls_build,
    tls_image,
)
from valkey_testbed.valkeyproc import (
    ValkeyServer,
    form_cluster,
    server_base_dir,
    start_server,
    stop_servers,
    write_tls_files,
)

pytestmark = pytest.mark.timeout(180)

# The wheels' exact versions; "tls" is the TLS build, whose version is what Debian offered
# (read from the install's record when the test runs).
TLS = "tls"
VERSIONS = {
    TLS: "",
    "valkey/valkey:9.1.0": "9.1.0",
    "valkey/valkey:9.0.0": "9.0.0",
    "valkey/valkey:8.1.8": "8.1.8",
}


@pytest.fixture(scope="module")
def installed() -> None:
    """The catalog installed (a no-op when `python -m valkey_testbed build` ran)."""
    install_images(progress=lambda line: None)


@pytest.fixture
def base_dir() -> Iterator[Path]:
    """A data directory the image users can traverse; removed afterwards."""
    base = server_base_dir()
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def servers() -> Iterator[list[ValkeyServer]]:
    """Servers a test started: every one is stopped by pid at teardown."""
    started: list[ValkeyServer] = []
    yield started
    stop_servers(started)


def image(reference: str) -> ImageEntry:
    entry = resolve_image(reference)
    assert entry is not None, f"{reference} is not installed: run python -m valkey_testbed build"
    return entry


def process_uid(server: ValkeyServer) -> int:
    status = Path(f"/proc/{server.record.pid}/status").read_text()
    uid_line = next(line for line in status.splitlines() if line.startswith("Uid:"))
    return int(uid_line.split()[1])


@pytest.mark.parametrize(("reference", "version"), VERSIONS.items())
def test_image_reports_its_true_version_running_as_non_root(
    installed: None, base_dir: Path, servers: list[ValkeyServer], reference: str, version: str
) -> None:
    if reference == TLS:
        reference, version = tls_image(), tls_build().version
    entry = image(reference)
    assert (entry.user, entry.group, entry.entrypoint) == (999, 999, ("valkey-server",))
    server = start_server(entry, "127.0.42.10", base_dir=base_dir)
    servers.append(server)
    assert server.info("server")["valkey_version"] == version
    assert process_uid(server) == 999
    # The image's valkey-cli (what exec probes run) works against it.
    probe = subprocess.run(server.cli_argv("PING"), capture_output=True, text=True, timeout=10)
    assert probe.stdout.strip() == "PONG", probe.stderr


def test_the_tls_image_is_the_recorded_debian_build(installed: None) -> None:
    """The record names the Debian version built; the catalog's TLS reference runs exactly that."""
    built = tls_build()
    record = json.loads((image_prefix() / TLS_RECORD).read_text())
    assert record == {"debianVersion": built.debian_version, "pinned": versions.VALKEY_DEBIAN_SOURCE}
    entry = image(tls_image())
    assert entry.bin_dir.parent.name == f"valkey-{built.debian_version.replace(':', '_')}-tls"
    stamp = (entry.bin_dir.parent / ".stamp").read_text()
    assert stamp == f"debian source valkey={built.debian_version} make BUILD_TLS=yes\n"
    server = subprocess.run(
        [str(entry.executable("valkey-server")), "--version"], capture_output=True, text=True, timeout=10
    )
    assert f"v={built.version} " in server.stdout


def test_unknown_image_resolves_to_none(installed: None) -> None:
    assert resolve_image("valkey/valkey:0.0.1") is None
    assert resolve_image("nginx:latest") is None


def test_busybox_and_operator_images(installed: None) -> None:
    busybox = image(BUSYBOX_IMAGE)
    assert busybox.user == 65534
    result = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", "sh", "-c", "id -u; echo hi"],
        env={"PATH": f"{busybox.bin_dir}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=10,
        cwd="/",
    )
    assert result.stdout.split() == ["65534", "hi"], result.stderr
    operator = image(OPERATOR_IMAGE)
    assert (operator.user, operator.run_as_root_after_check, operator.entrypoint) == (
        65532,
        True,
        ("valkey-operator",),
    )
    help_text = subprocess.run(
        [str(operator.executable("valkey-operator")), "--help"], capture_output=True, text=True, timeout=60
    )
    assert "usage: valkey-operator" in help_text.stdout


def test_tls_image_completes_a_handshake(
    installed: None, base_dir: Path, servers: list[ValkeyServer], tmp_path: Path
) -> None:
    ip = "127.0.42.20"
    files = write_tls_files(tmp_path, [ip])
    server = start_server(image(tls_image()), ip, base_dir=base_dir, tls=files)
    servers.append(server)
    context = ssl.create_default_context(cafile=str(files.ca))
    with (
        socket.create_connection(server.address, timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=ip) as tls,
    ):
        assert tls.version() in ("TLSv1.2", "TLSv1.3")
        peer = tls.getpeercert()
        assert peer is not None
        assert ("IP Address", ip) in peer["subjectAltName"]
        tls.sendall(b"*1\r\n$4\r\nPING\r\n")
        assert tls.recv(64) == b"+PONG\r\n"
    assert server.info("server")["valkey_version"] == tls_build().version
    # Plain RESP on the TLS port gets no answer: the server really requires TLS.
    with socket.create_connection(server.address, timeout=5) as plain:
        plain.sendall(b"*1\r\n$4\r\nPING\r\n")
        try:
            answer = plain.recv(64)
        except ConnectionResetError:
            answer = b""
        assert not answer.startswith(b"+PONG")
    # And the image's own valkey-cli speaks TLS too.
    probe = subprocess.run(server.cli_argv("PING"), capture_output=True, text=True, timeout=10)
    assert probe.stdout.strip() == "PONG", probe.stderr


async def test_three_servers_on_loopback_ips_form_a_cluster(
    installed: None, base_dir: Path, servers: list[ValkeyServer]
) -> None:
    entry = image("valkey/valkey:9.1.0")
    for host in ("127.0.42.1", "127.0.42.2", "127.0.42.3"):
        servers.append(start_server(entry, host, base_dir=base_dir, cluster=True))
    form_cluster(servers)  # CLUSTER MEET, ADDSLOTSRANGE, wait for cluster_state:ok
    nodes = servers[0].command("CLUSTER", "NODES")
    assert isinstance(nodes, bytes)
    announced = sorted(line.split()[1].split("@")[0] for line in nodes.decode().splitlines())
    assert announced == sorted(f"{server.host}:{server.port}" for server in servers)
    client = ValkeyCluster(host=servers[0].host, port=servers[0].port)
    try:
        await client.set("greeting", "hello")
        for index in range(100):
            await client.set(f"key:{index}", str(index))
        assert await client.get("greeting") == b"hello"
        assert [await client.get(f"key:{index}") for index in range(100)] == [
            str(index).encode() for index in range(100)
        ]
        used = {node.host for node in client.get_nodes()}
        assert used == {"127.0.42.1", "127.0.42.2", "127.0.42.3"}
    finally:
        await client.aclose()
    keys = [server.command("DBSIZE") for server in servers]
    assert sum(k for k in keys if isinstance(k, int)) == 101 and all(keys)
