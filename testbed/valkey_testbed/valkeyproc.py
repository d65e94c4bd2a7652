"""Hand-built Valkey servers and clusters from the image catalog, for tests and benchmarks.

Tests that check the images, the data checker, or compare against a cluster
the operator did not build need real valkey-server processes without the
kubelet. This starts one for an ImageEntry on a loopback IP and port, as the
image's user (via setpriv, proving non-root can run it), each binding and
announcing its own IP; stops exactly the processes it started, by pid; and
forms clusters by hand (MEET, ADDSLOTSRANGE, REPLICATE, wait for
cluster_state:ok). Everything binds and dials 127.0.0.0/8 only.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import socket
import ssl
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import attrs
from cryptography.hazmat.primitives import serialization

from valkey_operator.valkey.admin import parse_info
from valkey_operator.valkey.slots import even_ranges
from valkey_testbed import certs, processes
from valkey_testbed.datachecker import check_loopback
from valkey_testbed.images import ImageEntry
from valkey_testbed.resp import Arg, Reply, ReplyError, encode_command, read_reply_blocking
from valkey_testbed.wait import NotYet, WaitTimeout, eventually_blocking

ConfigValue = str | int | Sequence[str]
# On 2 shared cores a shorter node timeout lets CPU starvation trigger false failovers.
CLUSTER_NODE_TIMEOUT_MS = 5000


class ValkeyProcError(RuntimeError):
    """A server did not start or a cluster did not form; the message carries the evidence."""


@attrs.frozen
class TlsFiles:
    """PEM files for a TLS server: its certificate and key, and the CA that clients trust."""

    cert: Path
    key: Path
    ca: Path

    def client_context(self) -> ssl.SSLContext:
        """A client context trusting the CA (hostname checked against the IP SANs)."""
        return ssl.create_default_context(cafile=str(self.ca))


def write_tls_files(directory: Path, ips: Sequence[str], common_name: str = "valkey") -> TlsFiles:
    """A fresh CA and a server (and client) certificate for ips, as PEM files in directory."""
    ca_cert, ca_key = certs.issue_ca(f"{common_name}-test-ca")
    cert, key = certs.issue_leaf(
        ca_cert, ca_key, common_name, ip_addresses=tuple(ips), server=True, client=True
    )
    files = TlsFiles(directory / f"{common_name}.crt", directory / f"{common_name}.key", directory / "ca.crt")
    directory.mkdir(parents=True, exist_ok=True)
    files.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    files.key.chmod(0o600)
    return files


@attrs.frozen
class ValkeyServer:
    """A running valkey-server we started; `port` is its TLS port when tls is set."""

    image: ImageEntry
    host: str
    port: int
    directory: Path
    record: processes.ProcessRecord
    log_file: Path
    password: str | None = None
    tls: TlsFiles | None = None

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    def alive(self) -> bool:
        return self.record.alive()

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def command(self, *args: Arg, timeout: float = 10.0) -> Reply:
        """One command on a fresh connection (AUTH and TLS as configured)."""
        context = self.tls.client_context() if self.tls else None
        return command(self.address, *args, password=self.password, ssl_context=context, timeout=timeout)

    def info(self, section: str = "server") -> dict[str, str]:
        """INFO section as a dict."""
        reply = self.command("INFO", section)
        if not isinstance(reply, bytes):
            raise ValkeyProcError(f"INFO {section} on {self.host}:{self.port}: {reply!r}")
        return parse_info(reply.decode())

    def cli_argv(self, *args: str) -> list[str]:
        """argv for the image's own valkey-cli against this server (like an exec probe)."""
        argv = [str(self.image.executable("valkey-cli")), "-h", self.host, "-p", str(self.port)]
        if self.tls:
            argv += ["--tls", "--cacert", str(self.tls.ca)]
        if self.password:
            argv += ["--no-auth-warning", "-a", self.password]
        return [*argv, *args]

    def stop(self, grace: float = 10.0) -> None:
        """Stop the process (SIGTERM, then SIGKILL after grace), by pid."""
        processes.stop([self.record], grace=grace)


