"""The operator as a real process (`python -m valkey_operator`) against the test bed's kubeconfig.

Each process watches one namespace, runs without leader election (a process
killed at a failpoint releases no lease, and the next one need not wait it
out), binds its metrics and probe servers to 127.0.0.1 ephemeral ports, and
logs JSON to its own file, and dials 127.0.0.0/8 only unless a test passes
other --node-networks. `VALKEY_OPERATOR_FAILPOINTS` is set only for the
processes meant to die at one; every other process gets it removed.
Processes are stopped only by their own pid.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from valkey_operator import failpoints
from valkey_testbed.operatorproc import NODE_NETWORKS, operator_argv

ROOT = Path(__file__).resolve().parents[2]


class OperatorProcess:
    """One `python -m valkey_operator` process; its combined stdout and stderr go to log_path."""

    def __init__(
        self,
        kubeconfig: Path,
        namespace: str,
        log_path: Path,
        armed: Iterable[str] = (),
        flags: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        node_networks: str = NODE_NETWORKS,
    ) -> None:
        """flags are added to the command line, env to this process's environment."""
        self.log_path = log_path
        self.armed = tuple(armed)
        environ = {key: value for key, value in os.environ.items() if key != failpoints.ENV}
        environ.update(env or {})
        if self.armed:
            environ[failpoints.ENV] = ",".join(self.armed)
        argv = operator_argv(kubeconfig, f"--namespace={namespace}", *flags, node_networks=node_networks)
        with log_path.open("wb") as log:
            self.process = subprocess.Popen(
                argv, cwd=ROOT, env=environ, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
        self.started = time.monotonic()

    @property
    def pid(self) -> int:
        return self.process.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log().splitlines()[-lines:])

    async def exit_code(self, timeout: float) -> int | None:
        """The process's exit status once it ends within timeout seconds, else None (still running)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                return code
            await asyncio.sleep(0.2)
        return self.process.poll()

    async def stop(self, grace: float = 30) -> int:
        """SIGTERM (the operator's own graceful stop), SIGKILL after grace seconds; the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        code = await self.exit_code(grace)
        if code is None:
            self.kill()
            code = self.process.wait(10)
        return code

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


class OperatorProcesses:
    """Starts operator processes for one test and kills whichever still run at its end."""

    def __init__(self, kubeconfig: Path, namespace: str, log_dir: Path) -> None:
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self.log_dir = log_dir
        self.started: list[OperatorProcess] = []

    def start(
        self,
        label: str,
        armed: Iterable[str] = (),
        flags: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        node_networks: str = NODE_NETWORKS,
    ) -> OperatorProcess:
        log_path = self.log_dir / f"operator-{len(self.started):02d}-{label}.log"
        process = OperatorProcess(
            self.kubeconfig, self.namespace, log_path, armed, flags, env, node_networks=node_networks
        )
        self.started.append(process)
        return process

    def kill_all(self) -> None:
        for process in self.started:
            process.kill()
