"""An async admin client for the Valkey nodes of a cluster: every call has a timeout.

The operator asks each node about itself (INFO, CLUSTER MYID/MYSHARDID/NODES/
INFO/GETSLOTMIGRATIONS) and changes the topology through it (CLUSTER MEET,
ADDSLOTSRANGE, REPLICATE, FORGET, MIGRATESLOTS, FAILOVER TAKEOVER), authenticated as its internal admin user,
over TLS when the cluster is TLS-only (verifying the cluster's CA; cluster
addresses are IPs, so hostnames are not checked).

Built on valkey-py's low-level asyncio `Connection` (RESP, AUTH, TLS) without
its response callbacks: replies come back as RESP2 values (bytes, int, list),
an error reply raises `ValkeyCommandError`. Every connect and every command is
bounded by `asyncio.timeout`, and only addresses inside `allowed_networks`
are ever dialled (the operator's --node-networks; the test bed passes
127.0.0.0/8).
"""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
from valkey import exceptions as valkey_exceptions
from valkey.asyncio.connection import Connection, SSLConnection

from valkey_operator.valkey.pem_file import pem_path

VALKEY_PORT = 6379
BUS_PORT_OFFSET = 10000

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class ValkeyAdminError(Exception):
    """Any failure talking to a node: refused address, connect/IO error, timeout, error reply."""


class AddressNotAllowed(ValkeyAdminError):
    """The address is outside the networks the operator may dial."""


class ValkeyCommandError(ValkeyAdminError):
    """The server answered with an error reply."""


def check_address(host: str, allowed: Iterable[Network]) -> None:
    """Refuse anything that is not an IP literal inside one of the allowed networks."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise AddressNotAllowed(f"{host!r} is not an IP address") from None
    if not any(address in network for network in allowed):
        raise AddressNotAllowed(f"{host} is outside the networks the operator may dial")


def parse_info(text: str) -> dict[str, str]:
    """INFO's 'key:value' lines (section headers and blanks skipped)."""
    fields: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition(":")
        if sep:
            fields[key] = value
    return fields


def text_of(reply: Any) -> str:
    if isinstance(reply, bytes):
        return reply.decode(errors="replace")
    return str(reply)


def decode_pairs(reply: Any) -> dict[str, Any]:
    """A RESP2 flat key/value list (or RESP3 map) -> str-keyed dict, values decoded to str where bytes."""
    if isinstance(reply, dict):
        items = list(reply.items())
    elif isinstance(reply, list):
        items = list(zip(reply[::2], reply[1::2], strict=False))
    else:
        return {}
    return {text_of(key): (text_of(value) if isinstance(value, bytes) else value) for key, value in items}


def parse_migrations(reply: Any) -> list[dict[str, Any]]:
    """CLUSTER GETSLOTMIGRATIONS -> one dict per job."""
    return [decode_pairs(entry) for entry in reply or []]


def parse_lines(reply: Any) -> list[str]:
    """An array of bulk strings (ACL LIST) -> text lines."""
    return [text_of(line) for line in reply or []]


def parse_config(reply: Any) -> dict[str, str]:
    """CONFIG GET -> name: value."""
    return {key: str(value) for key, value in decode_pairs(reply).items()}


def parse_commands_known(names: Sequence[str], reply: Any) -> dict[str, bool]:
    """COMMAND INFO names -> whether the server knows each (nil for an unknown one)."""
    return {name: entry is not None for name, entry in zip(names, reply or [], strict=False)}


@attrs.frozen(kw_only=True)
class Credentials:
    username: str
    password: str = attrs.field(repr=False)


@attrs.frozen(kw_only=True)
class AdminClient:
    """How to reach a cluster's nodes: credentials, TLS CA (None for plain), timeouts, allowed networks."""

    credentials: Credentials
    ca_pem: str | None = attrs.field(default=None, repr=False)
    identity_pem: str | None = attrs.field(default=None, repr=False)
    """A client certificate and its key (PEM) to present, where nodes require one (TLS only)."""
    connect_timeout: float = 2.0
    command_timeout: float = 3.0
    allowed_networks: tuple[Network, ...]
    """Required: the caller states where it may dial (no default that could hide a missing flag)."""
    port: int = VALKEY_PORT

    @asynccontextmanager
    async def connect(self, host: str) -> AsyncIterator[NodeConnection]:
        """One authenticated connection to the node at host; closed on exit."""
        check_address(host, self.allowed_networks)
        kwargs: dict[str, Any] = {
            "host": host,
            "port": self.port,
            "username": self.credentials.username,
            "password": self.credentials.password,
            "socket_connect_timeout": self.connect_timeout,
            "socket_timeout": self.command_timeout,
            "lib_name": None,
            "lib_version": None,
            "retry_on_timeout": False,
        }
        connection: Connection
        if self.ca_pem is not None:
            if self.identity_pem is not None:  # valkey-py loads a chain only given both names
                kwargs["ssl_certfile"] = kwargs["ssl_keyfile"] = pem_path(self.identity_pem)
            connection = SSLConnection(
                ssl_ca_data=self.ca_pem, ssl_cert_reqs="required", ssl_check_hostname=False, **kwargs
            )
        else:
            connection = Connection(**kwargs)
        try:
            try:
                async with asyncio.timeout(self.connect_timeout + self.command_timeout):
                    await connection.connect()  # type: ignore[no-untyped-call]
            except TimeoutError as exc:
                raise ValkeyAdminError(f"{host}:{self.port}: connect timed out") from exc
            except valkey_exceptions.ValkeyError as exc:
                raise ValkeyAdminError(f"{host}:{self.port}: {exc}") from exc
            except OSError as exc:
                raise ValkeyAdminError(f"{host}:{self.port}: {exc}") from exc
            yield NodeConnection(connection, host, self.command_timeout)
        finally:
            try:
                async with asyncio.timeout(1.0):
                    await connection.disconnect()
            except Exception:  # closing is best effort
                pass


