"""One RDB snapshot streamed out of a Valkey node over its own protocol, never held in memory.

A backup must not exec into pods, and a shard's RDB may be larger than the
operator's memory. So the operator asks the node for a snapshot the way
`valkey-cli --rdb` does: AUTH, `REPLCONF rdb-only 1` (the node closes the
link after the RDB instead of streaming writes after it), `REPLCONF capa eof`
(the node may send a diskless snapshot), then `SYNC`. While the node prepares
the snapshot it sends "\\n" keepalives; then either `$<len>\\r\\n` and len
bytes (written to the node's disk first), or `$EOF:<40-byte mark>\\r\\n`, the
bytes, and the same mark (diskless: straight from the fork to the socket).

A node with `repl-diskless-sync-delay` above 0 (Valkey's default: 5 s) holds
an EOF-capable SYNC that long before it forks, waiting for more replicas to
share the snapshot: a fixed wait per shard, whatever its size. Given the
delay the node should run (`sync_delay`), the stream sets it to 0 on its own
connection just before SYNC, so the node forks at once, and back over a second
connection as soon as the node answers SYNC (a keepalive or the RDB's
announcement: the SYNC was taken, the fork started or queued behind another
child). A real replica arriving in those milliseconds simply gets its own
fork. Should the setting not be put back (the operator stopped in between),
the cluster's next pass with no backup Running does it (View.runtime_changes).

`RdbStream.chunks` yields exactly the RDB's bytes (the mark stripped) and
reads the RDB's head on the way (rdb_header) for db 0's key count, so the
backup can record it. Plain asyncio streams and hand-written RESP for the few
commands: the connection is a byte pipe after SYNC, which a client library
does not model. Only addresses inside allowed_networks are dialled; every
read is bounded by the timeout; TLS verifies the cluster's CA but not the
hostname (nodes are reached by IP), as the admin client does.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager

import structlog

from valkey_operator.valkey.admin import (
    Credentials,
    Network,
    ValkeyAdminError,
    ValkeyCommandError,
    check_address,
    parse_info,
)
from valkey_operator.valkey.pem_file import pem_path
from valkey_operator.valkey.rdb_header import MAGIC_SIZE, HeaderScanner, NotAnRdb, parse_magic

log = structlog.get_logger(__name__)

SYNC_DELAY = "repl-diskless-sync-delay"
"""The node setting that holds a diskless SYNC before its fork (lowered for the moment a SYNC starts)."""
EOF_MARK_SIZE = 40
"""The diskless form's end mark: 40 random bytes, announced first and sent again after the RDB."""
_TRAILER = MAGIC_SIZE
"""An RDB ends with the EOF opcode (0xFF) and an 8-byte checksum: 9 bytes, as many as the magic."""
_BUFFER = 1 << 20
"""The stream reader's buffer limit: large reads keep the per-chunk overhead small."""


def tls_context(ca_pem: str, identity_pem: str | None = None) -> ssl.SSLContext:
    """A client context trusting the cluster's CA bundle, presenting identity_pem (certificate and
    key) when given; hostnames unchecked (nodes are IPs)."""
    context = ssl.create_default_context(cadata=ca_pem)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_REQUIRED
    if identity_pem is not None:
        context.load_cert_chain(pem_path(identity_pem))
    return context


def _take(pending: bytearray, size: int) -> bytes:
    """Remove and return the first size bytes of pending, copied once."""
    with memoryview(pending) as view:
        piece = bytes(view[:size])
    del pending[:size]
    return piece


def _command(*args: str) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg.encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


