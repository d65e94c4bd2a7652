"""A killable loopback TCP proxy, for watch-cut and API-outage tests.

Tests point a client at the proxy instead of the shared API server and then
cut its connections or refuse new ones, without touching the server that
other tests use. It forwards bytes blindly, so TLS runs end to end (the API
server's certificate has an IP SAN for 127.0.0.1 and still verifies).
Loopback only, on both sides (TESTBED.md, network safety).
"""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType

__all__ = ["TcpProxy"]

LOOPBACK = "127.0.0.1"
_CHUNK = 64 * 1024


class _Link:
    """One proxied connection: the client side and the upstream side."""

    def __init__(self, client: asyncio.StreamWriter, upstream: asyncio.StreamWriter) -> None:
        self.client = client
        self.upstream = upstream

    def abort(self) -> None:
        """Drop both sides at once, discarding anything not yet sent (a cut)."""
        self.client.transport.abort()
        self.upstream.transport.abort()

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
        self._stopping = False
        self.connections_accepted = 0
        """Connections forwarded so far (refused ones excluded), for assertions."""

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

    def cut(self) -> int:
        """Abort every live connection now (both sides); keep listening. Returns how many."""
        links = list(self._links)
        for link in links:
            link.abort()
        return len(links)

    def pause(self) -> None:
        """Close new connections as soon as they are accepted, until `resume`."""
        self._paused = True

    def resume(self) -> None:
        self._paused = False

    @property
    def paused(self) -> bool:
        return self._paused

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
                pumps = [
                    asyncio.create_task(_pump(client_reader, upstream_writer)),
                    asyncio.create_task(_pump(upstream_reader, client_writer)),
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


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while data := await reader.read(_CHUNK):
            writer.write(data)
            await writer.drain()
