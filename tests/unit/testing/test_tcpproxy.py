"""The test bed's TCP proxy on a loopback echo server: relay, refuse, reset, stall and resume."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from valkey_testbed.tcpproxy import LOOPBACK, TcpProxy
from valkey_testbed.wait import eventually

pytestmark = pytest.mark.timeout(30)


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(4096):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


@pytest_asyncio.fixture
async def proxy() -> AsyncIterator[TcpProxy]:
    server = await asyncio.start_server(_echo, LOOPBACK, 0)
    try:
        async with TcpProxy(server.sockets[0].getsockname()[1]) as started:
            yield started
    finally:
        server.close()
        await server.wait_closed()


async def connect(proxy: TcpProxy) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection(LOOPBACK, proxy.port)
    writer.write(b"hello")
    await writer.drain()
    assert await reader.readexactly(5) == b"hello"
    return reader, writer


async def test_a_reset_cut_fails_the_clients_next_read_with_econnreset(proxy: TcpProxy) -> None:
    reader, writer = await connect(proxy)
    assert proxy.cut(reset=True) == 1
    with pytest.raises(ConnectionResetError):
        await asyncio.wait_for(reader.read(1), 5)
    writer.close()


async def test_a_plain_cut_ends_the_connection(proxy: TcpProxy) -> None:
    reader, writer = await connect(proxy)
    assert proxy.cut() == 1
    # abort() may send RST when bytes were unread: either way the connection is over
    with contextlib.suppress(ConnectionResetError):
        assert await asyncio.wait_for(reader.read(1), 5) == b""
    writer.close()


async def test_a_stall_holds_bytes_both_ways_until_resume_then_relays_them_in_order(
    proxy: TcpProxy,
) -> None:
    reader, writer = await connect(proxy)
    proxy.stall()
    writer.write(b"one")
    await writer.drain()
    await eventually(lambda: proxy.held_bytes >= 3, "the request held by the stall", 5, interval=0.01)
    read = asyncio.ensure_future(reader.read(3))
    # The echo server never saw the bytes: nothing can come back while the stall holds them.
    await eventually(lambda: proxy.held_bytes == 3, "exactly the request held", 5, interval=0.01)
    assert not read.done()
    proxy.resume()
    assert await asyncio.wait_for(read, 5) == b"one"
    writer.close()


async def test_a_stall_also_holds_new_connections(proxy: TcpProxy) -> None:
    proxy.stall()
    reader, writer = await asyncio.open_connection(LOOPBACK, proxy.port)
    writer.write(b"ping")
    await writer.drain()
    await eventually(lambda: proxy.held_bytes == 4, "the new connection's bytes held", 5, interval=0.01)
    assert proxy.connections_accepted == 1 and proxy.connections_refused == 0
    proxy.resume()
    assert await asyncio.wait_for(reader.readexactly(4), 5) == b"ping"
    writer.close()


async def test_a_cut_ends_stalled_connections_too(proxy: TcpProxy) -> None:
    reader, writer = await connect(proxy)
    proxy.stall()
    writer.write(b"lost")
    await writer.drain()
    await eventually(lambda: proxy.held_bytes == 4, "the bytes held", 5, interval=0.01)
    assert proxy.cut(reset=True) == 1
    await eventually(lambda: proxy.live_connections == 0, "the stalled link gone", 5, interval=0.01)
    with pytest.raises(ConnectionResetError):
        await asyncio.wait_for(reader.read(1), 5)
    writer.close()


async def test_pause_refuses_and_counts_new_connections(proxy: TcpProxy) -> None:
    proxy.pause()
    reader, writer = await asyncio.open_connection(LOOPBACK, proxy.port)
    await eventually(lambda: proxy.connections_refused == 1, "the refusal", 5, interval=0.01)
    with contextlib.suppress(ConnectionResetError):
        assert await asyncio.wait_for(reader.read(1), 5) == b""
    writer.close()
    proxy.resume()
    _, second = await connect(proxy)
    assert proxy.connections_accepted == 1
    second.close()