class RdbStream:
    """The RDB a node is sending; read it once with `chunks`."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        where: str,
        *,
        size: int | None,
        mark: bytes | None,
        magic: bytes,
        timeout: float,
    ) -> None:
        self._reader = reader
        self._where = where
        self._mark = mark
        self._magic = magic
        self._timeout = timeout
        self._scanner = HeaderScanner()
        self._started = False
        self.size = size
        """The RDB's length when the node announced it; None for the diskless (EOF-marked) form."""
        self.version = magic.decode("ascii")
        """The RDB magic, e.g. "VALKEY080" or "REDIS0011"."""
        self.keys: int | None = None
        """After `chunks` is exhausted: keys in db 0 per the RDB's own RESIZEDB (None: not found)."""
        self.expires: int | None = None
        """After `chunks` is exhausted: keys of db 0 with a TTL (None: not found)."""
        self.transferred = 0
        """RDB bytes yielded so far."""

    async def chunks(self, chunk_size: int = 1 << 20) -> AsyncIterator[bytes]:
        """Exactly the RDB's bytes, in chunks of chunk_size (the last one shorter).

        Raises ValkeyAdminError when the stream ends early or breaks, when no bytes arrive
        within the timeout, or when what arrived does not end like an RDB.
        """
        if self._started:
            raise ValkeyAdminError(f"{self._where}: the RDB stream was already read")
        self._started = True
        chunk_size = max(chunk_size, EOF_MARK_SIZE)
        pieces = self._sized(self.size, chunk_size) if self.size is not None else self._marked(chunk_size)
        tail = b""
        async for piece in pieces:
            if not self._scanner.done:
                self._scanner.feed(piece)
            tail = (tail + piece[-_TRAILER:])[-_TRAILER:]
            self.transferred += len(piece)
            yield piece
        if len(tail) < _TRAILER or tail[0] != 0xFF:
            raise ValkeyAdminError(f"{self._where}: the RDB does not end with its EOF opcode")
        header = self._scanner.header
        if header is not None:
            self.keys, self.expires = header.keys, header.expires

    async def _sized(self, size: int, chunk_size: int) -> AsyncIterator[bytes]:
        remaining = size - len(self._magic)
        first = self._magic
        while remaining > 0 or first:
            count = max(0, min(chunk_size - len(first), remaining))
            data = await self._read(self._reader.readexactly(count)) if count else b""
            remaining -= count
            yield first + data if first else data
            first = b""

    async def _marked(self, chunk_size: int) -> AsyncIterator[bytes]:
        mark = self._mark
        assert mark is not None
        pending = bytearray(self._magic)
        searched = 0  # pending[:searched] holds no mark (but may hold a mark's first 39 bytes)
        while True:
            found = pending.find(mark, max(0, searched - EOF_MARK_SIZE + 1))
            if found >= 0:
                del pending[found:]  # the mark, and anything after it, is not the RDB's
                while pending:
                    yield _take(pending, chunk_size)
                return
            searched = len(pending)
            while len(pending) >= chunk_size + EOF_MARK_SIZE:
                yield _take(pending, chunk_size)
                searched -= chunk_size
            data = await self._read(self._reader.read(_BUFFER))
            if not data:
                raise ValkeyAdminError(f"{self._where}: the RDB stream ended before its EOF mark")
            pending += data

    async def _read(self, read: Awaitable[bytes]) -> bytes:
        """Await one read with the timeout; every failure becomes ValkeyAdminError."""
        try:
            async with asyncio.timeout(self._timeout):
                return await read
        except asyncio.IncompleteReadError as exc:
            got = self.transferred + len(exc.partial)
            raise ValkeyAdminError(
                f"{self._where}: the RDB stream ended early ({got} of {self.size} bytes)"
            ) from None
        except TimeoutError:
            raise ValkeyAdminError(f"{self._where}: no RDB bytes for {self._timeout}s") from None
        except OSError as exc:
            raise ValkeyAdminError(f"{self._where}: the RDB stream broke: {exc}") from exc


Answered = Callable[[], Awaitable[None]]
"""Called once when the node's first byte after a command arrives (never raises)."""


async def _reply_line(
    reader: asyncio.StreamReader, where: str, what: str, timeout: float, answered: Answered | None = None
) -> bytes:
    """The next reply line (CRLF stripped), skipping the "\\n" keepalives a node sends before an RDB."""
    try:
        while True:
            async with asyncio.timeout(timeout):
                line = await reader.readline()
            if answered is not None:
                await answered()
                answered = None
            if line == b"\n":
                continue
            if not line.endswith(b"\r\n"):
                raise ValkeyAdminError(f"{where}: {what}: the node closed the connection")
            if line.startswith(b"-"):
                message = line[1:-2].decode(errors="replace")
                raise ValkeyCommandError(f"{where}: {what}: {message}")
            return line[:-2]
    except TimeoutError:
        raise ValkeyAdminError(f"{where}: {what}: no reply within {timeout}s") from None
    except (OSError, ValueError) as exc:  # ValueError: a line longer than the buffer
        raise ValkeyAdminError(f"{where}: {what}: {exc}") from exc


