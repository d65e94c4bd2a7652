"""Wire the manager and the operator's controllers, and run until SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import structlog
from kubernetes_asyncio import client, config
from prometheus_client import disable_created_metrics

import controllers
from valkey_operator.core.leaderelection import LeadershipLost
from valkey_operator.core.logging import configure_logging
from valkey_operator.core.manager import LeaderElectionConfig, Manager
from valkey_operator.settings import Settings

log = structlog.get_logger(__name__)

FIELD_MANAGER = "valkey-operator"
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


async def load_api_client(kubeconfig: str | None) -> client.ApiClient:
    """--kubeconfig, else $KUBECONFIG, else the in-cluster service account."""
    configuration = client.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG")
    if path:
        await config.load_kube_config(config_file=path, client_configuration=configuration)
    else:
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    return client.ApiClient(configuration)


def operator_namespace() -> str | None:
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    if SERVICE_ACCOUNT_NAMESPACE.exists():
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
    return None


class ConfigurationError(Exception):
    """Invalid settings: the operator stops at start with this message."""


def build_manager(settings: Settings, api_client: client.ApiClient) -> Manager:
    leader_election = None
    if settings.leader_elect:
        namespace = settings.leader_election_namespace or operator_namespace()
        if not namespace:
            raise ConfigurationError("--leader-elect needs --leader-election-namespace outside a cluster")
        leader_election = LeaderElectionConfig(settings.leader_election_id, namespace)
    return Manager(
        api_client,
        field_manager=FIELD_MANAGER,
        namespace=settings.namespace,
        metrics_bind_address=settings.metrics_bind_address,
        health_probe_bind_address=settings.health_probe_bind_address,
        leader_election=leader_election,
    )


async def run(settings: Settings) -> int:
    configure_logging(settings.log_format, settings.log_level)
    disable_created_metrics()  # type: ignore[no-untyped-call]  # controller-runtime has no *_created series
    async with await load_api_client(settings.kubeconfig) as api_client:
        try:
            manager = build_manager(settings, api_client)
        except ConfigurationError as exc:
            log.error("invalid configuration", error=str(exc))
            return 2
        controllers.setup_all(manager, settings.workers)
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, manager.stop)
        log.info(
            "starting manager", namespace=settings.namespace or "<all>", leader_elect=settings.leader_elect
        )
        try:
            await manager.run()
        except LeadershipLost as exc:
            log.error("leadership lost; exiting", error=str(exc))
            return 1
    return 0