class NodeConnection:
    """Commands on one node; each bounded by the client's command timeout."""

    def __init__(self, connection: Connection, host: str, timeout: float) -> None:
        self.connection = connection
        self.host = host
        self.timeout = timeout

    async def command(self, *args: str | int) -> Any:
        """Send one command, return its raw reply; error replies raise ValkeyCommandError."""
        (reply,) = await self.pipeline(args)
        if isinstance(reply, ValkeyCommandError):
            raise reply
        return reply

    async def pipeline(self, *commands: Sequence[str | int]) -> list[Any]:
        """Send every command in one write and read their replies in order: one round trip.

        An error reply is returned in its place as a ValkeyCommandError (the others still
        count); a timeout or a broken connection raises ValkeyAdminError for the whole batch.
        """
        names = " / ".join(" ".join(str(arg) for arg in command[:2]) for command in commands)
        replies: list[Any] = []
        try:
            async with asyncio.timeout(self.timeout):
                await self.connection.send_packed_command(self.connection.pack_commands(commands))
                for command in commands:
                    try:
                        replies.append(await self.connection.read_response())
                    except valkey_exceptions.ResponseError as exc:
                        name = " ".join(str(arg) for arg in command[:2])
                        error = ValkeyCommandError(f"{self.host}: {name}: {exc}")
                        error.__cause__ = exc
                        replies.append(error)
        except TimeoutError as exc:
            await self._drop()
            raise ValkeyAdminError(f"{self.host}: {names} timed out after {self.timeout}s") from exc
        except (valkey_exceptions.ValkeyError, OSError) as exc:
            await self._drop()
            raise ValkeyAdminError(f"{self.host}: {names}: {exc}") from exc
        return replies

    async def _drop(self) -> None:
        try:
            async with asyncio.timeout(1.0):
                await self.connection.disconnect()
        except Exception:  # the connection is unusable anyway
            pass

    async def text(self, *args: str | int) -> str:
        return text_of(await self.command(*args))

    def peer_certificate(self) -> bytes | None:
        """The DER certificate the node presented in this connection's TLS handshake (None: plain)."""
        writer = getattr(self.connection, "_writer", None)  # valkey-py keeps the stream here
        ssl_object = writer.get_extra_info("ssl_object") if writer is not None else None
        if ssl_object is None:
            return None
        der: bytes | None = ssl_object.getpeercert(binary_form=True)
        return der

    # --- reads ---

    async def info(self, *sections: str) -> dict[str, str]:
        return parse_info(await self.text("INFO", *sections))

    async def cluster_nodes(self) -> str:
        return await self.text("CLUSTER", "NODES")

    async def cluster_info(self) -> dict[str, str]:
        return parse_info(await self.text("CLUSTER", "INFO"))

    async def cluster_getslotmigrations(self) -> list[dict[str, Any]]:
        return parse_migrations(await self.command("CLUSTER", "GETSLOTMIGRATIONS"))

    async def config_get(self, *names: str) -> dict[str, str]:
        """CONFIG GET of every name in one call (Valkey 7+ takes several)."""
        if not names:
            return {}
        return parse_config(await self.command("CONFIG", "GET", *names))

    # --- changes ---

    async def cluster_meet(self, ip: str, port: int = VALKEY_PORT, bus_port: int | None = None) -> None:
        await self.command("CLUSTER", "MEET", ip, port, bus_port or port + BUS_PORT_OFFSET)

    async def cluster_addslotsrange(self, ranges: Sequence[tuple[int, int]]) -> None:
        args: list[str | int] = []
        for start, end in ranges:
            args += [start, end]
        await self.command("CLUSTER", "ADDSLOTSRANGE", *args)

    async def cluster_replicate(self, node_id: str) -> None:
        await self.command("CLUSTER", "REPLICATE", node_id)

    async def cluster_migrateslots(self, ranges: Sequence[tuple[int, int]], target_id: str) -> None:
        """One atomic slot migration job to target_id (sent to the source primary; replies at once)."""
        args: list[str | int] = ["SLOTSRANGE"]
        for start, end in ranges:
            args += [start, end]
        await self.command("CLUSTER", "MIGRATESLOTS", *args, "NODE", target_id)

    async def cluster_failover(self, mode: str | None = None) -> None:
        """CLUSTER FAILOVER [FORCE|TAKEOVER], sent to a replica."""
        await self.command("CLUSTER", "FAILOVER", *([mode] if mode else []))

    async def cluster_forget(self, node_id: str) -> None:
        await self.command("CLUSTER", "FORGET", node_id)

    async def acl_setuser(self, username: str, rules: Sequence[str]) -> None:
        await self.command("ACL", "SETUSER", username, *rules)

    async def acl_deluser(self, *usernames: str) -> int:
        reply = await self.command("ACL", "DELUSER", *usernames)
        return int(reply)

    async def client_pause_write(self, milliseconds: int) -> None:
        """Hold every client's writes (reads go on) for at most milliseconds: the node ends the
        pause by itself then, whatever happens to this connection."""
        await self.command("CLIENT", "PAUSE", milliseconds, "WRITE")

    async def client_unpause(self) -> None:
        await self.command("CLIENT", "UNPAUSE")

    async def config_set(self, settings: Mapping[str, str]) -> None:
        args: list[str | int] = []
        for key, value in settings.items():
            args += [key, value]
        if args:
            await self.command("CONFIG", "SET", *args)
