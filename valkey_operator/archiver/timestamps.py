"""The `#TS:<unix seconds>` annotations of an AOF fed in chunks (aof-timestamp-enabled).

The stream is walked command by command, so a value whose bytes read `#TS:` is never taken
for an annotation: at a command boundary a line starting with `#` is an annotation, one
starting with `*` is a command of that many bulk strings, each `$<length>` and its bytes.
"""

from __future__ import annotations

ANNOTATION = b"#TS:"


class AofFormatError(ValueError):
    pass


class TimestampScanner:
    """Feed an incremental AOF's bytes in order; `last` is the newest annotation so far. With
    `after`, `cut_at` is the offset of the first annotation later than that second (where
    `valkey-check-aof --truncate-to-timestamp` truncates the file)."""

    def __init__(self, after: int | None = None) -> None:
        self.last: int | None = None
        self.after = after
        self.cut_at: int | None = None
        self._pending = b""
        self._start = 0  # the file offset of _pending's first byte
        self._bulks_left = 0
        self._bulk_bytes = -1  # >= 0: the next bulk string's bytes (and CRLF) are due

    def feed(self, chunk: bytes) -> None:
        data = self._pending + chunk
        at = 0
        while True:
            if self._bulk_bytes >= 0:
                end = at + self._bulk_bytes + 2
                if end > len(data):
                    break
                at, self._bulk_bytes = end, -1
                self._bulks_left -= 1
                continue
            newline = data.find(b"\r\n", at)
            if newline < 0:
                break
            line, begins, at = data[at:newline], at, newline + 2
            if self._bulks_left:
                if not line.startswith(b"$"):
                    raise AofFormatError(f"expected a bulk string, read {line[:20]!r}")
                self._bulk_bytes = int(line[1:])
            elif line.startswith(b"*"):
                self._bulks_left = int(line[1:])
            elif line.startswith(ANNOTATION):
                self.last = int(line[len(ANNOTATION) :])
                if self.after is not None and self.cut_at is None and self.last > self.after:
                    self.cut_at = self._start + begins
            elif not line.startswith(b"#"):
                raise AofFormatError(f"expected a command or an annotation, read {line[:20]!r}")
        self._start += at
        self._pending = data[at:]
