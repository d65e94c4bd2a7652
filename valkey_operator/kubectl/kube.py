"""Connecting as kubectl does: --kubeconfig, else $KUBECONFIG, else ~/.kube/config (else the pod's
service account); --context; the namespace from -n, else the context's, else "default".

Auth, TLS and exec credential plugins come from kubernetes-asyncio's kubeconfig loader; requests go
through the core's JSON client (plain dicts, no generated models).
"""

from __future__ import annotations

import os
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import attrs
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config

from valkey_operator.core.client import Client
from valkey_operator.core.rest import RestClient

FIELD_MANAGER = "kubectl-valkey"
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class UsageError(Exception):
    """Bad input or configuration the person can fix: printed as one line, exit status 2."""


class CommandFailed(Exception):
    """The request was made and did not succeed (refused, failed, not found): exit status 1."""


class TimedOut(Exception):
    """A --wait ran out of time; the request may still complete: exit status 3."""


@attrs.frozen
class Target:
    """Where the person points: kubeconfig file, context and namespace flags (None: not given)."""

    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None


def _config_files(kubeconfig: str | None) -> list[str]:
    if kubeconfig:
        return [kubeconfig]
    listed = os.environ.get("KUBECONFIG", "")
    if listed:
        return [path for path in listed.split(os.pathsep) if path]
    return [str(Path.home() / ".kube" / "config")]


def context_namespace(
    contexts: list[dict[str, Any]], current: dict[str, Any] | None, wanted: str | None
) -> str:
    """The namespace of the context in use (kubectl's default for -n); "default" when it names none."""
    if wanted is not None:
        matching = [context for context in contexts if context.get("name") == wanted]
        if not matching:
            names = ", ".join(sorted(str(context.get("name")) for context in contexts)) or "none"
            raise UsageError(f"context {wanted!r} is not in the kubeconfig (its contexts: {names})")
        current = matching[0]
    namespace = ((current or {}).get("context") or {}).get("namespace")
    return str(namespace) if namespace else "default"


def _existing(paths: list[str]) -> list[str]:
    return [path for path in paths if Path(path).expanduser().is_file()]


class Session:
    """One connection: `kube` (the core's JSON client) and `namespace` resolved as kubectl does.
    Use as `async with await Session.open(target) as session:`."""

    def __init__(self, api_client: k8s.ApiClient, namespace: str) -> None:
        self.api_client = api_client
        self.rest = RestClient(api_client)
        self.kube = Client(self.rest, FIELD_MANAGER)
        self.namespace = namespace

    @classmethod
    async def open(cls, target: Target) -> Session:
        files = _config_files(target.kubeconfig)
        present = _existing(files)
        if not present:
            if target.kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
                return cls._in_cluster(target)
            raise UsageError(
                f"no kubeconfig at {os.pathsep.join(files)}: pass --kubeconfig, set KUBECONFIG, "
                "or create ~/.kube/config"
            )
        joined = os.pathsep.join(present)
        try:
            contexts, current = k8s_config.list_kube_config_contexts(joined)
            namespace = target.namespace or context_namespace(contexts, current, target.context)
            configuration = k8s.Configuration()
            await k8s_config.load_kube_config(
                config_file=joined, context=target.context, client_configuration=configuration
            )
        except UsageError:
            raise
        except Exception as exc:  # a broken kubeconfig: one line saying which file, not a traceback
            raise UsageError(f"kubeconfig {joined}: {type(exc).__name__}: {exc}") from None
        return cls(k8s.ApiClient(configuration=configuration), namespace)

    @classmethod
    def _in_cluster(cls, target: Target) -> Session:
        configuration = k8s.Configuration()
        k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        namespace = target.namespace
        if namespace is None:
            try:
                namespace = SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or "default"
            except OSError:
                namespace = "default"
        return cls(k8s.ApiClient(configuration=configuration), namespace)

    async def close(self) -> None:
        await self.api_client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.close()
