"""Where the API server is and how to prove who we are: controller-runtime's `GetConfig`, done by
kubernetes-asyncio's own config loaders, so the core, the test bed and an embedder's ApiClient share
one auth stack (one loader, one place that knows certificates and tokens).

`load_config` looks where controller-runtime does, in its order: an explicit kubeconfig, else
$KUBECONFIG (a list merged as kubectl merges it), else the in-cluster service account, else
~/.kube/config. It returns kubernetes-asyncio's `Configuration` (exported as `RestConfig`) with a
`TokenRefresh` as its `refresh_api_key_hook`: kubernetes-asyncio asks the hook before each request,
and the core's transport calls `expire()` on a 401, so a rotated token file is read again and an exec
plugin run again at once rather than a minute later.

kubernetes-asyncio is imported when a configuration is loaded, not with the core, and then only its
loaders (kubeloaders): its client package's API and model classes cost about 32 MiB and 0.13 s of
CPU that the core never uses (it has its own transport), and that an embedder passing its own
ApiClient has paid already.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from valkey_operator.core.clock import Clock, RealClock, within
from valkey_operator.core.kubeloaders import import_loaders

if TYPE_CHECKING:
    from kubernetes_asyncio.client.configuration import Configuration as RestConfig
    from kubernetes_asyncio.config.kube_config import KubeConfigLoader

__all__ = [
    "ConfigError",
    "CredentialsUnavailable",
    "RestConfig",
    "TokenRefresh",
    "from_kubeconfig",
    "in_cluster_config",
    "load_config",
]

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TOKEN_PERIOD = 60.0
"""Seconds a token read from a file (or an OIDC id-token checked) is used before it is read again
(client-go's period; the kubelet rotates projected tokens well before they expire)."""
REFRESH_TIMEOUT = 60.0
"""Seconds one refresh may take: a hung exec plugin must not stall every request for good."""
IMPERSONATION = ("as", "as-groups", "as-uid", "as-user-extra")
"""kubeconfig user fields kubernetes-asyncio would silently ignore; acting as the wrong identity
is worse than refusing to start."""


class ConfigError(ValueError):
    """The client configuration cannot be used: says which file or setting, and what to do instead."""


class CredentialsUnavailable(OSError):
    """No token right now (an unreadable token file, an exec plugin failing); the request got no
    answer and is retried like one."""


def __getattr__(name: str) -> Any:
    """`RestConfig` is kubernetes-asyncio's Configuration, imported only when asked for."""
    if name == "RestConfig":
        import_loaders()
        from kubernetes_asyncio.client.configuration import Configuration

        return Configuration
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class TokenRefresh:
    """A Configuration's `refresh_api_key_hook`: calls `reload` (a kubernetes-asyncio loader setting
    the Configuration's token) once `period` seconds of the clock have passed since the last load
    (None: never for age alone), when `expiring()` says so, or after `expire()` (the API server
    answered 401 to the token in hand)."""

    def __init__(
        self,
        reload: Callable[[RestConfig], Awaitable[None]],
        clock: Clock,
        period: float | None = TOKEN_PERIOD,
        expiring: Callable[[], bool] = lambda: False,
    ) -> None:
        self._reload = reload
        self._clock = clock
        self._period = period
        self._expiring = expiring
        self._loaded_at = clock.now()
        self._expired = False
        self._lock = asyncio.Lock()

    def expire(self) -> None:
        """The next request reloads its token first."""
        self._expired = True

    def _stale(self) -> bool:
        aged = self._period is not None and self._clock.now() - self._loaded_at >= self._period
        return self._expired or aged or self._expiring()

    async def __call__(self, configuration: RestConfig) -> None:
        if not self._stale():
            return
        async with self._lock:  # one reload, however many requests wait for it
            if not self._stale():
                return
            try:
                await within(self._clock, REFRESH_TIMEOUT, self._reload(configuration))
            except Exception as exc:  # ConfigException, OSError, a plugin's bad output, a time-out
                raise CredentialsUnavailable(f"refreshing the token: {type(exc).__name__}: {exc}") from exc
            self._loaded_at = self._clock.now()
            self._expired = False


async def load_config(
    kubeconfig: str | None = None,
    *,
    context: str | None = None,
    service_account_dir: Path = SERVICE_ACCOUNT_DIR,
    clock: Clock | None = None,
) -> RestConfig:
    """kubeconfig, else $KUBECONFIG, else in-cluster, else ~/.kube/config (controller-runtime's order).

    `context` picks a kubeconfig context other than current-context; in-cluster has none. Runs a
    kubeconfig's exec plugin once (kubernetes-asyncio loads the token eagerly); never contacts the
    API server. `clock` times the token's refreshes (tests pass a FakeClock).
    """
    clock = clock or RealClock()
    if kubeconfig:
        return await from_kubeconfig(kubeconfig, context, clock)
    listed = os.environ.get("KUBECONFIG", "")
    if listed:
        return await from_kubeconfig(listed, context, clock)
    home = Path(os.environ.get("HOME") or Path.home()) / ".kube" / "config"
    try:
        return in_cluster_config(service_account_dir, clock)
    except ConfigError:
        if not home.is_file():
            raise
    return await from_kubeconfig(str(home), context, clock)


def in_cluster_config(
    service_account_dir: Path = SERVICE_ACCOUNT_DIR, clock: Clock | None = None
) -> RestConfig:
    """The pod's service account: KUBERNETES_SERVICE_HOST/PORT, its token file and ca.crt, the token
    read again once a minute (kubernetes-asyncio's InClusterConfigLoader) and after a 401."""
    import_loaders()
    from kubernetes_asyncio.client.configuration import Configuration
    from kubernetes_asyncio.config.config_exception import ConfigException
    from kubernetes_asyncio.config.incluster_config import InClusterConfigLoader

    if not os.environ.get("KUBERNETES_SERVICE_HOST") or not os.environ.get("KUBERNETES_SERVICE_PORT"):
        raise ConfigError(
            "no Kubernetes configuration: pass a kubeconfig, set KUBECONFIG, run in a pod "
            "(KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are unset) or create ~/.kube/config"
        )
    loader = InClusterConfigLoader(
        token_filename=str(service_account_dir / "token"), cert_filename=str(service_account_dir / "ca.crt")
    )
    configuration = Configuration()
    try:
        loader.load_and_set(configuration)
    except (ConfigException, OSError) as exc:
        raise ConfigError(f"in-cluster service account {service_account_dir}: {exc}") from None
    reread = configuration.refresh_api_key_hook  # the loader's own, reading the file when it is due
    assert callable(reread)

    async def reload(configuration: RestConfig) -> None:
        loader.token_expires_at = datetime.datetime.min  # due now: our clock decided it is
        reread(configuration)

    configuration.refresh_api_key_hook = TokenRefresh(reload, clock or RealClock())
    return configuration


async def from_kubeconfig(paths: str, context: str | None = None, clock: Clock | None = None) -> RestConfig:
    """context (default: current-context) of the kubeconfig files in paths (os.pathsep-separated,
    merged as kubectl merges them: the first file naming an entry wins), loaded by kubernetes-asyncio:
    client certificates, a token or tokenFile, an exec plugin, the oidc and gcp auth-providers, basic
    auth. Never writes to the files."""
    import_loaders()
    from kubernetes_asyncio.client.configuration import Configuration
    from kubernetes_asyncio.config.config_exception import ConfigException
    from kubernetes_asyncio.config.kube_config import load_kube_config

    existing = _existing(paths)
    if not existing:
        raise ConfigError(f"kubeconfig {paths}: no such file")
    where = f"kubeconfig {os.pathsep.join(existing)}"
    configuration = Configuration()
    try:
        loader = await load_kube_config(
            os.pathsep.join(existing), context, client_configuration=configuration, persist_config=False
        )
    except (ConfigException, OSError, ValueError, KeyError, TypeError, AssertionError) as exc:
        problem = str(exc) or (f"context {context!r} not found" if context else "no usable current-context")
        raise ConfigError(f"{where}: {type(exc).__name__}: {problem}") from None
    user = loader._user  # kubernetes-asyncio keeps the chosen user here, and offers it nowhere else
    for field in IMPERSONATION:
        if user is not None and field in user:
            raise ConfigError(f"{where}: impersonation ({field}) is not supported: use that identity's own")
    configuration.refresh_api_key_hook = _kubeconfig_refresh(loader, clock or RealClock())
    return configuration


def _existing(paths: str) -> list[str]:
    """The files of a $KUBECONFIG-style list that exist (kubectl skips the others)."""
    return [path for path in paths.split(os.pathsep) if path and Path(path).is_file()]


def _kubeconfig_refresh(loader: KubeConfigLoader, clock: Clock) -> TokenRefresh:
    """Load the user's credentials again (the loader re-reads a tokenFile, refreshes an expired oidc
    id-token, runs the exec plugin) once a minute, when an exec plugin's token expires (five minutes
    early, kubernetes-asyncio's skew) or after a 401; an exec plugin without an expiry runs again only
    after a 401."""
    from kubernetes_asyncio.config.kube_config import _is_expired

    uses_plugin = loader._user is not None and "exec" in loader._user and loader.provider is None

    def expiring() -> bool:
        expiry = getattr(loader, "exec_plugin_expiry", None)
        return expiry is not None and bool(_is_expired(expiry))

    async def reload(configuration: RestConfig) -> None:
        with contextlib.suppress(AttributeError):  # else the loader keeps an unexpired plugin token
            del loader.exec_plugin_expiry
        await loader.load_and_set(configuration)

    if uses_plugin:
        return TokenRefresh(reload, clock, period=None, expiring=expiring)
    return TokenRefresh(reload, clock)
