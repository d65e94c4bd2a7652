"""The real redis_exporter (github.com/oliver006/redis_exporter), built from its Go module.

The optional metrics sidecar runs the exporter Valkey/Redis users already chart. There is
no image registry here, so `python -m valkey_testbed build` compiles it once from
the Go module proxy at versions.REDIS_EXPORTER into the test bed's cache (stamped, skipped
when current, under its own lock), and the image catalog installs that binary as
`oliver006/redis_exporter:<version>` (images.EXPORTER_IMAGE) for pods to run.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import os
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs

from valkey_testbed import processes, versions
from valkey_testbed.datachecker import check_loopback
from valkey_testbed.images import ImageEntry
from valkey_testbed.wait import NotYet, WaitTimeout, eventually_blocking

Progress = Callable[[str], None]

MODULE = "github.com/oliver006/redis_exporter"
BINARY = "redis_exporter"


def _cache_dir() -> Path:
    from valkey_testbed.build import cache_root

    return cache_root() / "redis_exporter" / versions.REDIS_EXPORTER


def exporter_path() -> Path:
    """Where the built exporter is (built or not)."""
    return _cache_dir() / BINARY


def _go_mod() -> str:
    header = "module valkeyoperator.local/redis_exporter\n\ngo 1.26\n\n"
    return f"{header}require {MODULE} {versions.REDIS_EXPORTER}\n"


def stamp() -> str:
    """What the binary is built from: the pinned version, our module file and the Go toolchain."""
    go_version = subprocess.run(
        ["go", "env", "GOVERSION"], capture_output=True, text=True, check=True
    ).stdout.strip()
    digest = hashlib.sha256(_go_mod().encode()).hexdigest()[:16]
    return f"redis_exporter {versions.REDIS_EXPORTER} module {digest} built by {go_version}\n"


def build_exporter(progress: Progress = print) -> Path:
    """Build the exporter when missing or stale (idempotent). Its own directory, compiler cache and
    lock: concurrent callers wait instead of racing."""
    from valkey_testbed.build import build_go_tool, file_lock

    with file_lock(_cache_dir() / ".lock"):
        files = {
            "go.mod": _go_mod(),
            "tools.go": f'//go:build tools\n\npackage tools\n\nimport _ "{MODULE}"\n',
        }
        # What upstream's Dockerfile stamps (main.BuildVersion etc.); a fixed date keeps it reproducible.
        stamps = {
            "BuildVersion": versions.REDIS_EXPORTER,
            "BuildCommitSha": versions.REDIS_EXPORTER,
            "BuildDate": "1970-01-01",
        }
        ldflags = " ".join(["-s", "-w", *(f"-X main.{key}={value}" for key, value in stamps.items())])
        label = f"redis_exporter {versions.REDIS_EXPORTER}"
        return build_go_tool(exporter_path(), stamp(), label, files, MODULE, ldflags, progress)


PORT = 9121
"""redis_exporter's own default port, the sidecar's."""

# How the sidecar runs it (controllers/cluster/render/exporter.py renders the same flags): CONFIG is
# not called (it would return every setting, the replication password included, and needs CONFIG
# rights); memory_max_bytes and maxclients come from INFO anyway. Go runtime series are left out.
SIDECAR_FLAGS: tuple[str, ...] = ("--config-command=-", "--redis-only-metrics")


def exporter_argv(
    entry: ImageEntry, valkey: tuple[str, int], listen: tuple[str, int], flags: Sequence[str] = SIDECAR_FLAGS
) -> list[str]:
    """argv of the catalog image's exporter for one Valkey, as its image user when we are root.

    Credentials go in the environment (REDIS_USER, REDIS_PASSWORD), never in argv.
    """
    host, port = valkey
    argv = [
        str(entry.executable(BINARY)),
        f"--redis.addr=redis://{host}:{port}",
        f"--web.listen-address={listen[0]}:{listen[1]}",
        *flags,
    ]
    if os.geteuid() == 0:
        argv = ["setpriv", f"--reuid={entry.user}", f"--regid={entry.group}", "--clear-groups", "--", *argv]
    return argv


def start_exporter(
    entry: ImageEntry,
    valkey: tuple[str, int],
    listen: tuple[str, int],
    log_file: Path,
    *,
    username: str | None = None,
    password: str | None = None,
    flags: Sequence[str] = SIDECAR_FLAGS,
    timeout: float = 20.0,
) -> processes.ProcessRecord:
    """Start the exporter for one Valkey on a loopback listener and wait until /metrics answers."""
    for host in (valkey[0], listen[0]):
        check_loopback(host)
    env = {"PATH": f"{entry.bin_dir}:/usr/bin:/bin", "HOME": "/"}
    if username:
        env["REDIS_USER"] = username
    if password:
        env["REDIS_PASSWORD"] = password
    argv = exporter_argv(entry, valkey, listen, flags)
    record = processes.start(f"redis_exporter-{listen[0]}", argv, log_file, env=env)

    def answers() -> bool | NotYet:
        if not record.alive():
            raise ExporterError(f"redis_exporter on {listen[0]} exited:\n{_tail(log_file)}")
        return bool(scrape(listen, timeout=2.0).body)

    try:
        eventually_blocking(answers, "redis_exporter /metrics", timeout, interval=0.05, ignore=(OSError,))
    except WaitTimeout as exc:
        processes.stop([record], grace=2)
        raise ExporterError(f"redis_exporter on {listen[0]}: {exc}:\n{_tail(log_file)}") from None
    return record


class ExporterError(RuntimeError):
    """The exporter did not start; the message carries its log."""


def _tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


@attrs.frozen
class Scrape:
    """One GET /metrics: the body as sent (gzip when asked), its text, and the wall time it took."""

    body: bytes
    text: str
    seconds: float

    def samples(self) -> dict[str, float]:
        """Every sample line, `name{labels}` -> value (comments skipped)."""
        found: dict[str, float] = {}
        for line in self.text.splitlines():
            if line and not line.startswith("#"):
                series, _, value = line.rpartition(" ")
                found[series] = float(value)
        return found


def scrape(listen: tuple[str, int], timeout: float = 10.0, gzip_body: bool = False) -> Scrape:
    """GET /metrics over HTTP/1.0 on a fresh connection (as a Prometheus scrape, one per target)."""
    check_loopback(listen[0])
    started = time.perf_counter()
    connection = http.client.HTTPConnection(listen[0], listen[1], timeout=timeout)
    try:
        headers = {"Accept-Encoding": "gzip"} if gzip_body else {}
        connection.request("GET", "/metrics", headers=headers)
        response = connection.getresponse()
        body = response.read()
        if response.status != 200:
            raise ExporterError(f"GET /metrics on {listen[0]}:{listen[1]}: HTTP {response.status}")
        encoding = response.getheader("Content-Encoding", "")
    finally:
        connection.close()
    seconds = time.perf_counter() - started
    text = (gzip.decompress(body) if encoding == "gzip" else body).decode()
    return Scrape(body, text, seconds)
