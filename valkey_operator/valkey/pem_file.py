"""A PEM kept only in memory, readable by path.

ssl's `load_cert_chain` (and valkey-py's SSLConnection, which calls it) takes file names, while the
operator runs on a read-only root filesystem and must not write a private key to any disk. An
anonymous memory file (memfd) gives a path, /proc/self/fd/N, with no directory entry anywhere; it
lives as long as this process keeps it open. One file per distinct PEM, the oldest closed beyond
MAX_OPEN (a cluster's identity changes only when its TLS Secret does).
"""

from __future__ import annotations

import hashlib
import os

MAX_OPEN = 256
_open: dict[str, int] = {}
"""SHA-256 of a PEM -> the memfd holding it (insertion order: the oldest first)."""


def pem_path(pem: str) -> str:
    """A path that reads as `pem` (the same path for the same text)."""
    key = hashlib.sha256(pem.encode()).hexdigest()
    fd = _open.get(key)
    if fd is None:
        while len(_open) >= MAX_OPEN:
            os.close(_open.pop(next(iter(_open))))
        fd = os.memfd_create("valkey-operator-pem", os.MFD_CLOEXEC)
        os.write(fd, pem.encode())
        _open[key] = fd
    return f"/proc/self/fd/{fd}"
