"""The archiver's pure parts: the AOF manifest, its timestamp annotations, the bucket's names."""

from __future__ import annotations

from pathlib import Path

import pytest

from valkey_operator.archiver import layout
from valkey_operator.archiver.command import node_id
from valkey_operator.archiver.cut import truncate_after
from valkey_operator.archiver.follower import AofFollower
from valkey_operator.archiver.manifest import (
    AofFile,
    FileKind,
    ManifestError,
    current,
    parse_manifest,
    render_manifest,
)
from valkey_operator.archiver.replay import replay_chain
from valkey_operator.archiver.resume import Resume, resume_from
from valkey_operator.archiver.timestamps import AofFormatError, TimestampScanner

# A manifest as valkey-server 9.1.2 wrote it during a rewrite (both incremental files listed).
DURING_REWRITE = (
    "file appendonly.aof.1.base.rdb seq 1 type b\n"
    "file appendonly.aof.1.incr.aof seq 1 type i\n"
    "file appendonly.aof.2.incr.aof seq 2 type i\n"
)


def test_a_manifest_is_read_and_written_back_unchanged() -> None:
    files = parse_manifest(DURING_REWRITE)
    assert files[0] == AofFile("appendonly.aof.1.base.rdb", 1, FileKind.BASE)
    assert render_manifest(files) == DURING_REWRITE
    base, incr = current(files)
    assert base is not None and base.seq == 1
    assert incr is not None and incr.seq == 2, "the node writes to the newest incremental file"


def test_a_damaged_manifest_line_is_named() -> None:
    with pytest.raises(ManifestError, match=r"manifest line 2: 'file x seq two type i'"):
        parse_manifest("file a seq 1 type b\nfile x seq two type i\n")


# valkey-server 9.1.2's incremental file with aof-timestamp-enabled (captured by hand).
INCR = (
    b"#TS:1796524157\r\n*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$2\r\nk0\r\n$1\r\n0\r\n"
    b"#TS:1796524158\r\n*3\r\n$3\r\nSET\r\n$2\r\nk2\r\n$1\r\n2\r\n"
)


@pytest.mark.parametrize("size", [1, 2, 3, 7, 16, len(INCR)])
def test_annotations_are_found_however_the_stream_is_cut(size: int) -> None:
    scanner = TimestampScanner()
    seen = []
    for start in range(0, len(INCR), size):
        scanner.feed(INCR[start : start + size])
        seen.append(scanner.last)
    assert scanner.last == 1796524158
    assert 1796524157 in seen or size >= len(INCR)


def test_a_value_that_reads_like_an_annotation_is_a_value() -> None:
    value = b"\r\n#TS:9999999999\r\n"
    scanner = TimestampScanner()
    scanner.feed(b"#TS:100\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n%s\r\n" % (len(value), value))
    assert scanner.last == 100


def test_bytes_that_are_no_aof_are_refused() -> None:
    with pytest.raises(AofFormatError, match="expected a command or an annotation"):
        TimestampScanner().feed(b"hello\r\n")


def test_object_names_sort_in_replay_order_and_read_back() -> None:
    names = ["/".join(layout.segment_name(seq, start)) for seq, start in [(2, 0), (1, 900), (1, 10_000)]]
    names.append("/".join(layout.base_name(1)))
    assert [layout.parse_name(name) for name in sorted(names)] == [
        layout.Archived(1, None),
        layout.Archived(1, 900),
        layout.Archived(1, 10_000),
        layout.Archived(2, 0),
    ]
    assert layout.parse_name("0000000001/incr/notanumber") is None


