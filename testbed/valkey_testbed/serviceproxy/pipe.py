"""A byte pipe between two TCP connections, and the reset that ends one abruptly.

Either side's end (EOF, error) closes both: there is no half-close, which no protocol the bed
carries (RESP, HTTP/1.1 keep-alive) needs. A reset sends RST (SO_LINGER 0), as a peer that
vanished would: the client sees ECONNRESET, not an orderly close it might mistake for success.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct

BUFFER = 64 * 1024
LINGER_ZERO = struct.pack("ii", 1, 0)


async def _copy(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    while data := await source.read(BUFFER):
        sink.write(data)
        await sink.drain()


async def splice(
    a: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    b: tuple[asyncio.StreamReader, asyncio.StreamWriter],
) -> None:
    """Copy a to b and b to a until either ends; then close both."""
    tasks = [asyncio.create_task(_copy(a[0], b[1])), asyncio.create_task(_copy(b[0], a[1]))]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for writer in (a[1], b[1]):
            writer.close()


def reset(writer: asyncio.StreamWriter) -> None:
    """Drop the connection with an RST, discarding anything unsent."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_ZERO)
    writer.transport.abort()
