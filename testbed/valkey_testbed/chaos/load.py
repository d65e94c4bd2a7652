"""Client load beside the chaos, all as the cluster's ACL user, each loop bounded by time and count.

- the durable writer: the data checker with WAIT 1 on the writing connection;
  its acknowledged keys are what invariant 1 verifies;
- the probe: the data checker with WAIT 0 and a short command timeout, one key
  at a time, whose per-shard gaps are the longest unavailability of each shard
  (shards named by their slot ranges at the start);
- the valkey-py cluster client: SET and GET through the library's own routing
  and retries, counting errors (what an application sees);
- `valkey-benchmark --cluster` against a pod endpoint: it exits when a failover
  promotes a node it did not know at start ("could not find node with ID"), so
  it is restarted and its restarts counted by reason, not treated as a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import random
import re
import ssl
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs
from valkey.asyncio.cluster import ClusterNode, ValkeyCluster
from valkey.exceptions import ValkeyClusterException, ValkeyError

from valkey_testbed.datachecker import DataChecker, WriterReport

PORT = 6379
WRITE_INTERVAL = 0.02
"""Each loop's pause between operations: ~50 ops/s each leaves the 2 shared cores to the cluster."""
_LOOPBACK = ipaddress.ip_network("127.0.0.0/8")
NODE_NOT_FOUND = "could not find node with ID"
BENCH_RPS = 150
BENCH_REQUESTS = 4500
"""One benchmark run: about 30 s at BENCH_RPS; then it is started again against another seed."""


@attrs.frozen
class Access:
    """How clients reach the cluster: the ACL user, and the CA for a TLS cluster (None: plain)."""

    username: str
    password: str
    ca_file: Path | None

    def ssl_context(self) -> ssl.SSLContext | None:
        if self.ca_file is None:
            return None
        context = ssl.create_default_context(cafile=str(self.ca_file))
        context.check_hostname = False  # redirects carry IPs: the CA is verified, not the name
        return context


def checker(
    access: Access, seeds: Sequence[str], *, replicas: int, prefix: str, timeout: float
) -> DataChecker:
    return DataChecker(
        [(ip, PORT) for ip in seeds],
        replicas=replicas,
        wait_timeout_ms=2000 if replicas else 100,
        username=access.username,
        password=access.password,
        ssl=access.ssl_context(),
        prefix=prefix,
        command_timeout=timeout,
        connect_timeout=min(timeout, 2.0),
    )


@attrs.define
class ClientStats:
    ok: int = 0
    errors: Counter[str] = attrs.Factory(Counter)
    restarts: Counter[str] = attrs.Factory(Counter)
    runs: int = 0


def _loopback_only(address: tuple[str, int]) -> tuple[str, int]:
    if ipaddress.ip_address(address[0]) not in _LOOPBACK:
        raise ValueError(f"{address[0]} is outside 127.0.0.0/8")
    return address


async def cluster_client_loop(
    access: Access, seeds: Callable[[], Sequence[str]], stop: asyncio.Event, deadline: float, max_ops: int
) -> ClientStats:
    """SET then GET through valkey-py's cluster client until stop, deadline or max_ops."""
    stats = ClientStats()
    client: ValkeyCluster | None = None
    index = 0
    while not stop.is_set() and time.monotonic() < deadline and index < max_ops:
        try:
            if client is None:
                stats.runs += 1
                client = ValkeyCluster(
                    startup_nodes=[ClusterNode(ip, PORT) for ip in seeds()],
                    username=access.username,
                    password=access.password,
                    ssl=access.ca_file is not None,
                    ssl_ca_certs=str(access.ca_file) if access.ca_file else None,
                    ssl_check_hostname=False,
                    socket_timeout=2.0,
                    socket_connect_timeout=2.0,
                    address_remap=_loopback_only,
                )
                await client.initialize()
            index += 1
            key = f"chaos:py:{index}"
            await client.set(key, str(index))
            await client.get(key)
            stats.ok += 1
        except (ValkeyError, ValkeyClusterException, OSError, TimeoutError) as exc:
            stats.errors[type(exc).__name__] += 1
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.aclose()
                client = None
            await asyncio.sleep(0.5)
        await asyncio.sleep(WRITE_INTERVAL)
    if client is not None:
        with contextlib.suppress(Exception):
            await client.aclose()
    return stats


