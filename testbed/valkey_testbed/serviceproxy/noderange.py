"""A slice of the nodePort range per test bed, so two beds on one machine never share a nodePort.

Every bed's nodes have the same addresses (127.0.100.N), and each bed's kube-apiserver hands out
nodePorts on its own: with the default range for all, two beds would sooner or later give the
same port to two Services, and the second bed's proxy could not listen. So a bed with nodes
claims one of SLICES equal slices of 30000-32767 for its `--service-node-port-range`, in a
machine-wide claims directory under /dev/shm (gone at reboot, as the beds are). A claim names
its bed's state directory and the process that keeps it valid: the claiming process until the
API server runs, then the API server. A claim whose process is gone is free again, so a bed
killed without `down` does not hold its slice for ever. With every slice claimed, a bed gets the
whole range and the proxy's retry (and its Event on the Service) covers a collision.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
from collections.abc import Iterator
from pathlib import Path

import attrs
import structlog

from valkey_testbed import processes

log = structlog.get_logger(__name__)

CLAIMS_DIR = Path("/dev/shm/valkey-operator-node-ports")
FIRST, LAST = 30000, 32767
SLICES = 16
SIZE = (LAST - FIRST + 1) // SLICES
"""173 ports a bed."""
WHOLE = f"{FIRST}-{LAST}"


def slice_range(index: int) -> str:
    start = FIRST + index * SIZE
    return f"{start}-{start + SIZE - 1}"


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    if not directory.is_dir():
        directory.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            directory.chmod(0o1777)  # beds of every user on the machine share the node addresses
    with (directory / ".lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _read(path: Path) -> dict[str, object] | None:
    try:
        claim: dict[str, object] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return claim


def _valid(claim: dict[str, object] | None) -> bool:
    owner = claim.get("owner") if claim is not None else None
    if not isinstance(owner, dict):
        return False
    try:
        return processes.ProcessRecord(**owner).alive()
    except TypeError:
        return False


def _write(path: Path, state_dir: Path, owner: processes.ProcessRecord) -> None:
    body = {"stateDir": str(state_dir), "range": slice_range(int(path.stem)), "owner": attrs.asdict(owner)}
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps(body))
    temporary.replace(path)


def _slot(path: Path) -> bool:
    return path.suffix == ".json" and path.stem.isdigit()


def claim(state_dir: Path, directory: Path = CLAIMS_DIR) -> str:
    """This bed's slice ("30173-30345"), claimed for it now (or already), else the whole range."""
    state_dir = state_dir.resolve()
    this = processes.this_process("testbed")
    with _locked(directory):
        for path in filter(_slot, directory.iterdir()):
            existing = _read(path)
            if existing is not None and existing.get("stateDir") == str(state_dir):
                _write(path, state_dir, this)
                return slice_range(int(path.stem))
        start = random.randrange(SLICES)
        for offset in range(SLICES):
            index = (start + offset) % SLICES
            path = directory / f"{index}.json"
            if not _valid(_read(path)):
                _write(path, state_dir, this)
                return slice_range(index)
    log.warning("node_port_slices_all_claimed", slices=SLICES, range=WHOLE)
    return WHOLE


def hold(state_dir: Path, owner: processes.ProcessRecord, directory: Path = CLAIMS_DIR) -> None:
    """From now on the claim lives as long as owner (the bed's API server)."""
    state_dir = state_dir.resolve()
    with _locked(directory):
        for path in filter(_slot, directory.iterdir()):
            existing = _read(path)
            if existing is not None and existing.get("stateDir") == str(state_dir):
                _write(path, state_dir, owner)


def release(state_dir: Path, directory: Path = CLAIMS_DIR) -> None:
    """Give the bed's slice back (`down`)."""
    if not directory.is_dir():
        return
    state_dir = state_dir.resolve()
    with _locked(directory):
        for path in filter(_slot, directory.iterdir()):
            existing = _read(path)
            if existing is not None and existing.get("stateDir") == str(state_dir):
                path.unlink(missing_ok=True)


def held(state_dir: Path, directory: Path = CLAIMS_DIR) -> str | None:
    """The slice this bed holds, if any."""
    if not directory.is_dir():
        return None
    state_dir = state_dir.resolve()
    for path in filter(_slot, directory.iterdir()):
        existing = _read(path)
        if existing is not None and existing.get("stateDir") == str(state_dir):
            return str(existing["range"])
    return None
