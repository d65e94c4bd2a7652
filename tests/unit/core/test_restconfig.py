"""Loading a RestConfig (kubeconfig files, $KUBECONFIG lists, in-cluster) and the tokens it yields,
without a server: time is a FakeClock, exec plugins are tiny real scripts."""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import os
import ssl
import tempfile
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from exec_plugin_support import V1, V1BETA1, ExecPluginScript, exec_credential

from valkey_operator.core.clock import FakeClock
from valkey_operator.core.credentials import (
    PLUGIN_TIMEOUT,
    CredentialsUnavailable,
    ExecToken,
    FileToken,
    StaticToken,
    token_source,
)
from valkey_operator.core.restconfig import ConfigError, ExecPlugin, RestConfig, load_config
from valkey_operator.core.transport import client_timeout, proxy_for, tls_context

SERVER = "https://203.0.113.7:6443"


@pytest.fixture(autouse=True)
def no_ambient_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Neither the machine's KUBECONFIG, nor a pod's environment, nor ~/.kube/config leaks in."""
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(name, raising=False)
    for name in ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def kubeconfig(
    path: Path,
    *,
    clusters: dict[str, dict[str, Any]] | None = None,
    users: dict[str, dict[str, Any]] | None = None,
    contexts: dict[str, tuple[str, str]] | None = None,
    current: str | None = None,
) -> Path:
    document: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": c} for n, c in (clusters or {}).items()],
        "users": [{"name": n, "user": u} for n, u in (users or {}).items()],
        "contexts": [
            {"name": n, "context": {"cluster": c, "user": u}} for n, (c, u) in (contexts or {}).items()
        ],
    }
    if current:
        document["current-context"] = current
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document))
    return path


def touch(path: Path, content: str = "x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    return path


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# -- kubeconfig files --------------------------------------------------------------


def test_the_current_context_with_paths_relative_to_the_kubeconfig(tmp_path: Path) -> None:
    for name in ("pki/ca.crt", "pki/admin.crt", "pki/admin.key"):
        touch(tmp_path / "conf" / name)
    path = kubeconfig(
        tmp_path / "conf" / "config",
        clusters={"c": {"server": SERVER, "certificate-authority": "pki/ca.crt", "tls-server-name": "api"}},
        users={"u": {"client-certificate": "pki/admin.crt", "client-key": "pki/admin.key"}},
        contexts={"ctx": ("c", "u")},
        current="ctx",
    )
    config = load_config(str(path))
    assert config.server == SERVER
    assert config.ca_file == str(tmp_path / "conf" / "pki" / "ca.crt")
    assert config.cert_file == str(tmp_path / "conf" / "pki" / "admin.crt")
    assert config.key_file == str(tmp_path / "conf" / "pki" / "admin.key")
    assert config.tls_server_name == "api"
    assert config.token is None and config.exec_plugin is None


def test_context_picks_another_context_and_an_unknown_one_is_named(tmp_path: Path) -> None:
    path = kubeconfig(
        tmp_path / "config",
        clusters={"a": {"server": "https://a.example:6443"}, "b": {"server": "https://b.example:6443"}},
        users={"u": {"token": "t"}},
        contexts={"first": ("a", "u"), "second": ("b", "u")},
        current="first",
    )
    assert load_config(str(path)).server == "https://a.example:6443"
    assert load_config(str(path), context="second").server == "https://b.example:6443"
    with pytest.raises(ConfigError, match="context 'third' not found"):
        load_config(str(path), context="third")


def test_data_is_decoded_and_wins_over_a_file(tmp_path: Path) -> None:
    path = kubeconfig(
        tmp_path / "config",
        clusters={"c": {"server": SERVER, "certificate-authority-data": b64(b"CA PEM")}},
        users={"u": {"client-certificate-data": b64(b"CERT"), "client-key-data": b64(b"KEY"), "token": "t"}},
        contexts={"ctx": ("c", "u")},
        current="ctx",
    )
    config = load_config(str(path))
    assert (config.ca_data, config.cert_data, config.key_data) == (b"CA PEM", b"CERT", b"KEY")
    assert config.ca_file is None and config.cert_file is None
    assert config.token == "t"
    assert "CERT" not in repr(config) and "KEY" not in repr(config) and "'t'" not in repr(config)


def test_a_kubeconfig_list_merges_first_file_wins_per_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    touch(tmp_path / "one" / "token")
    touch(tmp_path / "two" / "token")
    first = kubeconfig(
        tmp_path / "one" / "config",
        clusters={"shared": {"server": "https://first.example"}},
        users={"u": {"tokenFile": "token"}},
        contexts={"ctx": ("shared", "u")},
    )
    second = kubeconfig(
        tmp_path / "two" / "config",
        clusters={"shared": {"server": "https://second.example"}, "own": {"server": "https://own.example"}},
        users={"u": {"token": "ignored"}, "v": {"tokenFile": "token"}},
        contexts={"ctx": ("own", "v"), "other": ("own", "v")},
        current="ctx",
    )
    missing = tmp_path / "missing" / "config"
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(missing), str(first), "", str(second)]))
    config = load_config()  # current-context comes from the second file; its entry from the first
    assert config.server == "https://first.example"
    assert config.token_file == str(tmp_path / "one" / "token")
    other = load_config(context="other")
    assert other.server == "https://own.example"
    assert other.token_file == str(tmp_path / "two" / "token")  # relative to the file that named it


def test_the_first_current_context_set_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    clusters = {"a": {"server": "https://a.example"}, "b": {"server": "https://b.example"}}
    contexts = {"a": ("a", ""), "b": ("b", "")}
    first = kubeconfig(tmp_path / "1", clusters=clusters, contexts=contexts, current="a")
    second = kubeconfig(tmp_path / "2", clusters=clusters, contexts=contexts, current="b")
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(first), str(second)]))
    assert load_config().server == "https://a.example"


def test_an_explicit_path_wins_over_kubeconfig_which_wins_over_in_cluster(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    explicit = kubeconfig(
        tmp_path / "explicit",
        clusters={"c": {"server": "https://explicit"}},
        contexts={"x": ("c", "")},
        current="x",
    )
    listed = kubeconfig(
        tmp_path / "listed",
        clusters={"c": {"server": "https://listed"}},
        contexts={"x": ("c", "")},
        current="x",
    )
    service_account = tmp_path / "sa"
    touch(service_account / "token", "sa-token")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setenv("KUBECONFIG", str(listed))
    assert load_config(str(explicit), service_account_dir=service_account).server == "https://explicit"
    assert load_config(service_account_dir=service_account).server == "https://listed"
    monkeypatch.delenv("KUBECONFIG")
    assert load_config(service_account_dir=service_account).server == "https://10.0.0.1:443"


def test_in_cluster_from_the_service_account_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    touch(tmp_path / "token", "sa-token\n")
    touch(tmp_path / "ca.crt")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "6443")
    config = load_config(service_account_dir=tmp_path)
    assert config.server == "https://[fd00::1]:6443"
    assert config.token_file == str(tmp_path / "token")
    assert config.ca_file == str(tmp_path / "ca.crt")
    assert config.token is None  # re-read as the kubelet rotates it, never frozen at load


def test_in_cluster_without_a_token_is_an_error_naming_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    with pytest.raises(ConfigError, match=f"in-cluster token {tmp_path / 'token'}"):
        load_config(service_account_dir=tmp_path)


def test_home_kubeconfig_is_the_last_resort(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no Kubernetes configuration"):
        load_config(service_account_dir=tmp_path)
    kubeconfig(
        tmp_path / "home" / ".kube" / "config",
        clusters={"c": {"server": "https://home.example"}},
        contexts={"x": ("c", "")},
        current="x",
    )
    assert load_config(service_account_dir=tmp_path).server == "https://home.example"


@pytest.mark.parametrize(
    ("user", "named", "instead"),
    [
        ({"auth-provider": {"name": "gcp"}}, "auth-provider is not supported", "exec credential plugin"),
        ({"username": "admin", "password": "secret"}, "basic auth", "exec credential plugin"),
        ({"token": "t", "as": "someone"}, "impersonation", "own credentials"),
        (
            {"exec": {"apiVersion": "client.authentication.k8s.io/v1alpha1", "command": "x"}},
            "v1alpha1",
            "client.authentication.k8s.io/v1",
        ),
        (
            {"exec": {"apiVersion": V1, "command": "x", "interactiveMode": "Always"}},
            "interactiveMode Always",
            "non-interactively",
        ),
    ],
)
def test_unsupported_auth_is_named_with_what_to_use_instead(
    tmp_path: Path, user: dict[str, Any], named: str, instead: str
) -> None:
    path = kubeconfig(
        tmp_path / "config",
        clusters={"c": {"server": SERVER}},
        users={"u": user},
        contexts={"x": ("c", "u")},
        current="x",
    )
    with pytest.raises(ConfigError) as caught:
        load_config(str(path))
    assert named in str(caught.value) and instead in str(caught.value)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("clusters: [\n  - name: a\n    cluster: {server: x", "not valid YAML"),
        ("- just\n- a list\n", "not a kubeconfig"),
        ("clusters: {a: b}\n", "clusters is not a list"),
        ("current-context: x\n", "context 'x' not found"),
        ("apiVersion: v1\n", "no current-context"),
    ],
)
def test_a_broken_file_names_the_file_and_the_problem(tmp_path: Path, content: str, problem: str) -> None:
    path = touch(tmp_path / "broken", content)
    with pytest.raises(ConfigError) as caught:
        load_config(str(path))
    assert str(path) in str(caught.value) and problem in str(caught.value)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=f"kubeconfig {tmp_path / 'nope'}: No such file"):
        load_config(str(tmp_path / "nope"))
    path = kubeconfig(
        tmp_path / "config",
        clusters={"c": {"server": SERVER, "certificate-authority": "gone.crt"}},
        contexts={"x": ("c", "")},
        current="x",
    )
    with pytest.raises(ConfigError, match=f"certificate-authority {tmp_path / 'gone.crt'}"):
        load_config(str(path))


def test_contradictions_are_refused() -> None:
    with pytest.raises(ConfigError, match="exclude each other"):
        RestConfig(SERVER, ca_data=b"pem", insecure_skip_tls_verify=True)
    with pytest.raises(ConfigError, match="needs its key"):
        RestConfig(SERVER, cert_file="/c")
    with pytest.raises(ConfigError, match="not an http"):
        RestConfig("127.0.0.1:6443")
    with pytest.raises(ConfigError, match="only http and https proxies"):
        RestConfig(SERVER, proxy_url="socks5://proxy:1080")


# -- token sources -----------------------------------------------------------------


async def test_a_token_file_is_read_again_once_a_minute(tmp_path: Path) -> None:
    path = touch(tmp_path / "token", "first\n")
    clock = FakeClock()
    tokens = FileToken(path, clock)
    assert await tokens.token() == "first"
    path.write_text("second")
    clock.step(59.9)
    assert await tokens.token() == "first"  # the cached copy is still fresh
    clock.step(0.1)
    assert await tokens.token() == "second"
    path.unlink()  # the kubelet is late: the last good token is kept
    clock.step(60)
    assert await tokens.token() == "second"


async def test_a_rejected_file_token_is_read_again_at_once(tmp_path: Path) -> None:
    path = touch(tmp_path / "token", "old")
    tokens = FileToken(path, FakeClock())
    assert await tokens.token() == "old"
    assert not await tokens.rejected("old")  # the same token again: no point retrying
    path.write_text("new")
    assert await tokens.rejected("old")
    assert await tokens.token() == "new"


async def test_an_unreadable_token_file_without_a_token_is_a_transient_error(tmp_path: Path) -> None:
    with pytest.raises(CredentialsUnavailable):
        await FileToken(tmp_path / "missing", FakeClock()).token()
    with pytest.raises(CredentialsUnavailable, match="empty"):
        await FileToken(touch(tmp_path / "empty", "\n"), FakeClock()).token()


def test_a_static_token_wins_over_a_file_which_wins_over_exec(tmp_path: Path) -> None:
    plugin = ExecPlugin(command="plugin", api_version=V1)
    file = str(touch(tmp_path / "token"))
    assert isinstance(
        token_source(RestConfig(SERVER, token="t", token_file=file, exec_plugin=plugin)), StaticToken
    )
    assert isinstance(token_source(RestConfig(SERVER, token_file=file, exec_plugin=plugin)), FileToken)
    assert isinstance(token_source(RestConfig(SERVER, exec_plugin=plugin)), ExecToken)
    assert token_source(RestConfig(SERVER)) is None


def exec_kubeconfig(
    tmp_path: Path, exec_spec: dict[str, Any], cluster: dict[str, Any] | None = None
) -> RestConfig:
    path = kubeconfig(
        tmp_path / "kube" / "config",
        clusters={"c": {"server": SERVER, **(cluster or {})}},
        users={"u": {"exec": exec_spec}},
        contexts={"x": ("c", "u")},
        current="x",
    )
    return load_config(str(path))


def rfc3339(clock: FakeClock, after: float) -> str:
    return datetime.datetime.fromtimestamp(clock.wall() + after, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def test_an_exec_plugin_runs_with_its_args_env_and_exec_info(tmp_path: Path) -> None:
    (tmp_path / "kube").mkdir()
    script = ExecPluginScript.write(tmp_path / "kube", [exec_credential("tok", api_version=V1BETA1)])
    config = exec_kubeconfig(
        tmp_path,
        {
            "apiVersion": V1BETA1,
            "command": "./plugin",  # a path: relative to the kubeconfig
            "args": ["get-token", "--cluster=c"],
            "env": [{"name": "GREETING", "value": "hello"}],
            "provideClusterInfo": True,
        },
        cluster={
            "certificate-authority-data": b64(b"CA"),
            "extensions": [{"name": "client.authentication.k8s.io/exec", "extension": {"audience": "a"}}],
        },
    )
    assert config.exec_plugin is not None and config.exec_plugin.command == str(tmp_path / "kube" / "plugin")
    tokens = token_source(config, FakeClock())
    assert tokens is not None
    assert await tokens.token() == "tok"
    [run] = script.runs()
    assert run["args"] == ["get-token", "--cluster=c"]
    assert run["greeting"] == "hello" and run["path"] == os.environ["PATH"]  # merged into our environment
    assert json.loads(run["exec_info"]) == {
        "apiVersion": V1BETA1,
        "kind": "ExecCredential",
        "spec": {
            "interactive": False,
            "cluster": {
                "server": SERVER,
                "certificate-authority-data": b64(b"CA"),
                "config": {"audience": "a"},
            },
        },
    }


async def test_an_exec_token_is_reused_until_it_expires(tmp_path: Path) -> None:
    clock = FakeClock()
    script = ExecPluginScript.write(
        tmp_path, [exec_credential("one", rfc3339(clock, 300)), exec_credential("two", rfc3339(clock, 900))]
    )
    tokens = ExecToken(ExecPlugin(command=str(script.path), api_version=V1), clock)
    assert await tokens.token() == "one"
    clock.step(299)
    assert await tokens.token() == "one"
    assert len(script.runs()) == 1
    clock.step(1)
    assert await tokens.token() == "two"
    assert json.loads(script.runs()[1]["exec_info"]) == {
        "apiVersion": V1,
        "kind": "ExecCredential",
        "spec": {"interactive": False},  # no cluster info unless provideClusterInfo
    }


async def test_a_rejected_exec_token_runs_the_plugin_once_more(tmp_path: Path) -> None:
    script = ExecPluginScript.write(tmp_path, [exec_credential("stale"), exec_credential("fresh")])
    tokens = ExecToken(ExecPlugin(command=str(script.path), api_version=V1), FakeClock())
    assert await tokens.token() == "stale"  # no expirationTimestamp: kept until rejected
    assert await tokens.token() == "stale"
    assert await tokens.rejected("stale")
    assert await tokens.token() == "fresh"
    assert await tokens.rejected("stale")  # a request that still held the old one: no new run
    assert len(script.runs()) == 2
    assert not await tokens.rejected("fresh")  # the plugin answers the same token: do not retry
    assert len(script.runs()) == 3


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (
            {
                "apiVersion": V1,
                "kind": "ExecCredential",
                "status": {"clientCertificateData": "C", "clientKeyData": "K"},
            },
            "only token plugins are supported",
        ),
        (exec_credential("t", api_version=V1BETA1), "configured for 'client.authentication.k8s.io/v1'"),
        ({"apiVersion": V1, "kind": "ExecCredential", "status": {}}, "no status.token"),
        (exec_credential("t", expires="tomorrow"), "not RFC 3339"),
    ],
)
async def test_a_plugin_that_can_never_work_is_a_config_error(
    tmp_path: Path, answer: dict[str, Any], problem: str
) -> None:
    script = ExecPluginScript.write(tmp_path, [answer])
    with pytest.raises(ConfigError, match=problem):
        await ExecToken(ExecPlugin(command=str(script.path), api_version=V1), FakeClock()).token()


async def test_a_failing_plugin_is_transient_and_a_missing_one_shows_its_install_hint(tmp_path: Path) -> None:
    script = ExecPluginScript.write(tmp_path, [None])
    with pytest.raises(CredentialsUnavailable, match="exited with 3"):
        await ExecToken(ExecPlugin(command=str(script.path), api_version=V1), FakeClock()).token()
    missing = ExecPlugin(command=str(tmp_path / "absent"), api_version=V1, install_hint="brew install it")
    with pytest.raises(ConfigError, match="brew install it"):
        await ExecToken(missing, FakeClock()).token()


async def test_a_hung_plugin_is_killed_after_its_time_on_the_clock(tmp_path: Path) -> None:
    hung = tmp_path / "hung"
    pid_file = tmp_path / "hung.pid"
    hung.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 600\n")
    hung.chmod(0o755)
    clock = FakeClock()
    fetching = asyncio.create_task(ExecToken(ExecPlugin(command=str(hung), api_version=V1), clock).token())
    await clock.wait_for_waiters()
    async with asyncio.timeout(10):
        while not running(pid_file):
            await asyncio.sleep(0.01)
    clock.step(PLUGIN_TIMEOUT)
    with pytest.raises(CredentialsUnavailable, match="ran past"):
        await fetching
    assert not running(pid_file), "the plugin is killed and reaped"


def running(pid_file: Path) -> bool:
    """The process whose pid the file names exists (False before the file is written)."""
    text = pid_file.read_text().strip() if pid_file.exists() else ""
    return bool(text) and Path(f"/proc/{text}").exists()


# -- transport set-up --------------------------------------------------------------


def self_signed() -> tuple[bytes, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "client")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def test_pem_data_loads_with_no_writable_filesystem(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A kubeconfig with certificate data on a read-only root (no usable temporary directory):
    the certificate and key reach OpenSSL as in-memory files, nothing touches a disk."""
    cert, key = self_signed()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-directory"))
    seen: list[str] = []
    load = ssl.SSLContext.load_cert_chain

    def spying(context: ssl.SSLContext, certfile: str, keyfile: str | None = None) -> None:
        seen.extend((certfile, keyfile or certfile))
        load(context, certfile, keyfile)

    monkeypatch.setattr(ssl.SSLContext, "load_cert_chain", spying)
    context = tls_context(
        RestConfig(SERVER, ca_data=cert, cert_data=cert, key_data=key, tls_server_name="api")
    )
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert len(seen) == 2 and all(path.startswith("/proc/self/fd/") for path in seen), seen
    assert list(tmp_path.iterdir()) == []


def test_bad_pem_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="TLS set-up"):
        tls_context(RestConfig(SERVER, cert_data=b"not pem", key_data=b"not pem"))


def test_the_proxy_is_decided_once_from_the_kubeconfig_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("https_proxy", "http://proxy.example:3128")
    monkeypatch.setenv("no_proxy", "internal.example")
    assert proxy_for(RestConfig("https://api.example:6443")) == "http://proxy.example:3128"
    assert proxy_for(RestConfig("https://api.internal.example:6443")) is None
    assert proxy_for(RestConfig("https://127.0.0.1:6443")) is None  # loopback: never an env proxy (Go)
    assert proxy_for(RestConfig("https://localhost:6443")) is None
    assert proxy_for(RestConfig("http://api.example:8080")) is None  # no http_proxy set
    assert proxy_for(RestConfig("https://127.0.0.1:6443", proxy_url="http://p:1")) == "http://p:1"


def test_timeouts_read_as_kubernetes_asyncio_reads_them() -> None:
    assert client_timeout(5) == aiohttp.ClientTimeout(total=5)
    assert client_timeout(None) == aiohttp.ClientTimeout()
    streaming = aiohttp.ClientTimeout(sock_read=30)
    assert client_timeout(streaming) is streaming
