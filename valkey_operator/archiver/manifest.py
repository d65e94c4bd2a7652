"""The multi-part AOF manifest: which base and incremental files make a node's history."""

from __future__ import annotations

import enum

import attrs

MANIFEST_SUFFIX = ".manifest"


class FileKind(enum.StrEnum):
    BASE = "b"
    """A snapshot (RDB preamble or AOF) taken when a rewrite began."""
    INCR = "i"
    """The writes since that snapshot, appended as they run."""
    HISTORY = "h"
    """A file a finished rewrite made obsolete; the node deletes it soon."""


@attrs.frozen
class AofFile:
    name: str
    seq: int
    kind: FileKind


class ManifestError(ValueError):
    pass


def parse_manifest(text: str) -> tuple[AofFile, ...]:
    """The files a manifest lists, in its order (`file <name> seq <n> type <b|i|h>` per line)."""
    files = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        words = line.split()
        fields = dict(zip(words[::2], words[1::2], strict=False))
        try:
            files.append(AofFile(fields["file"], int(fields["seq"]), FileKind(fields["type"])))
        except (KeyError, ValueError) as exc:
            raise ManifestError(f"manifest line {number}: {line!r}: {exc}") from None
    return tuple(files)


def render_manifest(files: tuple[AofFile, ...]) -> str:
    return "".join(f"file {f.name} seq {f.seq} type {f.kind}\n" for f in files)


def current(files: tuple[AofFile, ...]) -> tuple[AofFile | None, AofFile | None]:
    """The base and the incremental file the node writes to now (the incr with the highest seq)."""
    bases = [f for f in files if f.kind is FileKind.BASE]
    incrs = [f for f in files if f.kind is FileKind.INCR]
    return (
        max(bases, key=lambda f: f.seq, default=None),
        max(incrs, key=lambda f: f.seq, default=None),
    )
