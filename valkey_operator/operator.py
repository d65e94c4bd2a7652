"""Wire the manager and the operator's controllers, and run until SIGTERM."""

from __future__ import annotations

import asyncio
import signal

import structlog
from prometheus_client import disable_created_metrics

import controllers
from controllers.options import ControllerOptions
from valkey_operator.core.leaderelection import LeadershipLost
from valkey_operator.core.logging import configure_logging
from valkey_operator.core.manager import LeaderElectionConfig, Manager
from valkey_operator.core.restconfig import RestConfig, load_config
from valkey_operator.objectstore import EndpointPolicy
from valkey_operator.operator_config import ConfigMapUnreadable, OperatorConfig, read_operator_config
from valkey_operator.settings import Settings
from valkey_operator.validation import InvalidValue, fail

log = structlog.get_logger(__name__)

FIELD_MANAGER = "valkey-operator"


def build_manager(settings: Settings, rest_config: RestConfig) -> Manager:
    leader_election = None
    if settings.leader_elect and settings.leader_election_namespace:
        leader_election = LeaderElectionConfig(
            settings.leader_election_id, settings.leader_election_namespace
        )
    return Manager(
        rest_config,
        field_manager=FIELD_MANAGER,
        label_selectors=controllers.CACHE_LABEL_SELECTORS,
        metadata_transforms=controllers.CACHE_METADATA_TRANSFORMS,
        namespace=settings.namespaces,
        metrics_bind_address=settings.metrics_bind_address,
        metrics_secure=settings.metrics_secure,
        health_probe_bind_address=settings.health_probe_bind_address,
        leader_election=leader_election,
    )


def controller_options(settings: Settings, operator_config: OperatorConfig) -> ControllerOptions:
    return ControllerOptions(
        default_zone_spread=operator_config.default_zone_spread,
        max_concurrent_rollouts=operator_config.max_concurrent_rollouts,
        secret_sync_seconds=operator_config.secret_sync_seconds,
        tls_expiry_warning_days=operator_config.tls_expiry_warning_days,
        node_networks=settings.node_networks,
        backup_endpoints=EndpointPolicy(settings.backup_endpoint_allowed_networks),
        cluster_domain=settings.cluster_domain,
        operator_image=settings.operator_image,
        operator_namespace=settings.operator_namespace,
        operator_pod_labels=settings.operator_pod_labels,
        **({"exporter_image": settings.exporter_image} if settings.exporter_image else {}),
        steady_probe_max_seconds=float(settings.steady_probe_max_seconds),
    )


async def run(settings: Settings) -> int:
    """Read the ConfigMap, then run the manager until SIGTERM: 0 after a graceful stop, 1 after lost
    leadership or an unreadable ConfigMap, 2 for an invalid ConfigMap or kubeconfig."""
    configure_logging(settings.log_format, settings.log_level)
    disable_created_metrics()  # type: ignore[no-untyped-call]  # controller-runtime has no *_created series
    try:  # --kubeconfig, else $KUBECONFIG, else the in-cluster service account, else ~/.kube/config
        manager = build_manager(settings, await load_config(settings.kubeconfig))
    except Exception as exc:  # a broken kubeconfig or service account: one line, not a traceback
        fail(f"cannot load the Kubernetes client configuration: {type(exc).__name__}: {exc}")
        return 2
    async with manager.rest:  # one session for the ConfigMap read and the manager's whole run
        try:
            operator_config = await read_operator_config(manager.client, settings.operator_namespace)
        except InvalidValue as exc:
            fail(str(exc))
            return 2
        except ConfigMapUnreadable as exc:
            fail(str(exc))
            return 1
        options = controller_options(settings, operator_config)
        controllers.setup_all(manager, settings.workers, options)
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, manager.stop)
        log.info(
            "starting manager",
            namespaces=",".join(settings.namespaces) or "<all>",
            leader_elect=settings.leader_elect,
            operator_namespace=settings.operator_namespace or "<unknown: ConfigMap not read>",
            default_zone_spread=options.default_zone_spread.value,
            max_concurrent_rollouts=options.max_concurrent_rollouts,
            node_networks=",".join(str(network) for network in options.node_networks),
            backup_endpoint_allowed_networks=",".join(str(n) for n in options.backup_endpoints.allowed)
            or "<none: loopback and link-local endpoints are refused>",
            cluster_domain=options.cluster_domain,
            operator_image=options.operator_image or "<unknown: restores are held>",
        )
        try:
            await manager.run()
        except LeadershipLost as exc:
            log.error("leadership lost; exiting", error=str(exc))
            return 1
    return 0
