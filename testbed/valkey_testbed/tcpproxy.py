"""A killable loopback TCP proxy, for watch-cut and API-outage tests.

Tests point a client at the proxy instead of the shared API server and then
cut its connections (an orderly close, or a TCP reset), refuse new ones, or
stall them (a black hole: bytes are taken in and held, nothing answers, so
only the client's own timeout ends a request), without touching the server
that other tests use. It forwards bytes blindly, so TLS runs end to end (the
API server's certificate has an IP SAN for 127.0.0.1 and still verifies).
Loopback only, on both sides (TESTBED.md, network safety).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from types import TracebackType

__all__ = ["TcpProxy"]

LOOPBACK = "127.0.0.1"
_CHUNK = 64 * 1024
_RESET = struct.pack("ii", 1, 0)
"""SO_LINGER on with a zero timeout: close() sends RST instead of FIN."""


class _Link:
    """One proxied connection: the client side, the upstream side and the two pumps between them."""

    def __init__(self, client: asyncio.StreamWriter, upstream: asyncio.StreamWriter) -> None:
        self.client = client
        self.upstream = upstream
        self.pumps: list[asyncio.Task[None]] = []

    def abort(self, *, reset: bool = False) -> None:
        """Drop both sides at once, discarding anything not yet sent (a cut); with reset, as a TCP
        RST, so each peer's next read fails with ECONNRESET instead of seeing an orderly end."""
        for writer in (self.client, self.upstream):
            if reset:
                sock = writer.transport.get_extra_info("socket")
                if sock is not None:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
            writer.transport.abort()
        for pump in self.pumps:  # a pump holding bytes in a stall would otherwise wait for resume
            pump.cancel()

    def close(self) -> None:
        """Close both sides after flushing what was already written (a normal end)."""
        self.client.close()
        self.upstream.close()


class TcpProxy:
    """Listens on 127.0.0.1:`port` and forwards every connection to 127.0.0.1:`target_port`."""

    def __init__(self, target_port: int, *, port: int = 0) -> None:
        """`port` 0 picks a free port; read it from `port` after `start`."""
        self.target_port = target_port
        self._requested_port = port
        self._server: asyncio.Server | None = None
        self._links: set[_Link] = set()
        self._handlers: set[asyncio.Task[None]] = set()
        self._paused = False
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._stopping = False
        self.connections_accepted = 0
        """Connections forwarded so far (refused ones excluded), for assertions."""
        self.connections_refused = 0
        """Connections closed on accept while paused: a client's attempt that was turned away."""
        self.held_bytes = 0
        """Bytes taken in while stalled (both directions): a client's request reached the black hole."""

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("proxy not started")
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    @property
    def url(self) -> str:
        """The https URL a client should use instead of the API server's."""
        return f"https://{LOOPBACK}:{self.port}"

    @property
    def live_connections(self) -> int:
        return len(self._links)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, LOOPBACK, self._requested_port)

    def cut(self, *, reset: bool = False) -> int:
        """Abort every live connection now (both sides); keep listening. Returns how many. With
        reset, each side gets a TCP RST (ECONNRESET on its next read) rather than an orderly end."""
        links = list(self._links)
        for link in links:
            link.abort(reset=reset)
        return len(links)

    def pause(self) -> None:
        """Close new connections as soon as they are accepted, until `resume`."""
        self._paused = True

    def stall(self) -> None:
        """A black hole until `resume`: live and new connections stay open, bytes are taken in
        (counted in held_bytes) and held, and nothing is relayed either way. A request then gets
        no answer and no error: only the client's own timeout or deadline ends it."""
        self._flowing.clear()

    def resume(self) -> None:
        """Accept new connections again and relay what a stall held, in order."""
        self._paused = False
        self._flowing.set()

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def stalled(self) -> bool:
        return not self._flowing.is_set()

    async def stop(self) -> None:
        """Stop listening, cut everything and wait for all connection handlers to finish."""
        self._stopping = True
        if self._server is not None:
            self._server.close()
        self.cut()
        if self._handlers:
            await asyncio.gather(*self._handlers, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> TcpProxy:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def _handle(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            if self._paused or self._stopping:
                self.connections_refused += int(not self._stopping)
                client_writer.transport.abort()
                return
            try:
                upstream_reader, upstream_writer = await asyncio.open_connection(LOOPBACK, self.target_port)
            except OSError:
                client_writer.transport.abort()
                return
            if self._stopping:  # stop() ran while we were connecting: cut() could not see this link
                client_writer.transport.abort()
                upstream_writer.transport.abort()
                return
            link = _Link(client_writer, upstream_writer)
            self._links.add(link)
            self.connections_accepted += 1
            try:
                pumps = link.pumps = [
                    asyncio.create_task(self._pump(client_reader, upstream_writer)),
                    asyncio.create_task(self._pump(upstream_reader, client_writer)),
                ]
                try:
                    await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    # Either side ending ends the connection: no half-open links.
                    # close() (not abort) so bytes already relayed are still delivered.
                    for pump in pumps:
                        pump.cancel()
                    await asyncio.gather(*pumps, return_exceptions=True)
                    link.close()
            finally:
                self._links.discard(link)
        finally:
            self._handlers.discard(task)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Relay one direction; in a stall, hold the chunk just read (reading no more) until resume."""
        with contextlib.suppress(ConnectionError, OSError):
            while data := await reader.read(_CHUNK):
                if not self._flowing.is_set():
                    self.held_bytes += len(data)
                    await self._flowing.wait()
                writer.write(data)
                await writer.drain()
