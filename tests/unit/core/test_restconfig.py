"""Loading a RestConfig (kubernetes-asyncio's Configuration) through kubernetes-asyncio's loaders, in
controller-runtime's order, and refreshing its token (a rewritten file, an exec plugin run again)
without a server: the files and exec plugins are real, the API server is not needed to see which
Authorization a request would carry."""

from __future__ import annotations

import datetime
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from exec_plugin_support import V1, ExecPluginScript, exec_credential

from valkey_operator.core.clock import FakeClock
from valkey_operator.core.restconfig import (
    ConfigError,
    CredentialsUnavailable,
    RestConfig,
    TokenRefresh,
    load_config,
)
from valkey_operator.core.transport import HttpTransport, proxy_for, tls_context

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
    clusters: dict[str, dict[str, Any]],
    users: dict[str, dict[str, Any]],
    contexts: dict[str, tuple[str, str]],
    current: str | None = None,
) -> Path:
    document: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": c} for n, c in clusters.items()],
        "users": [{"name": n, "user": u} for n, u in users.items()],
        "contexts": [{"name": n, "context": {"cluster": c, "user": u}} for n, (c, u) in contexts.items()],
    }
    if current:
        document["current-context"] = current
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document))
    return path


def token_kubeconfig(path: Path, server: str = SERVER, user: dict[str, Any] | None = None) -> Path:
    return kubeconfig(
        path,
        clusters={"c": {"server": server, "insecure-skip-tls-verify": True}},
        users={"u": user or {"token": "static"}},
        contexts={"x": ("c", "u")},
        current="x",
    )


def touch(path: Path, content: str = "x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    return path


async def authorization(config: RestConfig) -> str | None:
    """The Authorization header the next request would carry (asked as the transport asks)."""
    value: str | None = await config.get_api_key_with_prefix("BearerToken")
    return value


def refresh_of(config: RestConfig) -> TokenRefresh:
    hook = config.refresh_api_key_hook
    assert isinstance(hook, TokenRefresh)
    return hook


# -- where the configuration comes from --------------------------------------------


async def test_the_current_context_with_paths_relative_to_the_kubeconfig(tmp_path: Path) -> None:
    for name in ("pki/ca.crt", "pki/admin.crt", "pki/admin.key"):
        touch(tmp_path / "conf" / name)
    path = kubeconfig(
        tmp_path / "conf" / "config",
        clusters={"c": {"server": SERVER, "certificate-authority": "pki/ca.crt", "tls-server-name": "api"}},
        users={"u": {"client-certificate": "pki/admin.crt", "client-key": "pki/admin.key"}},
        contexts={"ctx": ("c", "u")},
        current="ctx",
    )
    config = await load_config(str(path))
    assert config.host == SERVER
    assert config.ssl_ca_cert == str(tmp_path / "conf" / "pki" / "ca.crt")
    assert config.cert_file == str(tmp_path / "conf" / "pki" / "admin.crt")
    assert config.key_file == str(tmp_path / "conf" / "pki" / "admin.key")
    assert config.tls_server_name == "api"
    assert await authorization(config) is None  # certificates only: no token is sent


async def test_context_picks_another_context_and_an_unknown_one_is_a_config_error(tmp_path: Path) -> None:
    path = kubeconfig(
        tmp_path / "config",
        clusters={"a": {"server": "https://a.example:6443"}, "b": {"server": "https://b.example:6443"}},
        users={"u": {"token": "t"}},
        contexts={"first": ("a", "u"), "second": ("b", "u")},
        current="first",
    )
    assert (await load_config(str(path))).host == "https://a.example:6443"
    assert (await load_config(str(path), context="second")).host == "https://b.example:6443"
    with pytest.raises(ConfigError, match="third"):
        await load_config(str(path), context="third")


async def test_an_explicit_path_wins_over_kubeconfig_which_wins_over_in_cluster_then_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    explicit = token_kubeconfig(tmp_path / "explicit", "https://explicit.example")
    listed = token_kubeconfig(tmp_path / "listed", "https://listed.example")
    token_kubeconfig(tmp_path / "home" / ".kube" / "config", "https://home.example")
    service_account = tmp_path / "sa"
    touch(service_account / "token", "sa-token")
    touch(service_account / "ca.crt", "pem")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing'}:{listed}")  # a missing entry is skipped
    assert (await load_config(str(explicit), service_account_dir=service_account)).host == (
        "https://explicit.example"
    )
    assert (await load_config(service_account_dir=service_account)).host == "https://listed.example"
    monkeypatch.delenv("KUBECONFIG")
    assert (await load_config(service_account_dir=service_account)).host == "https://10.0.0.1:443"
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    assert (await load_config(service_account_dir=service_account)).host == "https://home.example"


async def test_in_cluster_reads_the_service_account_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    touch(tmp_path / "token", "first")
    touch(tmp_path / "ca.crt", "pem")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "6443")
    config = await load_config(service_account_dir=tmp_path)
    assert config.host == "https://[fd00::1]:6443"
    assert config.ssl_ca_cert == str(tmp_path / "ca.crt")
    assert await authorization(config) == "Bearer first"


async def test_in_cluster_without_a_token_or_the_environment_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match="no Kubernetes configuration"):
        await load_config(service_account_dir=tmp_path)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    with pytest.raises(ConfigError, match=f"in-cluster service account {tmp_path}"):
        await load_config(service_account_dir=tmp_path)


async def test_a_missing_explicit_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=f"kubeconfig {tmp_path / 'nope'}: no such file"):
        await load_config(str(tmp_path / "nope"))


async def test_impersonation_is_refused_rather_than_ignored(tmp_path: Path) -> None:
    path = token_kubeconfig(tmp_path / "config", user={"token": "t", "as": "someone-else"})
    with pytest.raises(ConfigError, match=r"impersonation \(as\) is not supported"):
        await load_config(str(path))


