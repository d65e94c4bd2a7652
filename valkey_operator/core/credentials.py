"""The bearer token of each request: static, read from a file the kubelet rotates, or from an exec
credential plugin, run again when its token expires or the API server rejects it (client-go's
cached file token source and exec authenticator).

A token that cannot be had right now (an unreadable file, a plugin exiting non-zero) raises
CredentialsUnavailable, an OSError: the request got no answer and is retried like one. A plugin
that can never work (not installed, malformed output, client certificates) raises ConfigError.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import os
from pathlib import Path
from typing import Any, Protocol

import orjson
import structlog

from valkey_operator.core.clock import Clock, RealClock, within
from valkey_operator.core.restconfig import ConfigError, ExecPlugin, RestConfig

log = structlog.get_logger(__name__)

TOKEN_FILE_PERIOD = 60.0
"""Seconds a token file's content is used before the file is read again."""


PLUGIN_TIMEOUT = 60.0
"""Seconds an exec credential plugin may run (kubectl sets none; a browser login would take longer,
but an operator has no one at the keyboard)."""


class CredentialsUnavailable(OSError):
    """No token right now; a later attempt may get one."""


class TokenSource(Protocol):
    async def token(self) -> str:
        """The token to send now."""
        ...

    async def rejected(self, token: str) -> bool:
        """The API server answered 401 to token: True when another token is available now."""
        ...


def token_source(config: RestConfig, clock: Clock | None = None) -> TokenSource | None:
    """config's token source in client-go's order (static, file, exec); None without a token."""
    clock = clock or RealClock()
    if config.token:
        return StaticToken(config.token)
    if config.token_file:
        return FileToken(Path(config.token_file), clock)
    if config.exec_plugin:
        return ExecToken(config.exec_plugin, clock, cluster_info(config))
    return None


class StaticToken:
    def __init__(self, token: str) -> None:
        self._token = token

    async def token(self) -> str:
        return self._token

    async def rejected(self, token: str) -> bool:
        return False


class FileToken:
    """The file's token, read again once the copy is TOKEN_FILE_PERIOD old; a failed re-read keeps
    the last good token (the kubelet writes the file atomically, but may be late)."""

    def __init__(self, path: Path, clock: Clock, period: float = TOKEN_FILE_PERIOD) -> None:
        self._path = path
        self._clock = clock
        self._period = period
        self._token: str | None = None
        self._read_at = 0.0

    async def token(self) -> str:
        if self._token is None or self._clock.now() - self._read_at >= self._period:
            self._read()
        assert self._token is not None
        return self._token

    async def rejected(self, token: str) -> bool:
        self._read()
        return self._token != token

    def _read(self) -> None:
        try:
            token = self._path.read_text().strip()
            if not token:
                raise CredentialsUnavailable(f"token file {self._path} is empty")
        except OSError as exc:
            if self._token is None:
                raise CredentialsUnavailable(f"token file {self._path}: {exc.strerror or exc}") from exc
            log.warning("token_file_unreadable", path=str(self._path), error=str(exc))
            return
        self._token, self._read_at = token, self._clock.now()


class ExecToken:
    """The plugin's token until its expirationTimestamp (forever without one) or a 401; one run at a
    time, however many requests wait for it."""

    def __init__(self, plugin: ExecPlugin, clock: Clock, cluster: dict[str, Any] | None = None) -> None:
        self._plugin = plugin
        self._clock = clock
        self._cluster = cluster
        self._token: str | None = None
        self._expires: float | None = None
        self._lock = asyncio.Lock()

    async def token(self) -> str:
        async with self._lock:
            if self._token is None or (self._expires is not None and self._clock.wall() >= self._expires):
                self._token, self._expires = await run_plugin(self._plugin, self._cluster, self._clock)
            return self._token

    async def rejected(self, token: str) -> bool:
        async with self._lock:
            if self._token == token:  # not yet replaced by a concurrent request's refresh
                self._token, self._expires = await run_plugin(self._plugin, self._cluster, self._clock)
            return self._token != token


