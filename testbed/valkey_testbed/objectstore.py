"""A real S3-compatible object store for tests: Versity S3 Gateway serving a local directory.

Backups go to S3-compatible storage, and only a real server shows what a real
one does (multipart uploads, signature checks, error codes, TLS), so the test
bed runs Versity S3 Gateway (versitygw, Apache-2.0, a production S3 gateway
written in Go). It is built once from its Go module (versions.VERSITYGW) into
the test bed's cache by `python -m valkey_testbed build`, and started
like the other test-bed processes: a `processes` record on 127.0.0.1 (or another
address of ours: the real nodes' bridge gateway, where their pods reach it) on a
free port, its posix backend in a temp directory, a generated root access key
and secret, plain HTTP or TLS (a serving certificate for its address from
certs.py's CA, whose PEM the tests hand to the client).

The helpers here are synchronous (botocore's plain client): call them through
`asyncio.to_thread` from async tests when the wait matters.
"""

from __future__ import annotations

import hashlib
import http.client
import secrets
import shutil
import ssl
import subprocess
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from valkey_testbed import certs, processes, versions
from valkey_testbed.wait import NotYet, eventually_blocking

Progress = Callable[[str], None]

MODULE = "github.com/versity/versitygw"
PACKAGE = f"{MODULE}/cmd/versitygw"
REGION = "us-east-1"
HEALTH_PATH = "/health"


class ObjectStoreError(RuntimeError):
    """The server did not build or start; the message carries the tool's output or log."""


def _cache_dir() -> Path:
    from valkey_testbed.build import cache_root

    return cache_root() / "versitygw" / versions.VERSITYGW


def server_path() -> Path:
    """Where the built server is (built or not)."""
    return _cache_dir() / "versitygw"


def _go_mod() -> str:
    return f"module valkeyoperator.local/versitygw\n\ngo 1.26\n\nrequire {MODULE} {versions.VERSITYGW}\n"


def _stamp() -> str:
    go_version = subprocess.run(
        ["go", "env", "GOVERSION"], capture_output=True, text=True, check=True
    ).stdout.strip()
    digest = hashlib.sha256(_go_mod().encode()).hexdigest()[:16]
    return f"versitygw {versions.VERSITYGW} module {digest} built by {go_version}\n"


def build_server(progress: Progress = print) -> Path:
    """Build the gateway when missing or stale (idempotent). Its own directory, compiler cache and
    lock: concurrent callers (xdist workers' fixtures, `build`) wait instead of racing."""
    from valkey_testbed.build import file_lock

    with file_lock(_cache_dir() / ".lock"):
        return _build_server(progress)


def _build_server(progress: Progress) -> Path:
    from valkey_testbed.build import build_go_tool

    files = {
        "go.mod": _go_mod(),
        "tools.go": f'//go:build tools\n\npackage tools\n\nimport _ "{PACKAGE}"\n',
    }
    stamps = {"Version": versions.VERSITYGW, "Build": versions.VERSITYGW, "BuildTime": "1970-01-01"}
    ldflags = " ".join(["-s", "-w", *(f"-X main.{key}={value}" for key, value in stamps.items())])
    label = f"versitygw {versions.VERSITYGW}"
    return build_go_tool(server_path(), _stamp(), label, files, PACKAGE, ldflags, progress)


