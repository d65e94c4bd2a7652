"""The operator under fuzz: a real `python -m valkey_operator` process, and what it costs.

It watches the run's namespace (cluster-scoped kinds everywhere, as always), logs JSON to a file
the run tallies, serves its readiness probe on a loopback port chosen here (metrics off), and is
measured from /proc: resident memory (VmRSS) and CPU seconds. Stopped by its own pid only.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import aiohttp
import orjson

from valkey_operator import failpoints
from valkey_operator.core.rest import Obj
from valkey_testbed.operatorproc import operator_argv

ROOT = Path(__file__).resolve().parents[3]


class OperatorDied(RuntimeError):
    """The operator process ended while the run needed it."""


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class OperatorUnderFuzz:
    def __init__(self, kubeconfig: Path, namespace: str, log_path: Path) -> None:
        self.log_path = log_path
        self.probe_port = free_loopback_port()
        argv = operator_argv(
            kubeconfig,
            f"--namespace={namespace}",
            "--metrics-bind-address=0",
            f"--health-probe-bind-address=127.0.0.1:{self.probe_port}",
        )
        environ = {key: value for key, value in os.environ.items() if key != failpoints.ENV}
        with log_path.open("wb") as log:
            self.process = subprocess.Popen(
                argv, cwd=ROOT, env=environ, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
        self._offset = 0
        self._partial = b""

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def check_alive(self) -> None:
        if not self.alive():
            raise OperatorDied(f"the operator exited with status {self.process.returncode}: {self.tail()}")

    async def ready(self, timeout: float = 60.0) -> None:
        """Poll /readyz until 200; raise if the process ends or the timeout passes."""
        url = f"http://127.0.0.1:{self.probe_port}/readyz"
        deadline = time.monotonic() + timeout
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
            while time.monotonic() < deadline:
                self.check_alive()
                with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                    async with session.get(url) as answer:
                        if answer.status == 200:
                            return
                await asyncio.sleep(0.2)
        raise TimeoutError(f"operator not ready within {timeout}s: {self.tail()}")

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise OperatorDied("no VmRSS: the process is gone")

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime

    def new_lines(self) -> list[Obj]:
        """JSON log lines written since the last call (other lines, such as a traceback, as text)."""
        with self.log_path.open("rb") as log:
            log.seek(self._offset)
            data = self._partial + log.read()
            self._offset = log.tell()
        *complete, self._partial = data.split(b"\n")
        lines: list[Obj] = []
        for raw in complete:
            try:
                decoded = orjson.loads(raw)
            except orjson.JSONDecodeError:
                decoded = {"event": "text", "level": "error", "exception": raw.decode(errors="replace")}
            if isinstance(decoded, dict):
                lines.append(decoded)
        return lines

    def tail(self, lines: int = 20) -> str:
        text = self.log_path.read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    async def stop(self, grace: float = 30.0) -> int:
        """SIGTERM, SIGKILL after grace seconds; the exit status."""
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
        try:
            return await asyncio.to_thread(self.process.wait, grace)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(10)