async def benchmark_loop(
    executable: Path,
    access: Access,
    seeds: Callable[[], Sequence[str]],
    stop: asyncio.Event,
    deadline: float,
    log: Path,
) -> ClientStats:
    """Run valkey-benchmark --cluster again and again (about 30 s each) until stop or deadline."""
    stats = ClientStats()
    rng = random.Random(0)
    with log.open("ab") as out:
        while not stop.is_set() and time.monotonic() < deadline:
            candidates = list(seeds())
            if not candidates:
                await asyncio.sleep(1)
                continue
            host = rng.choice(candidates)
            _loopback_only((host, PORT))
            argv = [str(executable), "--cluster", "-h", host, "-p", str(PORT), "--user", access.username]
            # -c: at least one client per node (a --cluster rule); --rps keeps it to a trickle on 2 cores.
            argv += ["-a", access.password, "-t", "set,get", "-n", str(BENCH_REQUESTS), "-c", "12"]
            argv += ["--rps", str(BENCH_RPS), "-r", "100000", "-q"]
            if access.ca_file is not None:
                argv += ["--tls", "--cacert", str(access.ca_file)]
            stats.runs += 1
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
            output, ended = await _until_exit_or_stop(process, stop, 120)
            out.write(output[-4000:])
            if ended == "stopped":
                break
            if ended == "timeout":
                stats.restarts["no exit within 120 s"] += 1
            elif process.returncode == 0:
                stats.ok += 1
            else:
                stats.restarts[_reason(process.returncode, output)] += 1
            await asyncio.sleep(2.0)
    return stats


async def _until_exit_or_stop(
    process: asyncio.subprocess.Process, stop: asyncio.Event, timeout: float
) -> tuple[bytes, str]:
    """The process's output once it exits, or after killing it on stop or timeout (our own child)."""
    communicate = asyncio.create_task(process.communicate())
    stopped = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({communicate, stopped}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    ended = "exited" if communicate in done else "stopped" if stopped in done else "timeout"
    if process.returncode is None:
        process.kill()
    output, _ = await communicate
    return output or b"", ended


def _reason(code: int | None, output: bytes) -> str:
    """Why a benchmark run ended early, in words that group alike runs (node ids and IPs vary)."""
    text = output.decode(errors="replace")
    if NODE_NOT_FOUND in text:
        return NODE_NOT_FOUND
    if "Could not connect" in text:  # a node its CLUSTER NODES listed at start (e.g. just killed)
        return "a node it found at start did not answer"
    if "reset by peer" in text or "Connection refused" in text or "Server closed" in text:
        return "connection lost"
    last = (text.strip().splitlines() or ["no output"])[-1]
    return f"exit {code}: {re.sub(r'[0-9a-f]{40}|127(?:[.][0-9]+){3}(?::[0-9]+)?', '*', last)[:80]}"


def _stats(result: object) -> ClientStats:
    if isinstance(result, ClientStats):
        return result
    crashed = ClientStats()
    crashed.errors[f"loop crashed: {result!r}"[:120]] += 1
    return crashed


@attrs.frozen
class LoadReport:
    durable: WriterReport
    probe: WriterReport
    client: ClientStats
    benchmark: ClientStats


class Load:
    """Starts every loop; `finish()` stops them and gathers their reports."""

    def __init__(
        self,
        access: Access,
        seeds: Callable[[], Sequence[str]],
        duration: float,
        benchmark: Path | None,
        log_dir: Path,
    ) -> None:
        initial = list(seeds())
        self.durable = checker(access, initial, replicas=1, prefix="chaos", timeout=5.0)
        self.probe = checker(access, initial, replicas=0, prefix="probe", timeout=1.0)
        self.stop = asyncio.Event()
        deadline = time.monotonic() + duration
        max_keys = int(duration / WRITE_INTERVAL) + 1
        self.tasks: list[asyncio.Task[object]] = [
            asyncio.create_task(
                c.run_writer(max_keys=max_keys, duration=duration, interval=WRITE_INTERVAL, stop=self.stop)
            )
            for c in (self.durable, self.probe)
        ]
        self.tasks.append(
            asyncio.create_task(cluster_client_loop(access, seeds, self.stop, deadline, max_keys))
        )
        if benchmark is not None:
            self.tasks.append(
                asyncio.create_task(
                    benchmark_loop(benchmark, access, seeds, self.stop, deadline, log_dir / "benchmark.log")
                )
            )

    def failed(self) -> str | None:
        """A loop that ended with an exception (a bug in the load, not the cluster): its error."""
        for task in self.tasks:
            if task.done() and not task.cancelled() and task.exception() is not None:
                return repr(task.exception())
        return None

    async def finish(self) -> LoadReport:
        """Stop every loop and gather its report; a client loop that crashed reports its error."""
        self.stop.set()
        results = await asyncio.gather(*self.tasks, return_exceptions=True)
        durable, probe = results[0], results[1]
        if isinstance(durable, BaseException) or isinstance(probe, BaseException):
            raise RuntimeError(f"the data checker's writer crashed: {durable!r} {probe!r}")
        stats = [_stats(result) for result in results[2:]]
        assert isinstance(durable, WriterReport) and isinstance(probe, WriterReport)
        return LoadReport(durable, probe, stats[0], stats[1] if len(stats) > 1 else ClientStats())

    async def close(self) -> None:
        for task in self.tasks:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        await self.durable.close()
        await self.probe.close()
