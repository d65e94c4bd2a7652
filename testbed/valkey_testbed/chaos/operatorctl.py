"""The operator under chaos: a real `python -m valkey_operator` process whose API-server connection
runs through a loopback TCP proxy, so the schedule can kill it or cut it off.

Its kubeconfig is a copy of the test bed's with the server replaced by the
proxy (the API server's certificate has an IP SAN for 127.0.0.1, so TLS still
verifies). `exited()` tells an unplanned death from one the schedule caused:
only `kill()` marks a death as expected. Processes are signalled by their own
Popen handle, never by name.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import yaml

from valkey_operator import failpoints
from valkey_testbed.chaos.invariants import STEADY_PROBE_MAX
from valkey_testbed.operatorproc import operator_argv
from valkey_testbed.tcpproxy import TcpProxy

ROOT = Path(__file__).resolve().parents[3]


class OperatorUnderChaos:
    def __init__(self, kubeconfig: Path, apiserver_port: int, namespace: str, log_dir: Path) -> None:
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self.log_dir = log_dir
        self.proxy = TcpProxy(apiserver_port)
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.kills = 0
        self.cuts = 0

    @property
    def proxied_kubeconfig(self) -> Path:
        return self.log_dir / "operator-kubeconfig"

    async def start(self) -> None:
        await self.proxy.start()
        config = yaml.safe_load(self.kubeconfig.read_text())
        for cluster in config["clusters"]:
            cluster["cluster"]["server"] = self.proxy.url
        self.proxied_kubeconfig.write_text(yaml.safe_dump(config))
        self.proxied_kubeconfig.chmod(0o600)
        self.spawn()

    def spawn(self) -> None:
        """Start a new operator process (the previous one must have exited)."""
        assert self.process is None or self.process.poll() is not None
        # A paused server's replica is promoted by gossip alone (no Kubernetes event): the status
        # invariant's CLAIM_GRACE counts on quiet clusters being probed every 30 s, not backed off.
        argv = operator_argv(
            self.proxied_kubeconfig,
            f"--namespace={self.namespace}",
            f"--operator-namespace={self.namespace}",
            f"--steady-probe-max-seconds={STEADY_PROBE_MAX}",
        )
        env = {key: value for key, value in os.environ.items() if key != failpoints.ENV}
        self.starts += 1
        log = self.log_dir / f"operator-{self.starts:02d}.log"
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
            )

    @property
    def log(self) -> Path:
        return self.log_dir / f"operator-{self.starts:02d}.log"

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def exited(self) -> int | None:
        """The exit status of a process that died unplanned, else None (running, or killed by us)."""
        if self.process is None:
            return None
        return self.process.poll()

    def kill(self) -> int:
        """SIGKILL the operator (a planned death); returns its pid."""
        assert self.process is not None
        pid = self.process.pid
        self.process.kill()
        self.process.wait(10)
        self.process = None
        self.kills += 1
        return pid

    async def cut(self, hold: float) -> int:
        """Cut every connection to the API server and refuse new ones for hold seconds."""
        self.proxy.pause()
        dropped = self.proxy.cut()
        self.cuts += 1
        try:
            await asyncio.sleep(hold)
        finally:
            self.proxy.resume()
        return dropped

    async def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                await asyncio.wait_for(asyncio.to_thread(self.process.wait), 20)
            except TimeoutError:
                self.process.kill()
                self.process.wait(10)
        self.process = None
        await self.proxy.stop()