def command(
    address: tuple[str, int],
    *args: Arg,
    password: str | None = None,
    ssl_context: ssl.SSLContext | None = None,
    timeout: float = 10.0,
) -> Reply:
    """Send one command to a loopback Valkey and return its reply (errors as ReplyError)."""
    host = address[0]
    check_loopback(host)
    with socket.create_connection(address, timeout=timeout) as raw:
        sock: socket.socket = ssl_context.wrap_socket(raw, server_hostname=host) if ssl_context else raw
        with sock, sock.makefile("rb") as stream:  # buffered: readline and exact reads
            if password is not None:
                sock.sendall(encode_command(["AUTH", password]))
                reply = read_reply_blocking(stream)
                if isinstance(reply, ReplyError):
                    return reply
            sock.sendall(encode_command(list(args)))
            return read_reply_blocking(stream)


def _config_lines(config: Mapping[str, ConfigValue]) -> list[str]:
    lines = []
    for key, value in config.items():
        if isinstance(value, str | int):
            lines.append(f"{key} {value}")
        else:
            lines.append(f"{key} {' '.join(value)}")
    return lines


def _traversable(path: Path) -> bool:
    """True if every ancestor of path lets other users through (o+x)."""
    return all(os.stat(parent).st_mode & 0o001 for parent in [path, *path.parents])


def start_server(
    image: ImageEntry,
    host: str,
    port: int | None = None,
    *,
    base_dir: Path,
    config: Mapping[str, ConfigValue] | None = None,
    cluster: bool = False,
    password: str | None = None,
    tls: TlsFiles | None = None,
    user: int | None = None,
    timeout: float = 20.0,
) -> ValkeyServer:
    """Start valkey-server from image on host:port (a free port if None) and wait for PING.

    Runs as `user` (default: the image's user when we are root) with its data
    in base_dir/<host>-<port>; base_dir and its parents must be traversable by
    that user (make one with `server_base_dir`). With tls, `port` is the TLS
    port and the plain port is off; cluster bus and replication use TLS too.
    """
    check_loopback(host)
    uid = user if user is not None else (image.user if os.geteuid() == 0 else os.geteuid())
    gid = image.group if user is None else user
    if uid != os.geteuid() and not _traversable(base_dir):
        raise ValkeyProcError(f"{base_dir} is not traversable by uid {uid}: use server_base_dir()")
    last_error = ""
    for _ in range(3):  # a free port can be taken between probing and binding
        chosen = port or (free_cluster_port(host) if cluster else processes.free_port(host))
        try:
            return _start_once(
                image, host, chosen, base_dir, config or {}, cluster, password, tls, uid, gid, timeout
            )
        except _PortTaken as exc:
            last_error = str(exc)
            if port:
                break
    raise ValkeyProcError(f"could not bind {host}: {last_error}")


class _PortTaken(ValkeyProcError):
    pass


