"""Start background processes and stop exactly those, by pid.

A pid alone can be reused after its process exits, so each record also keeps
the executable path and the process start time; `stop` only signals a pid
whose /proc entry still matches both.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import attrs


@attrs.frozen
class ProcessRecord:
    """A process we started, identified well enough to never signal a stranger."""

    name: str
    pid: int
    executable: str
    start_ticks: int

    def alive(self) -> bool:
        """True while this very process (not a pid reuse) is running and not a zombie."""
        ticks, state = _proc_stat(self.pid)
        return ticks == self.start_ticks and state not in ("Z", "X", None)


def this_process(name: str) -> ProcessRecord:
    """A record of the calling process (to name it as the owner of something it holds)."""
    ticks, _ = _proc_stat(os.getpid())
    return ProcessRecord(name, os.getpid(), sys.executable, ticks or 0)


def _proc_stat(pid: int) -> tuple[int | None, str | None]:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None, None
    # The command name is parenthesised and may hold spaces; fields follow the last ')'.
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[19]), fields[0]


def start(
    name: str,
    argv: Sequence[str | os.PathLike[str]],
    log_file: Path,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> ProcessRecord:
    """Start argv in its own session (it outlives us), logging to log_file; in cwd if given (a
    `python -m` child puts its working directory first on sys.path, before PYTHONPATH)."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with log_file.open("ab") as log:
        proc = subprocess.Popen(
            [os.fspath(arg) for arg in argv],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
            cwd=cwd,
        )
    ticks, _ = _proc_stat(proc.pid)
    # Popen keeps a handle we will never wait on; the process is reaped by init
    # once we exit, or by stop() below while we live.
    proc.returncode = 0
    return ProcessRecord(name, proc.pid, os.fspath(argv[0]), ticks or 0)


def stop(records: Sequence[ProcessRecord], grace: float = 10.0) -> None:
    """SIGTERM each live record, wait up to grace seconds, then SIGKILL."""
    live = [record for record in records if record.alive()]
    for record in live:
        _signal(record, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while live and time.monotonic() < deadline:
        _reap(live)
        live = [record for record in live if record.alive()]
        if live:
            time.sleep(0.05)
    for record in live:
        _signal(record, signal.SIGKILL)
    for record in live:
        while record.alive():
            _reap([record])
            time.sleep(0.02)


def _signal(record: ProcessRecord, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(record.pid, signum)


def _reap(records: Sequence[ProcessRecord]) -> None:
    """Collect exit statuses of our own children so they do not linger as zombies."""
    for record in records:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(record.pid, os.WNOHANG)


def free_port(host: str = "127.0.0.1") -> int:
    """A currently unused TCP port on host."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port
