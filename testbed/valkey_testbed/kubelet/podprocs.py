"""Pod processes recorded under the state dir, so nothing leaks if the kubelet dies.

Every container process is a session (and process-group) leader. Its record
(pid, executable, start time) is a file in `<kubelet dir>/pids/`, written when
it starts and removed once it is reaped. `sweep` kills the process group of
every recorded process that is still the one we started: `down` calls it
after stopping the kubelet, and a starting kubelet calls it for leftovers of
a crashed predecessor.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

import attrs

from valkey_testbed.kubelet import runc
from valkey_testbed.processes import ProcessRecord, _proc_stat


def pids_dir(kubelet_dir: Path) -> Path:
    return kubelet_dir / "pids"


def record_file(kubelet_dir: Path, key: str) -> Path:
    return pids_dir(kubelet_dir) / f"{key}.json"


def write_record(kubelet_dir: Path, key: str, record: ProcessRecord) -> None:
    path = record_file(kubelet_dir, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(attrs.asdict(record)))
    tmp.replace(path)


def remove_record(kubelet_dir: Path, key: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        record_file(kubelet_dir, key).unlink()


def read_records(kubelet_dir: Path) -> list[ProcessRecord]:
    records: list[ProcessRecord] = []
    directory = pids_dir(kubelet_dir)
    if not directory.is_dir():
        return records
    for path in sorted(directory.glob("*.json")):
        with contextlib.suppress(OSError, ValueError, TypeError):
            records.append(ProcessRecord(**json.loads(path.read_text())))
    return records


def kill_group(record: ProcessRecord) -> None:
    """SIGKILL the process group our record leads, unless its pid now belongs to a stranger.

    While any member of group `pid` lives, the kernel never reuses `pid`, so a
    live process with that pid and another start time means our group is gone.
    """
    ticks, _state = _proc_stat(record.pid)
    if ticks is not None and ticks != record.start_ticks:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(record.pid, signal.SIGKILL)


def sweep(kubelet_dir: Path) -> int:
    """Kill every recorded pod process group and forget the records; returns how many were alive."""
    alive = 0
    for record in read_records(kubelet_dir):
        if record.alive():
            alive += 1
        kill_group(record)
    directory = pids_dir(kubelet_dir)
    if directory.is_dir():
        for path in directory.iterdir():
            with contextlib.suppress(OSError):
                path.unlink()
    runc.sweep(kubelet_dir / "runc", mounts_under=kubelet_dir)
    return alive
