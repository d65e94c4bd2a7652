"""The head of an RDB file, read incrementally while the bytes stream past (pure).

A backup records how many keys each shard's snapshot holds, so a restore can
check that every key was loaded. The RDB says so itself near its start: after
the magic ("REDIS0011", "VALKEY080") come AUX fields (0xFA key value), maybe
function libraries (0xF5), then each database as SELECTDB (0xFE n) and
RESIZEDB (0xFB keys expires): the sizes of that database's key and expiry
tables when the snapshot was taken. Valkey writes a database only when it
holds keys, and its per-slot "slot-info" AUX fields come between the keys,
so only the head is read here; every byte after it passes untouched.

The reader is a generator asking for a byte count (read) or a `_Skip` (bytes
it does not need, never copied); `HeaderScanner.feed` drives it from chunks
of any size. Lengths and strings use Valkey's encoding (rdb.h): the top two
bits of the first byte say 6-bit, 14-bit, 32/64-bit big-endian, or an
encoded string (int8/16/32, or LZF with compressed and plain lengths).
"""

from __future__ import annotations

import re
from collections.abc import Generator

import attrs

MAGIC_SIZE = 9
_MAGIC = re.compile(rb"(REDIS|VALKEY)[0-9]+")

OPCODE_FUNCTION2 = 0xF5
OPCODE_AUX = 0xFA
OPCODE_RESIZEDB = 0xFB
OPCODE_SELECTDB = 0xFE
OPCODE_EOF = 0xFF

_ENC_INT8, _ENC_INT16, _ENC_INT32, _ENC_LZF = 0, 1, 2, 3


class NotAnRdb(ValueError):
    """The bytes do not start with an RDB magic."""


def parse_magic(magic: bytes) -> str:
    """The RDB magic as text ("VALKEY080"); NotAnRdb for anything else."""
    if len(magic) != MAGIC_SIZE or not _MAGIC.fullmatch(magic):
        raise NotAnRdb(f"not an RDB: starts with {magic[:MAGIC_SIZE]!r}")
    return magic.decode("ascii")


@attrs.frozen
class RdbHeader:
    """What the head of an RDB told: its magic and db 0's table sizes (None: not found)."""

    version: str
    keys: int | None
    """Keys in db 0 (0 for an RDB without any database); None when the head does not say: the
    first database is not db 0, or something the reader does not know (a module's AUX data)
    comes before it."""
    expires: int | None
    """Keys of db 0 with a TTL, None as for keys."""


@attrs.frozen
class _Skip:
    size: int


_Request = int | _Skip
_Reader = Generator[_Request, bytes, int]


def _length() -> _Reader:
    """A length (rdbLoadLen); an encoded-string marker comes back as -1 - its encoding."""
    (first,) = yield 1
    kind = first >> 6
    if kind == 0:
        return first & 0x3F
    if kind == 1:
        (second,) = yield 1
        return ((first & 0x3F) << 8) | second
    if kind == 3:
        return -1 - (first & 0x3F)
    if first == 0x80:
        return int.from_bytes((yield 4), "big")
    if first == 0x81:
        return int.from_bytes((yield 8), "big")
    raise ValueError(f"bad RDB length byte {first:#x}")


def _skip_string() -> _Reader:
    """Pass over one string (plain, integer-encoded or LZF); returns 0."""
    size = yield from _length()
    if size >= 0:
        yield _Skip(size)
        return 0
    encoding = -1 - size
    if encoding == _ENC_LZF:
        compressed = yield from _length()
        yield from _length()  # the uncompressed length
        yield _Skip(compressed)
    elif encoding in (_ENC_INT8, _ENC_INT16, _ENC_INT32):
        yield _Skip({_ENC_INT8: 1, _ENC_INT16: 2, _ENC_INT32: 4}[encoding])
    else:
        raise ValueError(f"unknown RDB string encoding {encoding}")
    return 0


def _header() -> Generator[_Request, bytes, RdbHeader]:
    version = parse_magic((yield MAGIC_SIZE))
    database = None
    while True:
        (opcode,) = yield 1
        if opcode == OPCODE_AUX:
            yield from _skip_string()
            yield from _skip_string()
        elif opcode == OPCODE_FUNCTION2:
            yield from _skip_string()
        elif opcode == OPCODE_SELECTDB:
            database = yield from _length()
        elif opcode == OPCODE_RESIZEDB and database is not None:
            keys = yield from _length()
            expires = yield from _length()
            return RdbHeader(version, keys, expires) if database == 0 else RdbHeader(version, None, None)
        elif opcode == OPCODE_EOF and database is None:
            return RdbHeader(version, 0, 0)
        else:  # a key before RESIZEDB, a module's AUX data, an opcode of a later format
            return RdbHeader(version, None, None)


class HeaderScanner:
    """Feed it the RDB's bytes in order, in chunks of any size; `header` is set once the head is read."""

    def __init__(self) -> None:
        self._reader = _header()
        self._wanted: _Request = next(self._reader)
        self._pending = bytearray()
        self.header: RdbHeader | None = None
        self.error: str | None = None
        """Why the head could not be read (a malformed length or string), if so."""

    @property
    def done(self) -> bool:
        return self.header is not None or self.error is not None

    def feed(self, data: bytes) -> None:
        """Take the next bytes; only the few the head needs are copied."""
        view = memoryview(data)
        while not self.done and view:
            wanted = self._wanted
            if isinstance(wanted, _Skip):
                taken = min(wanted.size, len(view))
                view = view[taken:]
                if taken < wanted.size:
                    self._wanted = _Skip(wanted.size - taken)
                else:
                    self._send(b"")
                continue
            taken = min(wanted - len(self._pending), len(view))
            self._pending += view[:taken]
            view = view[taken:]
            if len(self._pending) == wanted:
                value = bytes(self._pending)
                self._pending.clear()
                self._send(value)

    def _send(self, value: bytes) -> None:
        try:
            self._wanted = self._reader.send(value)
            while self._wanted in (0, _Skip(0)):  # an empty string: nothing to wait for
                self._wanted = self._reader.send(b"")
        except StopIteration as stop:
            self.header = stop.value
        except ValueError as exc:
            self.error = str(exc)