@attrs.frozen(kw_only=True)
class ObjectStoreServer:
    """A running gateway we started: where it listens, its root credentials, and its CA if TLS."""

    record: processes.ProcessRecord
    host: str
    port: int
    directory: Path
    access_key_id: str
    secret_access_key: str = attrs.field(repr=False)
    ca_pem: str | None = attrs.field(repr=False)
    """The CA of the serving certificate (PEM) when the server speaks TLS; None for plain HTTP."""
    region: str = REGION

    @property
    def endpoint(self) -> str:
        scheme = "https" if self.ca_pem else "http"
        return f"{scheme}://{self.host}:{self.port}"

    @property
    def data_dir(self) -> Path:
        """The posix backend's root: one directory per bucket, one file per object."""
        return self.directory / "data"

    @property
    def log(self) -> Path:
        return self.directory / "versitygw.log"

    def _ssl_context(self) -> ssl.SSLContext | None:
        return ssl.create_default_context(cadata=self.ca_pem) if self.ca_pem else None

    def healthy(self) -> bool:
        """GET /health answers 200."""
        connection: http.client.HTTPConnection
        if self.ca_pem:
            connection = http.client.HTTPSConnection(
                self.host, self.port, timeout=2.0, context=self._ssl_context()
            )
        else:
            connection = http.client.HTTPConnection(self.host, self.port, timeout=2.0)
        try:
            connection.request("GET", HEALTH_PATH)
            return connection.getresponse().status == 200
        except OSError:
            return False
        finally:
            connection.close()

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Until /health answers; fails at once, naming the log, if the process exited."""

        def check() -> bool | NotYet:
            if not self.record.alive():
                raise ObjectStoreError(f"versitygw exited; see {self.log}:\n{_tail(self.log)}")
            return self.healthy() or NotYet("not healthy")

        eventually_blocking(check, f"versitygw on {self.endpoint} healthy", timeout, interval=0.1)

    def client(self) -> Any:
        """A plain (blocking) botocore S3 client as the root user, for arranging and inspecting
        objects in tests (the operator's own client is valkey_operator.objectstore)."""
        import botocore.config
        import botocore.session

        verify: str | bool = True
        if self.ca_pem:
            verify = str(self.directory / "ca.crt")
        return botocore.session.get_session().create_client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=self.region,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
            verify=verify,
            config=botocore.config.Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
        )

    def create_bucket(self, name: str | None = None) -> str:
        """Create a bucket (default: a fresh unique name) and return its name."""
        name = name or f"test-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def stop(self) -> None:
        """Stop the process (by its record) and remove its directory."""
        processes.stop([self.record])
        shutil.rmtree(self.directory, ignore_errors=True)


def _tail(path: Path, chars: int = 3000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else ""


def _write_serving_cert(directory: Path, host: str) -> tuple[Path, Path, str]:
    """A CA and a serving certificate for host and localhost: (cert path, key path, CA PEM)."""
    ca_cert, ca_key = certs.issue_ca("valkey-operator-testbed-objectstore-ca")
    serving, serving_key = certs.issue_leaf(
        ca_cert, ca_key, "versitygw", dns_names=("localhost",), ip_addresses=(host,), server=True
    )
    ca_pem = certs.pem(ca_cert).decode()
    (directory / "ca.crt").write_text(ca_pem)
    cert, key = directory / "tls.crt", directory / "tls.key"
    cert.write_bytes(certs.pem(serving))
    key.write_bytes(certs.key_pem(serving_key))
    key.chmod(0o600)
    return cert, key, ca_pem


def start(
    *,
    tls: bool = False,
    executable: Path | None = None,
    directory: Path | None = None,
    host: str = "127.0.0.1",
) -> ObjectStoreServer:
    """Start the gateway on host (an address of ours; a free port), serving a fresh posix directory,
    with a generated root key and secret (passed in its environment, not its command line); ready
    on return."""
    directory = directory or Path(tempfile.mkdtemp(prefix="valkey-operator-objectstore-"))
    data = directory / "data"
    data.mkdir(parents=True, exist_ok=True)
    access_key_id, secret = "root" + secrets.token_hex(8), secrets.token_urlsafe(30)
    port = processes.free_port(host)
    argv: list[str | Path] = [
        executable or server_path(),
        "--port", f"{host}:{port}",
        "--region", REGION,
        "--health", HEALTH_PATH,
        "--quiet",
    ]  # fmt: skip
    ca_pem = None
    if tls:
        cert, key, ca_pem = _write_serving_cert(directory, host)
        argv += ["--cert", cert, "--key", key]
    argv += ["posix", data]
    env = {"PATH": "/usr/bin:/bin", "ROOT_ACCESS_KEY_ID": access_key_id, "ROOT_SECRET_ACCESS_KEY": secret}
    record = processes.start("versitygw", argv, directory / "versitygw.log", env=env)
    server = ObjectStoreServer(
        record=record,
        host=host,
        port=port,
        directory=directory,
        access_key_id=access_key_id,
        secret_access_key=secret,
        ca_pem=ca_pem,
    )
    try:
        server.wait_ready()
    except BaseException:
        server.stop()
        raise
    return server