def test_a_restarted_archiver_goes_on_where_each_file_is_stored_without_a_hole() -> None:
    node = "p/ns/c/archive/n"

    def key(*parts: str) -> str:
        return "/".join((node, *parts))

    listing = [
        (key(*layout.base_name(1)), 89),
        (key(*layout.segment_name(1, 0)), 100),
        (key(*layout.segment_name(1, 100)), 50),
        (key(*layout.segment_name(1, 120)), 10),  # begins inside the one before: stale
        (key(*layout.segment_name(2, 0)), 30),
        (key(*layout.segment_name(2, 40)), 5),  # after a hole: shipped again
        ("p/ns/c/archive/n/progress.json", 2),
        ("p/ns/c/archive/other/0000000001/base", 1),
    ]
    resume = resume_from(listing, node)
    assert resume == Resume(frozenset({1}), {1: 150, 2: 30})
    assert resume.newest_incr == 2
    assert resume_from([], node).newest_incr is None


def test_the_node_is_named_by_the_myself_line_of_nodes_conf(tmp_path: Path) -> None:
    conf = tmp_path / "nodes.conf"
    assert node_id(conf) is None, "not written yet: the archiver waits"
    conf.write_text(
        "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:7001@17001 master - 0 0 1 connected 0-8191\n"
        "07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:7000@17000 myself,master - 0 0 2 connected\n"
        "vars currentEpoch 2 lastVoteEpoch 0\n"
    )
    assert node_id(conf) == "07c37dfeb235213a872192d90877d0cd55635b91"


def test_a_replay_starts_at_the_oldest_base_after_the_newest_gap() -> None:
    node = "p/ns/c/archive/n"

    def key(*parts: str) -> str:
        return "/".join((node, *parts))

    listing = [
        (key(*layout.segment_name(2, 100)), 5),
        (key(*layout.segment_name(2, 0)), 100),
        (key(*layout.base_name(1)), 89),
        (key(*layout.base_name(2)), 90),
        (key(*layout.base_name(4)), 95),
        (key(*layout.segment_name(1, 0)), 10),
        (key(*layout.segment_name(4, 0)), 7),
    ]
    chain = replay_chain(listing, node)
    assert chain is not None and (chain.base_seq, chain.base_key) == (1, key("0000000001", "base"))
    assert chain.incrs == (
        (1, (key(*layout.segment_name(1, 0)),)),
        (2, (key(*layout.segment_name(2, 0)), key(*layout.segment_name(2, 100)))),
        (3, ()),  # never written to
        (4, (key(*layout.segment_name(4, 0)),)),
    )
    after_gap = replay_chain(listing, node, gaps=[2])
    assert after_gap is not None and after_gap.base_seq == 4 and [seq for seq, _ in after_gap.incrs] == [4]
    assert replay_chain(listing, node, gaps=[4]) is None


def test_a_directory_without_its_manifest_yet_hands_out_nothing(tmp_path: Path) -> None:
    """valkey-server writes nodes.conf (what the archiver waits for) before it opens its AOF."""
    follower = AofFollower(tmp_path / "appendonlydir")
    assert list(follower.poll()) == []
    (tmp_path / "appendonlydir").mkdir()
    assert list(follower.poll()) == []


@pytest.mark.parametrize("size", [1, 3, 7, len(INCR)])
def test_the_cut_is_where_the_first_later_annotation_begins_however_the_stream_is_cut(size: int) -> None:
    second = INCR.index(b"#TS:1796524158")
    for after, expected in ((1796524156, 0), (1796524157, second), (1796524158, None)):
        scanner = TimestampScanner(after=after)
        for start in range(0, len(INCR), size):
            scanner.feed(INCR[start : start + size])
        assert scanner.cut_at == expected, (after, size)


def test_truncating_keeps_every_command_of_the_seconds_up_to_the_cut(tmp_path: Path) -> None:
    path = tmp_path / "appendonly.aof.1.incr.aof"
    path.write_bytes(INCR)
    assert truncate_after(path, 1796524158) is None and path.read_bytes() == INCR
    assert truncate_after(path, 1796524157) == INCR.index(b"#TS:1796524158")
    assert path.read_bytes().endswith(b"SET\r\n$2\r\nk0\r\n$1\r\n0\r\n")
