"""Watch frames: LineSplitter (the watch's path) and iter_lines give the same frames from any chunking."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from valkey_operator.core.reflector import LineSplitter, iter_lines

STREAM = b'{"a":1}\n\n  \n{"b":' + b"x" * 200_000 + b'}\n{"c":3}\n{"tail":4}'
FRAMES = [b'{"a":1}', b'{"b":' + b"x" * 200_000 + b"}", b'{"c":3}', b'{"tail":4}']


def chunked(data: bytes, size: int) -> list[bytes]:
    return [data[start : start + size] for start in range(0, len(data), size)]


def split(chunks: list[bytes]) -> list[bytes]:
    splitter = LineSplitter()
    frames = [frame for chunk in chunks for frame in splitter.feed(chunk)]
    tail = splitter.close()
    return frames + ([tail] if tail is not None else [])


@pytest.mark.parametrize("size", [1, 2, 7, 64, 4096, 65_536, len(STREAM)])
def test_frames_do_not_depend_on_chunk_boundaries(size: int) -> None:
    assert split(chunked(STREAM, size)) == FRAMES


def test_blank_frames_and_a_blank_tail_are_dropped() -> None:
    assert split([b"\n\n", b" \n", b'{"a":1}\n', b"  "]) == [b'{"a":1}']
    assert split([b""]) == []


def test_a_frame_is_held_until_its_newline_arrives() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b'{"a":') == []
    assert splitter.feed(b"1") == []
    assert splitter.feed(b'}\n{"b"') == [b'{"a":1}']
    assert splitter.close() == b'{"b"'
    assert splitter.close() is None


def test_iter_lines_yields_the_same_frames() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for chunk in chunked(STREAM, 5):
            yield chunk

    async def collect() -> list[bytes]:
        return [line async for line in iter_lines(chunks())]

    assert asyncio.run(collect()) == FRAMES
