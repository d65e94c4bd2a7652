"""Secret material as a file path without a writable filesystem.

OpenSSL and botocore read certificates and keys from paths only, while an operator pod runs on a
read-only root with no writable /tmp. On Linux the bytes go to an anonymous in-memory file
(memfd_create), named by its /proc/self/fd path while it is open, never on a disk; elsewhere (a
developer's machine) they go to a 0600 file in a private temporary directory, removed on exit.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def memory_file(name: str, data: bytes) -> Iterator[str]:
    """A path whose content is data, valid inside the block."""
    if not hasattr(os, "memfd_create"):
        with tempfile.TemporaryDirectory(prefix="valkey-operator-") as directory:
            path = Path(directory) / name
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(data)
            yield str(path)
        return
    descriptor = os.memfd_create(name, os.MFD_CLOEXEC)
    try:
        with open(descriptor, "wb", closefd=False) as handle:
            handle.write(data)
        yield f"/proc/self/fd/{descriptor}"
    finally:
        os.close(descriptor)
