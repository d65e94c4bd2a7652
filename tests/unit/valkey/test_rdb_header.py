"""Reading an RDB's head while its bytes stream past: the key count, whatever the chunk edges."""

from __future__ import annotations

import pytest

from valkey_operator.valkey.rdb_header import HeaderScanner, NotAnRdb, RdbHeader, parse_magic


def length(value: int) -> bytes:
    """Valkey's length encoding, picking the shortest form as rdbSaveLen does."""
    if value < 1 << 6:
        return bytes([value])
    if value < 1 << 14:
        return bytes([0x40 | value >> 8, value & 0xFF])
    if value < 1 << 32:
        return b"\x80" + value.to_bytes(4, "big")
    return b"\x81" + value.to_bytes(8, "big")


def string(data: bytes) -> bytes:
    return length(len(data)) + data


def aux(key: bytes, value: bytes) -> bytes:
    return b"\xfa" + string(key) + value


HEAD = (
    b"VALKEY080"
    + aux(b"valkey-ver", string(b"9.1.2"))
    + aux(b"redis-bits", b"\xc0\x40")  # int8
    + aux(b"ctime", b"\xc2\x1f\x0e\x11\x6b")  # int32
    + aux(b"aof-base", b"\xc1\x00\x01")  # int16
    + aux(b"lzf", b"\xc3" + length(5) + length(300) + b"12345")  # LZF: compressed, plain length
    + aux(b"long", string(b"x" * 20_000))  # a 14-bit length
    + aux(b"longer", string(b"y" * 70_000))  # a 32-bit length
    + b"\xf5"
    + string(b"#!lua name=lib\nserver.register_function('f', function() return 1 end)")
)


def scan(data: bytes, chunk: int) -> HeaderScanner:
    scanner = HeaderScanner()
    for start in range(0, len(data), chunk):
        scanner.feed(data[start : start + chunk])
    return scanner


@pytest.mark.parametrize("chunk", [1, 2, 7, 40, 4096, 1 << 20])
def test_db0_sizes_are_read_across_any_chunk_edges(chunk: int) -> None:
    rdb = (
        HEAD + b"\xfe\x00" + b"\xfb" + length(123_456) + length(789) + b"\x00\x01k\x01v" + b"\xff" + bytes(8)
    )
    scanner = scan(rdb, chunk)
    assert scanner.header == RdbHeader("VALKEY080", 123_456, 789) and scanner.error is None


def test_a_large_count_uses_the_64_bit_length() -> None:
    rdb = b"REDIS0011\xfe\x00\xfb" + length(1 << 40) + length(0) + b"\xff"
    assert scan(rdb, 3).header == RdbHeader("REDIS0011", 1 << 40, 0)


def test_an_empty_snapshot_has_no_keys() -> None:
    assert scan(HEAD + b"\xff" + bytes(8), 5).header == RdbHeader("VALKEY080", 0, 0)


@pytest.mark.parametrize(
    "body",
    [
        b"\xfe\x03\xfb\x05\x00",  # the first database is not db 0: the total is unknown
        b"\xf7" + length(1) + length(2),  # a module's AUX data the reader does not parse
        b"\xfe\x00\x00\x01k\x01v",  # a key before any RESIZEDB
    ],
    ids=["db3-first", "module-aux", "no-resizedb"],
)
def test_a_head_that_does_not_say_gives_no_count(body: bytes) -> None:
    scanner = scan(HEAD + body + b"\xff", 1)
    assert scanner.header == RdbHeader("VALKEY080", None, None)


def test_a_malformed_length_is_an_error_not_a_guess() -> None:
    scanner = scan(b"VALKEY080\xfa\x82", 1)
    assert scanner.header is None and scanner.error is not None and "length" in scanner.error


def test_an_empty_string_at_a_chunk_edge_does_not_stall() -> None:
    rdb = b"VALKEY080\xfa\x00\x00\xfe\x00\xfb\x02\x01"
    scanner = HeaderScanner()
    scanner.feed(rdb[:11])  # ends right after the empty key: an empty value is still to come
    scanner.feed(rdb[11:])
    assert scanner.header == RdbHeader("VALKEY080", 2, 1)


@pytest.mark.parametrize("magic", [b"REDIS001", b"ELASTIC01", b"VALKEYxyz", b"\n\n\n\n\n\n\n\n\n"])
def test_anything_but_an_rdb_magic_is_refused(magic: bytes) -> None:
    with pytest.raises(NotAnRdb):
        parse_magic(magic)
