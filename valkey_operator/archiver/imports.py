"""Slot imports a history cut in the middle of: what a restore to a second must drop.

Atomic slot migration writes the keys it moves into the target's AOF between `CLUSTER SYNCSLOTS
ESTABLISH ... NAME <job> SLOTSRANGE <from> <to> ...` and `CLUSTER SYNCSLOTS FINISH ... NAME <job>`.
A history cut between the two holds part of slots the source still owned at that second, and
still held whole (its own history keeps them until the job finished); a server loading it takes
those slots as its own (checked on Valkey 9.1.2), and the restored cluster would have two owners
with different data. So the restore appends `CLUSTER FLUSHSLOT <slot>` for every slot of a job
the cut left unfinished: the server drops the partial import as it loads, and the source's copy
is the one restored.

The stream is walked command by command (as timestamps.py does), so a value that reads
`SYNCSLOTS` is never taken for one; a file without those bytes is not walked at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from valkey_operator.archiver.timestamps import AofFormatError

MARKER = b"SYNCSLOTS"
PREFIX = (b"CLUSTER", MARKER)
READ = 1024 * 1024


def unfinished_imports(files: Iterable[Path]) -> list[tuple[int, int]]:
    """The slot ranges of the imports ESTABLISHed and not FINISHed in files (read in order)."""
    open_jobs: dict[bytes, list[tuple[int, int]]] = {}
    for path in files:
        if not _mentions(path):
            continue
        try:
            for argv in _syncslots_commands(path):
                name = _options(argv[3:]).get(b"NAME", b"")
                if argv[2] == b"ESTABLISH":
                    open_jobs[name] = _ranges(argv)
                elif argv[2] == b"FINISH":
                    open_jobs.pop(name, None)
        except _Truncated:
            pass  # a command cut short by a crash ends the file: Valkey drops it as it loads
    return sorted(slot_range for ranges in open_jobs.values() for slot_range in ranges)


def flush_commands(ranges: Iterable[tuple[int, int]]) -> bytes:
    """`CLUSTER FLUSHSLOT <slot>` for every slot of ranges, as AOF commands."""
    return b"".join(
        _command(b"CLUSTER", b"FLUSHSLOT", str(slot).encode())
        for start, end in ranges
        for slot in range(start, end + 1)
    )


def _command(*argv: bytes) -> bytes:
    return b"*%d\r\n" % len(argv) + b"".join(b"$%d\r\n%s\r\n" % (len(arg), arg) for arg in argv)


def _mentions(path: Path) -> bool:
    tail = b""
    with path.open("rb") as file:
        while chunk := file.read(READ):
            window = tail + chunk
            if MARKER in window:
                return True
            tail = window[1 - len(MARKER) :]
    return False


def _options(words: list[bytes]) -> dict[bytes, bytes]:
    """KEY value pairs of a SYNCSLOTS command, SLOTSRANGE's numbers skipped."""
    found: dict[bytes, bytes] = {}
    index = 0
    while index < len(words):
        word = words[index].upper()
        if word == b"SLOTSRANGE":
            index += 1
            while index < len(words) and words[index].isdigit():
                index += 1
            continue
        if index + 1 < len(words):
            found[word] = words[index + 1]
        index += 2
    return found


def _ranges(argv: list[bytes]) -> list[tuple[int, int]]:
    upper = [word.upper() for word in argv]
    if b"SLOTSRANGE" not in upper:
        return []
    numbers: list[int] = []
    for word in argv[upper.index(b"SLOTSRANGE") + 1 :]:
        if not word.isdigit():
            break
        numbers.append(int(word))
    return list(zip(numbers[::2], numbers[1::2], strict=False))


def _syncslots_commands(path: Path) -> Iterator[list[bytes]]:
    """Every `CLUSTER SYNCSLOTS ...` command of an AOF (its argv, the subcommand upper-cased)."""
    data = path.read_bytes() if path.stat().st_size <= 64 * READ else None
    reader = _Reader(path, data)
    while (count := reader.header()) is not None:
        argv: list[bytes] = []
        for index in range(count):
            length = reader.bulk_length()
            wanted = index < 2 or argv[:2] == list(PREFIX)
            argv.append(reader.take(length) if wanted else reader.skip(length))
        if argv[:2] == list(PREFIX) and len(argv) > 2:
            yield [*argv[:2], argv[2].upper(), *argv[3:]]


class _Truncated(AofFormatError):
    pass


class _Reader:
    """The AOF's lines and bulk strings, from memory or read in chunks."""

    def __init__(self, path: Path, data: bytes | None) -> None:
        self._file = None if data is not None else path.open("rb")
        self._data = data if data is not None else b""
        self._at = 0

    def _fill(self, need: int) -> bool:
        while len(self._data) - self._at < need:
            if self._file is None:
                return False
            chunk = self._file.read(READ)
            if not chunk:
                self._file.close()
                self._file = None
                return False
            self._data = self._data[self._at :] + chunk
            self._at = 0
        return True

    def _line(self) -> bytes | None:
        while (end := self._data.find(b"\r\n", self._at)) < 0:
            if not self._fill(len(self._data) - self._at + READ):
                return None
        line, self._at = self._data[self._at : end], end + 2
        return line

    def header(self) -> int | None:
        """The next command's argument count (annotations skipped); None at the end."""
        while (line := self._line()) is not None:
            if line.startswith(b"*"):
                return int(line[1:])
            if not line.startswith(b"#"):
                raise AofFormatError(f"expected a command or an annotation, read {line[:20]!r}")
        return None

    def bulk_length(self) -> int:
        line = self._line()
        if line is None:
            raise _Truncated("the file ends inside a command")
        if not line.startswith(b"$"):
            raise AofFormatError(f"expected a bulk string, read {line[:20]!r}")
        return int(line[1:])

    def take(self, length: int) -> bytes:
        if not self._fill(length + 2):
            raise _Truncated("the file ends inside a bulk string")
        value = self._data[self._at : self._at + length]
        self._at += length + 2
        return value

    def skip(self, length: int) -> bytes:
        self.take(length)
        return b""