def exec_info(plugin: ExecPlugin, cluster: dict[str, Any] | None) -> bytes:
    """KUBERNETES_EXEC_INFO as kubectl sets it: never interactive, cluster info when asked for."""
    spec: dict[str, Any] = {"interactive": False}
    if plugin.provide_cluster_info and cluster is not None:
        spec["cluster"] = cluster
    return orjson.dumps({"apiVersion": plugin.api_version, "kind": "ExecCredential", "spec": spec})


def cluster_info(config: RestConfig) -> dict[str, Any] | None:
    """The ExecCredential spec.cluster of config, for plugins with provideClusterInfo."""
    plugin = config.exec_plugin
    if plugin is None or not plugin.provide_cluster_info:
        return None
    try:
        ca = config.ca_data or (Path(config.ca_file).read_bytes() if config.ca_file else b"")
    except OSError as exc:
        raise ConfigError(f"certificate-authority {config.ca_file}: {exc.strerror or exc}") from None
    cluster = {
        "server": config.server,
        "tls-server-name": config.tls_server_name,
        "insecure-skip-tls-verify": config.insecure_skip_tls_verify or None,
        "certificate-authority-data": base64.b64encode(ca).decode() if ca else None,
        "proxy-url": config.proxy_url,
        "config": plugin.cluster_config,
    }
    return {key: value for key, value in cluster.items() if value is not None}


async def run_plugin(
    plugin: ExecPlugin, cluster: dict[str, Any] | None, clock: Clock | None = None
) -> tuple[str, float | None]:
    """Run the plugin once; its token and expiry (epoch seconds, None for never). A plugin still
    running after PLUGIN_TIMEOUT is killed: a hung one must not stall every request for good."""
    env = {**os.environ, **dict(plugin.env), "KUBERNETES_EXEC_INFO": exec_info(plugin, cluster).decode()}
    try:
        process = await asyncio.create_subprocess_exec(
            plugin.command,
            *plugin.args,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,  # stderr is the plugin's channel to the operator's log
        )
    except (FileNotFoundError, PermissionError) as exc:
        hint = f" ({plugin.install_hint.strip()})" if plugin.install_hint else ""
        raise ConfigError(f"exec plugin {plugin.command!r}: {exc.strerror}{hint}") from None
    try:
        output, _ = await within(clock or RealClock(), PLUGIN_TIMEOUT, process.communicate())
    except TimeoutError:
        raise CredentialsUnavailable(f"exec plugin {plugin.command!r} ran past {PLUGIN_TIMEOUT}s") from None
    finally:
        if process.returncode is None:  # cancelled: leave no plugin behind
            process.kill()
            await process.wait()
    if process.returncode != 0:
        raise CredentialsUnavailable(f"exec plugin {plugin.command!r} exited with {process.returncode}")
    return parse_exec_credential(output, plugin)


def parse_exec_credential(output: bytes, plugin: ExecPlugin) -> tuple[str, float | None]:
    """The token and expiry of the ExecCredential a plugin printed."""
    where = f"exec plugin {plugin.command!r}"
    try:
        credential = orjson.loads(output)
    except orjson.JSONDecodeError:
        raise ConfigError(f"{where} printed no ExecCredential JSON") from None
    if not isinstance(credential, dict) or credential.get("kind") != "ExecCredential":
        raise ConfigError(f"{where} printed no ExecCredential")
    if credential.get("apiVersion") != plugin.api_version:
        raise ConfigError(
            f"{where} answered {credential.get('apiVersion')!r}, configured for {plugin.api_version!r}"
        )
    status = credential.get("status") or {}
    if status.get("clientCertificateData") or status.get("clientKeyData"):
        raise ConfigError(f"{where} returned a client certificate: only token plugins are supported")
    if not status.get("token"):
        raise ConfigError(f"{where} returned no status.token")
    expires = status.get("expirationTimestamp")
    if not expires:
        return str(status["token"]), None
    try:
        return str(status["token"]), datetime.datetime.fromisoformat(str(expires)).timestamp()
    except ValueError:
        raise ConfigError(f"{where}: expirationTimestamp {expires!r} is not RFC 3339") from None
