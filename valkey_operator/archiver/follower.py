"""Follows a node's multi-part AOF directory and hands out what was written since the last look.

The node appends to its newest incremental file; a rewrite opens the next one (from then the
older gets no more writes), later adds the new base and deletes the files it made obsolete. The
follower keeps every incremental file it follows open, so a deleted one is still read to its
end, and drops it once a newer one exists and it was read to the end after that was seen.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import attrs

from valkey_operator.archiver.manifest import FileKind, parse_manifest
from valkey_operator.archiver.resume import Resume

SEGMENT_MAX = 8 * 1024 * 1024
"""The most bytes of one incremental file handed out as one segment."""
MANIFEST_NAME = "appendonly.aof.manifest"


@attrs.frozen
class Segment:
    """Bytes [start, start + len(data)) of incremental file seq."""

    seq: int
    start: int
    data: bytes


@attrs.frozen(eq=False)
class Base:
    """Base file seq, opened (the caller reads and closes it): the node may delete its name."""

    seq: int
    file: BinaryIO


@attrs.frozen
class Gap:
    """Incremental file seq was deleted before it was read: history breaks there and goes on
    from the first base after it."""

    seq: int


Piece = Segment | Base | Gap


class AofFollower:
    def __init__(
        self, directory: Path, manifest_name: str = MANIFEST_NAME, resume: Resume | None = None
    ) -> None:
        self.directory = directory
        self.manifest_name = manifest_name
        self._held: dict[int, tuple[BinaryIO, int]] = {}  # seq -> (file, bytes read)
        self._base: int | None = None  # the newest base handed out; None: no chain yet
        self._next_incr = 0
        self._after_gap = -1  # a new chain starts at a base newer than this
        self._resume = resume

    def close(self) -> None:
        for file, _ in self._held.values():
            file.close()
        self._held.clear()

    def poll(self) -> Iterator[Piece]:
        """Everything new since the last poll, in the order a restore replays it: a segment is read
        only when the one before was taken, so a long backlog is never held whole."""
        try:
            files = parse_manifest((self.directory / self.manifest_name).read_text())
        except FileNotFoundError:
            return  # valkey-server writes nodes.conf before it opens its AOF: nothing to follow yet
        bases = {f.seq: f.name for f in files if f.kind is FileKind.BASE}
        incrs = {f.seq: f.name for f in files if f.kind is FileKind.INCR}
        if self._resume is not None:
            yield from self._go_on(self._resume, incrs)
            self._resume = None
        for seq in sorted(bases):
            if seq > max(self._base if self._base is not None else -1, self._after_gap):
                base = self._open(bases[seq])
                if base is None:
                    continue
                yield Base(seq, base)
                if self._base is None:
                    self._next_incr = seq
                self._base = seq
        if self._base is None:
            return  # no base yet: nothing to replay increments onto
        while self._next_incr in incrs and (incr := self._open(incrs[self._next_incr])) is not None:
            self._held[self._next_incr] = (incr, 0)
            self._next_incr += 1
        newest = max(self._held, default=None)
        for seq in sorted(self._held):
            yield from self._read(seq)
            if newest is not None and seq < newest:
                self._held.pop(seq)[0].close()  # a newer file existed before this read: finished
        if any(seq > self._next_incr for seq in incrs):
            yield Gap(self._next_incr)
            self.close()
            self._after_gap, self._base = self._next_incr, None

    def _go_on(self, resume: Resume, incrs: dict[int, str]) -> list[Piece]:
        """Continue the chain the bucket holds: its newest incremental file from where it ends.
        That file gone, whatever followed the stored part of it is lost: a gap."""
        newest = resume.newest_incr
        if newest is None or not resume.bases or min(resume.bases) > newest:
            return []  # nothing to continue: a chain starts from the newest base
        incr = self._open(incrs[newest]) if newest in incrs else None
        if incr is None or incr.seek(0, 2) < resume.shipped[newest]:
            if incr is not None:
                incr.close()  # shorter than what is stored: another history under this name
            self._after_gap = newest
            return [Gap(newest)]
        incr.seek(resume.shipped[newest])
        self._held[newest] = (incr, resume.shipped[newest])
        self._base = max(resume.bases)
        self._next_incr = newest + 1
        return []

    def _read(self, seq: int) -> Iterator[Piece]:
        file, done = self._held[seq]
        file.seek(done)  # a segment the shipper could not store is read again
        while data := file.read(SEGMENT_MAX):
            yield Segment(seq, done, data)
            done += len(data)
            self._held[seq] = (file, done)

    def _open(self, name: str) -> BinaryIO | None:
        with contextlib.suppress(FileNotFoundError):
            return (self.directory / name).open("rb")
        return None