def _start_once(
    image: ImageEntry,
    host: str,
    port: int,
    base_dir: Path,
    config: Mapping[str, ConfigValue],
    cluster: bool,
    password: str | None,
    tls: TlsFiles | None,
    uid: int,
    gid: int,
    timeout: float,
) -> ValkeyServer:
    directory = base_dir / f"{host}-{port}"
    try:
        directory.mkdir(parents=True)
    except FileExistsError:
        # An earlier server of this base dir had the port (a random pick may repeat): its files are
        # not this one's, so the port counts as taken and another is picked.
        raise _PortTaken(f"{directory} holds an earlier server's files") from None
    settings: dict[str, ConfigValue] = {
        "bind": host,
        "port": port,
        "dir": str(directory),
        "daemonize": "no",
        "logfile": '""',
        "save": '""',
        "appendonly": "no",
    }
    if cluster:
        settings.update(
            {
                "cluster-enabled": "yes",
                "cluster-config-file": "nodes.conf",
                "cluster-node-timeout": CLUSTER_NODE_TIMEOUT_MS,
                "cluster-announce-ip": host,
            }
        )
    if password is not None:
        settings.update({"requirepass": password, "masterauth": password})
    if tls is not None:
        copied = TlsFiles(directory / "tls.crt", directory / "tls.key", directory / "ca.crt")
        for source, target in ((tls.cert, copied.cert), (tls.key, copied.key), (tls.ca, copied.ca)):
            shutil.copyfile(source, target)
            os.chown(target, uid, gid)
            target.chmod(0o600)
        settings.update(
            {
                "port": 0,
                "tls-port": port,
                "tls-cert-file": str(copied.cert),
                "tls-key-file": str(copied.key),
                "tls-ca-cert-file": str(copied.ca),
                "tls-auth-clients": "optional",
                "tls-replication": "yes",
            }
        )
        if cluster:
            settings["tls-cluster"] = "yes"
        tls = copied
    settings.update(config)
    conf = directory / "valkey.conf"
    conf.write_text("\n".join(_config_lines(settings)) + "\n")
    conf.chmod(0o644)
    os.chown(directory, uid, gid)
    directory.chmod(0o700)
    argv: list[str] = [str(image.executable("valkey-server")), str(conf)]
    if uid != os.geteuid():
        argv = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--", *argv]
    env = {"PATH": f"{image.bin_dir}:/usr/bin:/bin", "HOME": str(directory), **image.env}
    log_file = base_dir / f"{host}-{port}.log"
    record = processes.start(f"valkey-{host}-{port}", argv, log_file, env=env)
    server = ValkeyServer(image, host, port, directory, record, log_file, password, tls)

    def answers() -> bool:
        if not server.alive():
            processes.stop([record], grace=0)
            tail = server.log_tail()
            if "Address already in use" in tail:
                raise _PortTaken(tail)
            raise ValkeyProcError(f"valkey-server on {host}:{port} exited:\n{tail}")
        reply = server.command("PING", timeout=2.0)
        return reply == b"PONG" or (isinstance(reply, ReplyError) and reply.kind == "LOADING")

    try:
        eventually_blocking(answers, "PING", timeout, interval=0.05, ignore=(OSError, ConnectionError))
    except WaitTimeout as exc:
        processes.stop([record], grace=2)
        raise ValkeyProcError(f"valkey-server on {host}:{port}: {exc}:\n{server.log_tail()}") from None
    return server


