"""The test bed's one RESP reader, driven from an asyncio stream and from a blocking file alike."""

from __future__ import annotations

import asyncio
import io

import pytest

from valkey_testbed.resp import (
    ProtocolError,
    ReplyError,
    encode_command,
    read_reply,
    read_reply_blocking,
)

REPLIES = (
    b"+OK\r\n-MOVED 3999 127.0.0.3:6379\r\n:42\r\n$5\r\nhello\r\n$-1\r\n*-1\r\n$0\r\n\r\n"
    b"*3\r\n:1\r\n*2\r\n$1\r\na\r\n-ERR nested\r\n$4\r\nb\r\nc\r\n"
)
EXPECTED = [
    b"OK",
    ReplyError("MOVED 3999 127.0.0.3:6379"),
    42,
    b"hello",
    None,
    None,
    b"",
    [1, [b"a", ReplyError("ERR nested")], b"b\r\nc"],
]


def test_the_blocking_reader_reads_every_kind_of_reply() -> None:
    stream = io.BytesIO(REPLIES)
    assert [read_reply_blocking(stream) for _ in EXPECTED] == EXPECTED
    assert ReplyError("MOVED 3999 127.0.0.3:6379").kind == "MOVED"


async def test_the_async_reader_reads_the_same_replies() -> None:
    reader = asyncio.StreamReader()
    reader.feed_data(REPLIES)
    reader.feed_eof()
    assert [await read_reply(reader) for _ in EXPECTED] == EXPECTED


def test_a_closed_connection_and_garbage_are_errors() -> None:
    with pytest.raises(ConnectionError, match="closed"):
        read_reply_blocking(io.BytesIO(b"$5\r\nhel"))
    with pytest.raises(ConnectionError, match="closed"):
        read_reply_blocking(io.BytesIO(b""))
    with pytest.raises(ProtocolError):
        read_reply_blocking(io.BytesIO(b"?what\r\n"))


def test_commands_are_arrays_of_bulk_strings() -> None:
    assert encode_command(["SET", b"k", 7]) == b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\n7\r\n"