async def _ask(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    where: str,
    timeout: float,
    *args: str,
    answered: Answered | None = None,
) -> bytes:
    what = " ".join(args[:2]) if args[0] != "AUTH" else f"AUTH as {args[1]}"  # never the password
    try:
        writer.write(_command(*args))
        async with asyncio.timeout(timeout):
            await writer.drain()
    except TimeoutError:
        raise ValkeyAdminError(f"{where}: {what}: could not send within {timeout}s") from None
    except OSError as exc:
        raise ValkeyAdminError(f"{where}: {what}: {exc}") from exc
    return await _reply_line(reader, where, what, timeout, answered)


async def _server_version(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, where: str, timeout: float
) -> str | None:
    """The node's own version (INFO server), None if it does not say."""
    announced = await _ask(reader, writer, where, timeout, "INFO", "server")
    if not (announced.startswith(b"$") and announced[1:].isdigit()):
        raise ValkeyAdminError(f"{where}: INFO server: unexpected reply {announced[:60]!r}")
    try:
        async with asyncio.timeout(timeout):
            text = await reader.readexactly(int(announced[1:]) + 2)
    except (TimeoutError, asyncio.IncompleteReadError, OSError) as exc:
        raise ValkeyAdminError(f"{where}: INFO server: {exc or 'timed out'}") from None
    fields = parse_info(text.decode(errors="replace"))
    return fields.get("valkey_version") or fields.get("redis_version")


async def _start_sync(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    where: str,
    credentials: Credentials,
    timeout: float,
    diskless: bool,
    delay: _Delay | None,
    announced_at: Callable[[], None] | None = None,
) -> RdbStream:
    await _ask(reader, writer, where, timeout, "AUTH", credentials.username, credentials.password)
    version = await _server_version(reader, writer, where, timeout)
    await _ask(reader, writer, where, timeout, "REPLCONF", "rdb-only", "1")
    if diskless:
        await _ask(reader, writer, where, timeout, "REPLCONF", "capa", "eof")
    if version is not None:
        # A replica that does not say its version gets the oldest RDB format the node can write
        # (Valkey 9: "REDIS0011"), which cannot hold every key (a hash with field TTLs): the
        # snapshot would fail. Claiming the node's own version gets its own format.
        with contextlib.suppress(ValkeyCommandError):  # a node without it has one format anyway
            await _ask(reader, writer, where, timeout, "REPLCONF", "version", version)
    if delay is not None:
        await _ask(reader, writer, where, timeout, "CONFIG", "SET", SYNC_DELAY, "0")
        delay.lowered = True
    announced = await _ask(
        reader, writer, where, timeout, "SYNC", answered=delay.put_back if delay is not None else None
    )
    size: int | None = None
    mark: bytes | None = None
    if announced.startswith(b"$EOF:") and len(announced) == 5 + EOF_MARK_SIZE:
        mark = announced[5:]
    elif announced.startswith(b"$") and announced[1:].isdigit():
        size = int(announced[1:])
        if size < MAGIC_SIZE + _TRAILER:
            raise ValkeyAdminError(f"{where}: SYNC announced {size} bytes, too few for an RDB")
    else:
        raise ValkeyAdminError(f"{where}: SYNC: unexpected reply {announced[:60]!r}")
    if announced_at is not None:
        announced_at()  # the snapshot exists: the fork ran (diskless) or the file is written
    try:
        async with asyncio.timeout(timeout):
            magic = await reader.readexactly(MAGIC_SIZE)
        parse_magic(magic)
    except NotAnRdb as exc:
        raise ValkeyAdminError(f"{where}: SYNC: {exc}") from None
    except asyncio.IncompleteReadError:
        raise ValkeyAdminError(f"{where}: SYNC: the node closed the connection before the RDB") from None
    except TimeoutError:
        raise ValkeyAdminError(f"{where}: SYNC: no RDB within {timeout}s") from None
    except OSError as exc:
        raise ValkeyAdminError(f"{where}: SYNC: {exc}") from exc
    return RdbStream(reader, where, size=size, mark=mark, magic=magic, timeout=timeout)