async def test_basic_auth_is_sent_as_kubernetes_asyncio_loads_it(tmp_path: Path) -> None:
    path = token_kubeconfig(tmp_path / "config", user={"username": "ann", "password": "secret"})
    assert await authorization(await load_config(str(path))) == "Basic YW5uOnNlY3JldA=="


# -- tokens that change ------------------------------------------------------------


async def test_a_rotated_in_cluster_token_is_read_after_a_401_or_a_minute(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    token = touch(tmp_path / "token", "first")
    touch(tmp_path / "ca.crt", "pem")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    clock = FakeClock(1000.0)
    config = await load_config(service_account_dir=tmp_path, clock=clock)
    token.write_text("second")
    assert await authorization(config) == "Bearer first"  # read a moment ago: kept for a minute
    refresh_of(config).expire()  # what the transport does on a 401
    assert await authorization(config) == "Bearer second"
    token.write_text("third")
    clock.step(59)
    assert await authorization(config) == "Bearer second"
    clock.step(1)
    assert await authorization(config) == "Bearer third"


async def test_a_token_file_kubeconfig_is_read_again_after_a_401_or_a_minute(tmp_path: Path) -> None:
    token = touch(tmp_path / "token", "first")
    clock = FakeClock(1000.0)
    path = token_kubeconfig(tmp_path / "config", user={"tokenFile": "token"})
    config = await load_config(str(path), clock=clock)
    token.write_text("second")
    assert await authorization(config) == "Bearer first"
    refresh_of(config).expire()
    assert await authorization(config) == "Bearer second"
    token.write_text("third")
    clock.step(60)
    assert await authorization(config) == "Bearer third"


async def test_an_exec_plugin_runs_at_load_and_again_only_after_a_401(tmp_path: Path) -> None:
    script = ExecPluginScript.write(tmp_path, [exec_credential("one"), exec_credential("two"), None])
    exec_spec = {"apiVersion": V1, "command": str(script.path), "args": ["--flag"]}
    config = await load_config(str(token_kubeconfig(tmp_path / "config", user={"exec": exec_spec})))
    assert await authorization(config) == "Bearer one"
    assert await authorization(config) == "Bearer one"  # no expiry: kept
    assert len(script.runs()) == 1 and script.runs()[0]["args"] == ["--flag"]
    refresh_of(config).expire()
    assert await authorization(config) == "Bearer two"
    assert len(script.runs()) == 2
    refresh_of(config).expire()  # the third run exits 3: no token now, retried like no answer
    with pytest.raises(CredentialsUnavailable, match="exec: process returned 3"):
        await authorization(config)
    with pytest.raises(CredentialsUnavailable):  # still expired: the next request tries again
        await authorization(config)


async def test_an_expiring_exec_token_is_replaced_before_it_expires(tmp_path: Path) -> None:
    soon = (datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=2)).isoformat()
    later = (datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)).isoformat()
    script = ExecPluginScript.write(tmp_path, [exec_credential("one", soon), exec_credential("two", later)])
    exec_spec = {"apiVersion": V1, "command": str(script.path)}
    config = await load_config(str(token_kubeconfig(tmp_path / "config", user={"exec": exec_spec})))
    assert await authorization(config) == "Bearer two"  # within kubernetes-asyncio's 5-minute skew
    assert await authorization(config) == "Bearer two"
    assert len(script.runs()) == 2


# -- transport set-up --------------------------------------------------------------


async def test_bad_certificate_files_are_a_config_error(tmp_path: Path) -> None:
    touch(tmp_path / "admin.crt", "not pem")
    touch(tmp_path / "admin.key", "not pem")
    path = kubeconfig(
        tmp_path / "config",
        clusters={"c": {"server": SERVER}},
        users={"u": {"client-certificate": "admin.crt", "client-key": "admin.key"}},
        contexts={"x": ("c", "u")},
        current="x",
    )
    config = await load_config(str(path))
    with pytest.raises(ConfigError, match="TLS set-up"):
        tls_context(config)


async def test_insecure_skip_tls_verify_verifies_nothing(tmp_path: Path) -> None:
    config = await load_config(str(token_kubeconfig(tmp_path / "config")))
    assert tls_context(config).verify_mode == ssl.CERT_NONE
    assert HttpTransport(config)._base == SERVER


def test_the_proxy_is_decided_once_from_the_kubeconfig_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("https_proxy", "http://proxy.example:3128")
    monkeypatch.setenv("no_proxy", "internal.example")
    assert proxy_for("https://api.example:6443", None) == "http://proxy.example:3128"
    assert proxy_for("https://api.internal.example:6443", None) is None
    assert proxy_for("https://127.0.0.1:6443", None) is None  # loopback: never an env proxy (Go)
    assert proxy_for("https://localhost:6443", None) is None
    assert proxy_for("http://api.example:8080", None) is None  # no http_proxy set
    assert proxy_for("https://127.0.0.1:6443", "http://p:1") == "http://p:1"
    with pytest.raises(ConfigError, match="only http and https proxies"):
        proxy_for(SERVER, "socks5://proxy:1080")


def test_importing_the_core_leaves_kubernetes_asyncio_to_load_config() -> None:
    """An embedder passing its own ApiClient has imported kubernetes-asyncio already; one using
    load_config pays for it there, not at `import valkey_operator.core`."""
    probe = (  # the membership is printed before RestConfig, which imports kubernetes-asyncio, is read
        "import sys, valkey_operator.core as c; "
        "print('kubernetes_asyncio' in sys.modules, c.RestConfig.__name__)"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["False", "Configuration"]
