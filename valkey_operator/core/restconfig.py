"""Where the API server is and how to prove who we are: client-go's `rest.Config` and
controller-runtime's `GetConfig`, without kubernetes-asyncio.

`load_config` looks where controller-runtime does, in its order: an explicit kubeconfig, else
$KUBECONFIG (a list merged as kubectl merges it), else the in-cluster service account, else
~/.kube/config. What this client does not support (auth providers, basic auth, impersonation,
interactive or certificate exec plugins) is a ConfigError naming it and what to use instead,
never silently ignored.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import attrs
import yaml

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
EXEC_EXTENSION = "client.authentication.k8s.io/exec"
"""The cluster extension handed to exec plugins with provideClusterInfo (kubectl's name)."""
PROXY_SCHEMES = ("http", "https")


class ConfigError(ValueError):
    """The client configuration cannot be used: says which file or setting, and what to do instead."""


@attrs.frozen
class ExecPlugin:
    """A `users[].user.exec` credential plugin (client.authentication.k8s.io v1 or v1beta1)."""

    command: str
    api_version: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    """Set on top of this process's environment."""
    install_hint: str = ""
    provide_cluster_info: bool = False
    cluster_config: Any = None
    """The cluster's client.authentication.k8s.io/exec extension, passed on with the cluster info."""


@attrs.frozen
class RestConfig:
    """How to reach one API server. Data wins over a file given for the same thing; a static token
    wins over a token file, which wins over an exec plugin (client-go's order). Client certificates
    and a bearer token may be combined."""

    server: str
    ca_file: str | None = None
    ca_data: bytes | None = attrs.field(default=None, repr=False)
    """PEM."""
    insecure_skip_tls_verify: bool = False
    tls_server_name: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    cert_data: bytes | None = attrs.field(default=None, repr=False)
    key_data: bytes | None = attrs.field(default=None, repr=False)
    token: str | None = attrs.field(default=None, repr=False)
    token_file: str | None = None
    """Re-read once the copy in memory is 60 s old: the kubelet rotates projected tokens."""
    exec_plugin: ExecPlugin | None = None
    proxy_url: str | None = None
    """None: the https_proxy / no_proxy environment (never for a loopback server)."""

    def __attrs_post_init__(self) -> None:
        if urlsplit(self.server).scheme not in ("http", "https") or not urlsplit(self.server).hostname:
            raise ConfigError(f"server {self.server!r} is not an http(s) URL")
        if self.insecure_skip_tls_verify and (self.ca_file or self.ca_data):
            raise ConfigError("a certificate authority and insecure-skip-tls-verify exclude each other")
        if bool(self.cert_file or self.cert_data) != bool(self.key_file or self.key_data):
            raise ConfigError("a client certificate needs its key, and a key its certificate")
        if self.proxy_url and urlsplit(self.proxy_url).scheme not in PROXY_SCHEMES:
            raise ConfigError(f"proxy-url {self.proxy_url!r}: only http and https proxies are supported")


def load_config(
    kubeconfig: str | None = None,
    *,
    context: str | None = None,
    service_account_dir: Path = SERVICE_ACCOUNT_DIR,
) -> RestConfig:
    """kubeconfig, else $KUBECONFIG, else in-cluster, else ~/.kube/config (controller-runtime's order).

    `context` picks a kubeconfig context other than current-context; in-cluster has none.
    """
    if kubeconfig:
        return from_kubeconfig([Path(kubeconfig)], context, explicit=True)
    listed = os.environ.get("KUBECONFIG", "")
    if listed:
        return from_kubeconfig([Path(p) for p in listed.split(os.pathsep) if p], context)
    home = Path(os.environ.get("HOME") or Path.home()) / ".kube" / "config"
    try:
        return in_cluster_config(service_account_dir)
    except ConfigError:
        if not home.is_file():
            raise
    return from_kubeconfig([home], context, explicit=True)


def in_cluster_config(service_account_dir: Path = SERVICE_ACCOUNT_DIR) -> RestConfig:
    """The pod's service account: KUBERNETES_SERVICE_HOST/PORT, its token file and ca.crt."""
    host = os.environ.get("KUBERNETES_SERVICE_HOST", "")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise ConfigError(
            "no Kubernetes configuration: pass a kubeconfig, set KUBECONFIG, run in a pod "
            "(KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are unset) or create ~/.kube/config"
        )
    token = service_account_dir / "token"
    _must_read(token, "in-cluster token")
    ca = service_account_dir / "ca.crt"
    host = f"[{host}]" if ":" in host else host
    return RestConfig(
        f"https://{host}:{port}", ca_file=str(ca) if ca.is_file() else None, token_file=str(token)
    )


# -- kubeconfig files ------------------------------------------------------------


@attrs.frozen
class _Named:
    """One cluster, user or context entry, and the directory its relative paths start from."""

    body: Mapping[str, Any]
    base: Path


@attrs.define
class _Merged:
    """kubectl's merge: the first file naming a cluster, user or context wins, and so does the first
    current-context."""

    read: int = 0
    current_context: str = ""
    sections: dict[str, dict[str, _Named]] = attrs.field(
        factory=lambda: {"clusters": {}, "users": {}, "contexts": {}}
    )


_SECTION_BODIES = {"clusters": "cluster", "users": "user", "contexts": "context"}


def from_kubeconfig(paths: list[Path], context: str | None = None, *, explicit: bool = False) -> RestConfig:
    """The RestConfig of context (default: current-context) in the merge of paths. Missing files
    are skipped as kubectl skips them, unless the path was given explicitly."""
    merged = _Merged()
    where = f"kubeconfig {os.pathsep.join(map(str, paths))}"
    for path in paths:
        if not explicit and not path.exists():
            continue
        _merge(merged, path, _read_yaml(path))
    if not merged.read:
        raise ConfigError(f"{where}: no such file")
    name = context or merged.current_context
    if not name:
        raise ConfigError(f"{where}: no current-context is set and no context was asked for")
    chosen = merged.sections["contexts"].get(name)
    if chosen is None:
        raise ConfigError(f"{where}: context {name!r} not found")
    cluster_name = str(chosen.body.get("cluster") or "")
    cluster = merged.sections["clusters"].get(cluster_name)
    if cluster is None:
        raise ConfigError(f"{where}: cluster {cluster_name!r} of context {name!r} not found")
    user_name = str(chosen.body.get("user") or "")
    user = merged.sections["users"].get(user_name, _Named({}, cluster.base) if not user_name else None)
    if user is None:
        raise ConfigError(f"{where}: user {user_name!r} of context {name!r} not found")
    try:
        return RestConfig(**_cluster_fields(cluster), **_user_fields(user, cluster.body))
    except ConfigError as exc:
        raise ConfigError(f"{where}: context {name!r}: {exc}") from None


def _read_yaml(path: Path) -> Mapping[str, Any]:
    try:
        loaded = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(f"kubeconfig {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"kubeconfig {path}: not valid YAML: {exc}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"kubeconfig {path}: not a kubeconfig (a YAML mapping was expected)")
    return loaded


def _merge(merged: _Merged, path: Path, document: Mapping[str, Any]) -> None:
    merged.read += 1
    if not merged.current_context:
        merged.current_context = str(document.get("current-context") or "")
    base = path.resolve().parent
    for section, body_key in _SECTION_BODIES.items():
        entries = document.get(section) or []
        if not isinstance(entries, list):
            raise ConfigError(f"kubeconfig {path}: {section} is not a list")
        for entry in entries:
            if not isinstance(entry, dict) or not entry.get("name"):
                raise ConfigError(f"kubeconfig {path}: an entry of {section} has no name")
            body = entry.get(body_key) or {}
            if not isinstance(body, dict):
                raise ConfigError(f"kubeconfig {path}: {section} {entry['name']!r}: not a mapping")
            merged.sections[section].setdefault(str(entry["name"]), _Named(body, base))


def _cluster_fields(cluster: _Named) -> dict[str, Any]:
    body = cluster.body
    if not body.get("server"):
        raise ConfigError("the cluster has no server")
    ca_data = _decoded(body, "certificate-authority-data")
    return {
        "server": str(body["server"]),
        "ca_data": ca_data,
        "ca_file": None if ca_data else _file(body, "certificate-authority", cluster.base),
        "insecure_skip_tls_verify": bool(body.get("insecure-skip-tls-verify", False)),
        "tls_server_name": body.get("tls-server-name") or None,
        "proxy_url": body.get("proxy-url") or None,
    }


UNSUPPORTED_USER_FIELDS = {
    "auth-provider": "auth-provider is not supported: use an exec credential plugin instead "
    "(e.g. gke-gcloud-auth-plugin, kubelogin, aws eks get-token)",
    "username": "basic auth (username/password) is not supported: use a token, a client "
    "certificate or an exec credential plugin instead",
    "password": "basic auth (username/password) is not supported: use a token, a client "
    "certificate or an exec credential plugin instead",
    "as": "impersonation (as) is not supported: use the impersonated identity's own credentials",
    "as-groups": "impersonation (as-groups) is not supported",
    "as-uid": "impersonation (as-uid) is not supported",
    "as-user-extra": "impersonation (as-user-extra) is not supported",
}


def _user_fields(user: _Named, cluster: Mapping[str, Any]) -> dict[str, Any]:
    body = user.body
    for field, problem in UNSUPPORTED_USER_FIELDS.items():
        if body.get(field):
            raise ConfigError(problem)
    cert_data, key_data = _decoded(body, "client-certificate-data"), _decoded(body, "client-key-data")
    token = str(body["token"]) if body.get("token") else None
    token_file = None if token else _file(body, "tokenFile", user.base)
    if token_file:
        _must_read(Path(token_file), "tokenFile")
    return {
        "cert_data": cert_data,
        "key_data": key_data,
        "cert_file": None if cert_data else _file(body, "client-certificate", user.base),
        "key_file": None if key_data else _file(body, "client-key", user.base),
        "token": token,
        "token_file": token_file,
        "exec_plugin": _exec_plugin(body["exec"], user.base, cluster) if body.get("exec") else None,
    }


def _exec_plugin(spec: Any, base: Path, cluster: Mapping[str, Any]) -> ExecPlugin:
    if not isinstance(spec, dict) or not spec.get("command"):
        raise ConfigError("exec: no command")
    api_version = spec.get("apiVersion")
    if api_version not in EXEC_API_VERSIONS:
        raise ConfigError(f"exec: apiVersion {api_version!r} is not one of {', '.join(EXEC_API_VERSIONS)}")
    if spec.get("interactiveMode") == "Always":
        raise ConfigError("exec: interactiveMode Always needs a terminal; plugins run non-interactively")
    command = str(spec["command"])
    if os.sep in command:  # kubectl: a path is relative to the kubeconfig, a bare name is looked up in PATH
        command = str(base / command)
    env = spec.get("env") or []
    if not all(isinstance(e, dict) and e.get("name") for e in env):
        raise ConfigError("exec: every env entry needs a name and a value")
    extensions = {
        e.get("name"): e.get("extension") for e in cluster.get("extensions") or [] if isinstance(e, dict)
    }
    return ExecPlugin(
        command=command,
        api_version=api_version,
        args=tuple(str(arg) for arg in spec.get("args") or ()),
        env=tuple((str(e["name"]), str(e.get("value", ""))) for e in env),
        install_hint=str(spec.get("installHint") or ""),
        provide_cluster_info=bool(spec.get("provideClusterInfo", False)),
        cluster_config=extensions.get(EXEC_EXTENSION),
    )


def _decoded(body: Mapping[str, Any], field: str) -> bytes | None:
    if not body.get(field):
        return None
    try:
        return base64.b64decode(str(body[field]), validate=True)
    except binascii.Error:
        raise ConfigError(f"{field} is not valid base64") from None


def _file(body: Mapping[str, Any], field: str, base: Path) -> str | None:
    """The path in field, relative to the kubeconfig holding it, which must be readable."""
    if not body.get(field):
        return None
    path = base / str(body[field])
    _must_read(path, field)
    return str(path)


def _must_read(path: Path, what: str) -> None:
    try:
        path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{what} {path}: {exc.strerror or exc}") from None