async def _connect(
    host: str, port: int, context: ssl.SSLContext | None, where: str, timeout: float
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    try:
        async with asyncio.timeout(timeout):
            return await asyncio.open_connection(host, port, ssl=context, limit=_BUFFER)
    except TimeoutError:
        raise ValkeyAdminError(f"{where}: connect timed out after {timeout}s") from None
    except OSError as exc:
        raise ValkeyAdminError(f"{where}: {exc}") from exc


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    try:
        async with asyncio.timeout(1.0):
            await writer.wait_closed()
    except Exception:  # closing is best effort: the node may have gone already
        pass


class _Delay:
    """The node's sync delay, lowered to 0 for the moment a SYNC starts and put back once."""

    def __init__(
        self,
        value: str,
        host: str,
        port: int,
        credentials: Credentials,
        context: ssl.SSLContext | None,
        where: str,
        timeout: float,
    ) -> None:
        self._value = value
        self._dial = (host, port, context, where, timeout)
        self._credentials = credentials
        self.lowered = False
        """The node answered the CONFIG SET to 0: put_back has something to undo."""
        self.restored: bool | None = None
        """None until put_back ran; then whether the node runs the value again."""

    async def put_back(self) -> None:
        """CONFIG SET the value over a connection of its own (the stream's is a replica link now).
        A failure is logged, never raised: the stream goes on, the cluster's next pass repairs it."""
        if not self.lowered or self.restored is not None:
            return
        host, port, context, where, timeout = self._dial
        self.restored = False
        try:
            reader, writer = await _connect(host, port, context, where, timeout)
            try:
                user, password = self._credentials.username, self._credentials.password
                await _ask(reader, writer, where, timeout, "AUTH", user, password)
                await _ask(reader, writer, where, timeout, "CONFIG", "SET", SYNC_DELAY, self._value)
            finally:
                await _close(writer)
        except ValkeyAdminError as exc:
            log.warning("the sync delay was not put back", node=where, value=self._value, error=str(exc))
            return
        self.restored = True


@asynccontextmanager
async def open_rdb_stream(
    host: str,
    port: int,
    credentials: Credentials,
    *,
    ca_pem: str | None,
    allowed_networks: Sequence[Network],
    identity_pem: str | None = None,
    timeout: float = 30.0,
    diskless: bool = True,
    sync_delay: str | None = None,
    announced: Callable[[], None] | None = None,
) -> AsyncIterator[RdbStream]:
    """Ask the node at host:port for an RDB snapshot; the stream is open inside the with-block.

    host must be an IP inside allowed_networks (checked before dialling). timeout bounds the
    connect, each reply, the wait for the snapshot (between keepalives) and each read after.
    diskless announces the EOF capability: a node with `repl-diskless-sync yes` (Valkey's
    default) then streams from its fork without touching its disk; without it, or with the
    setting off, the node first writes the RDB into its own dir (its dump.rdb) and sends that.
    sync_delay (diskless only): the `repl-diskless-sync-delay` the node should run; the stream
    sets it to 0 just before SYNC and back to this as soon as the node answers (or the sync fails),
    so the RDB starts at once instead of after the delay. None leaves the setting alone.
    announced is called once the node announced the RDB (`$EOF:<mark>` or `$<len>`), before any of
    its bytes are read: the node's snapshot is then fixed (its fork ran, or its file is written),
    which a one-instant backup waits for on every shard (controllers/backup/instant.py).
    Every failure is a ValkeyAdminError naming the node and the step, never the password.
    """
    check_address(host, allowed_networks)
    where = f"{host}:{port}"
    try:
        context = tls_context(ca_pem, identity_pem) if ca_pem is not None else None
    except (ssl.SSLError, ValueError) as exc:
        raise ValkeyAdminError(f"{where}: the CA bundle is not usable: {exc}") from None
    reader, writer = await _connect(host, port, context, where, timeout)
    delay = (
        _Delay(sync_delay, host, port, credentials, context, where, timeout)
        if diskless and sync_delay is not None
        else None
    )
    try:
        started = await _start_sync(reader, writer, where, credentials, timeout, diskless, delay, announced)
    except BaseException:
        await _close(writer)
        if delay is not None:
            await delay.put_back()  # the node never answered SYNC: nothing of it runs at 0 now
        raise
    try:
        yield started
    finally:
        await _close(writer)
