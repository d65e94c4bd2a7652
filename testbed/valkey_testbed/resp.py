"""RESP2 for the test bed's own Valkey clients: commands out, replies in, one parser for both kinds of I/O.

The data checker (asyncio streams) and the hand-built servers (blocking
sockets) speak RESP themselves rather than through a client library, so
nothing retries or reroutes behind a test's back. The reply grammar lives in
one generator, `_reply`, that asks for a line or an exact byte count and
builds the value; `read_reply` drives it from an asyncio stream and
`read_reply_blocking` from a buffered file, so both read replies the same way.
Error replies are values (`ReplyError`), so a pipeline carries one per command.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator, Sequence
from typing import BinaryIO, TypeAlias

import attrs

Arg: TypeAlias = str | bytes | int
Reply: TypeAlias = "bytes | int | list[Reply] | ReplyError | None"

_LINE = -1
"""What `_reply` asks for when it wants the next CRLF-terminated line."""


class ProtocolError(ConnectionError):
    """The server sent something that is not RESP."""


@attrs.frozen
class ReplyError:
    """An error reply (`-ERR ...`, `-MOVED ...`): a value, so pipelines carry it per command."""

    message: str

    @property
    def kind(self) -> str:
        return self.message.split(" ", 1)[0]


def encode_command(command: Sequence[Arg]) -> bytes:
    """A command as a RESP array of bulk strings."""
    parts = [b"*%d\r\n" % len(command)]
    for arg in command:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


def _reply() -> Generator[int, bytes, Reply]:
    """One reply: yields _LINE for a line or n for exactly n bytes, is sent them, returns the value."""
    line = yield _LINE
    if not line.endswith(b"\r\n"):
        raise ConnectionError("connection closed by the server")
    kind, body = line[:1], line[1:-2]
    if kind == b"+":
        return body
    if kind == b"-":
        return ReplyError(body.decode(errors="replace"))
    if kind == b":":
        return int(body)
    if kind == b"$":
        size = int(body)
        if size < 0:
            return None
        data = yield size + 2
        if len(data) != size + 2:
            raise ConnectionError("connection closed by the server")
        return data[:-2]
    if kind == b"*":
        size = int(body)
        if size < 0:
            return None
        items: list[Reply] = []
        for _ in range(size):
            items.append((yield from _reply()))
        return items
    raise ProtocolError(f"unexpected RESP line {line[:80]!r}")


async def read_reply(reader: asyncio.StreamReader) -> Reply:
    """Read one reply from an asyncio stream."""
    parser = _reply()
    wanted = next(parser)
    while True:
        data = await (reader.readline() if wanted == _LINE else reader.readexactly(wanted))
        try:
            wanted = parser.send(data)
        except StopIteration as done:
            value: Reply = done.value
            return value


def read_reply_blocking(stream: BinaryIO) -> Reply:
    """Read one reply from a buffered binary file (a socket's makefile("rb"))."""
    parser = _reply()
    wanted = next(parser)
    while True:
        data = stream.readline() if wanted == _LINE else stream.read(wanted)
        try:
            wanted = parser.send(data)
        except StopIteration as done:
            value: Reply = done.value
            return value