def free_cluster_port(host: str) -> int:
    """A free port whose cluster bus port (+10000) is free too, both below 65536."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(10000, 30000)
        with socket.socket() as first, socket.socket() as second:
            try:
                first.bind((host, port))
                second.bind((host, port + 10000))
            except OSError:
                continue
            return port
    raise ValkeyProcError(f"no free port pair on {host}")


def server_base_dir() -> Path:
    """A fresh directory that any uid can traverse (pytest's tmp_path is 0700 root)."""
    base = Path(tempfile.mkdtemp(prefix="valkeyproc-"))
    base.chmod(0o711)
    return base


def stop_servers(servers: Sequence[ValkeyServer], grace: float = 10.0) -> None:
    """Stop every server, all at once, by pid."""
    processes.stop([server.record for server in servers], grace=grace)


# --- clusters ------------------------------------------------------------------------------------


@attrs.frozen
class HandCluster:
    """A cluster formed by hand: primaries own the slots evenly, replicas follow round-robin."""

    primaries: list[ValkeyServer]
    replicas: list[ValkeyServer]
    base_dir: Path

    @property
    def servers(self) -> list[ValkeyServer]:
        return [*self.primaries, *self.replicas]

    @property
    def seeds(self) -> list[tuple[str, int]]:
        return [server.address for server in self.primaries]

    def stop(self, grace: float = 10.0) -> None:
        stop_servers(self.servers, grace=grace)
        shutil.rmtree(self.base_dir, ignore_errors=True)


def _ok(reply: Reply, what: str) -> Reply:
    if isinstance(reply, ReplyError):
        raise ValkeyProcError(f"{what}: {reply.message}")
    return reply


def form_cluster(
    primaries: Sequence[ValkeyServer], replicas: Sequence[ValkeyServer] = (), timeout: float = 90.0
) -> None:
    """MEET everyone, give primaries the operator's even slot split, attach replicas round-robin, and
    wait (timeout in all) until every node is ok and shows every replica."""
    first, everyone = primaries[0], [*primaries, *replicas]
    deadline = time.monotonic() + timeout

    def wait(check: Callable[[], object], what: str) -> None:
        eventually_blocking(check, what, deadline - time.monotonic(), interval=0.2, ignore=_NETWORK_ERRORS)

    for server in everyone[1:]:
        _ok(first.command("CLUSTER", "MEET", server.host, server.port), f"MEET {server.address}")
    for server, (start, end) in zip(primaries, even_ranges(len(primaries)), strict=True):
        _ok(server.command("CLUSTER", "ADDSLOTSRANGE", start, end), f"ADDSLOTSRANGE on {server.address}")
    wait(lambda: _every(everyone, _known_nodes, len(everyone)), "every node to know all the others")
    ids = {server.address: _myid(server) for server in primaries}
    for index, replica in enumerate(replicas):
        primary = primaries[index % len(primaries)]
        _ok(replica.command("CLUSTER", "REPLICATE", ids[primary.address]), f"REPLICATE on {replica.address}")
    wait(lambda: _every(everyone, _cluster_state, "ok"), "cluster_state:ok on every node")
    followers = [len(replicas[index :: len(primaries)]) for index in range(len(primaries))]
    wait(lambda: _each(primaries, _online_replicas, [*followers]), "each primary's replicas online")
    # Gossip spreads the replicas last: wait until every node's slot map shows them all.
    wait(lambda: _every(everyone, _slots_shape, sorted(followers)), "replicas in CLUSTER SLOTS")


_NETWORK_ERRORS = (OSError, ConnectionError)
_Read = Callable[["ValkeyServer"], object]


def _every(servers: Sequence[ValkeyServer], read: _Read, wanted: object) -> object:
    """True when read(server) == wanted for every server, else what each one showed."""
    return _each(servers, read, [wanted] * len(servers))


def _each(servers: Sequence[ValkeyServer], read: _Read, wanted: list[object]) -> object:
    """True when read(servers[i]) == wanted[i] for every i, else what each one showed (NotYet)."""
    seen = {f"{server.host}:{server.port}": read(server) for server in servers}
    return True if list(seen.values()) == wanted else NotYet(seen)


def _slots_shape(server: ValkeyServer) -> list[int]:
    """Replica count per slot range in this node's CLUSTER SLOTS (sorted)."""
    reply = server.command("CLUSTER", "SLOTS")
    if not isinstance(reply, list):
        return []
    return sorted(len(entry) - 3 for entry in reply if isinstance(entry, list))


def _cluster_state(server: ValkeyServer) -> str | None:
    reply = server.command("CLUSTER", "INFO")
    return parse_info(reply.decode()).get("cluster_state") if isinstance(reply, bytes) else None


def cluster_ok(servers: Sequence[ValkeyServer]) -> bool:
    """True when every server reports cluster_state:ok."""
    return all(_cluster_state(server) == "ok" for server in servers)


def _known_nodes(server: ValkeyServer) -> int:
    reply = server.command("CLUSTER", "NODES")
    if not isinstance(reply, bytes):
        return 0
    return sum(1 for line in reply.decode().splitlines() if line and "handshake" not in line.split()[2])


def _myid(server: ValkeyServer) -> str:
    reply = _ok(server.command("CLUSTER", "MYID"), f"MYID on {server.address}")
    assert isinstance(reply, bytes)
    return reply.decode()


def _online_replicas(server: ValkeyServer) -> int:
    fields = server.info("replication")
    return sum(
        1
        for key, value in fields.items()
        if key.startswith("slave") and key[5:].isdigit() and "online" in value
    )


@contextlib.contextmanager
def running_cluster(
    image: ImageEntry,
    primary_hosts: Sequence[str],
    replica_hosts: Sequence[str] = (),
    *,
    password: str | None = None,
    tls: TlsFiles | None = None,
    config: Mapping[str, ConfigValue] | None = None,
    timeout: float = 90.0,
) -> Iterator[HandCluster]:
    """A formed cluster for the with-block; every process is stopped by pid afterwards."""
    base = server_base_dir()
    started: list[ValkeyServer] = []
    try:
        for host in [*primary_hosts, *replica_hosts]:
            started.append(
                start_server(
                    image, host, base_dir=base, config=config, cluster=True, password=password, tls=tls
                )
            )
        cluster = HandCluster(started[: len(primary_hosts)], started[len(primary_hosts) :], base)
        form_cluster(cluster.primaries, cluster.replicas, timeout=timeout)
        yield cluster
    finally:
        stop_servers(started)
        shutil.rmtree(base, ignore_errors=True)
