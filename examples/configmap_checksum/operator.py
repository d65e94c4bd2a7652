"""Example operator on the public controller core: roll Deployments when their ConfigMap changes.

A Deployment annotated `checksum.example.com/configmap: <name>` gets the
SHA-256 of that ConfigMap's data in its pod template annotation
`checksum.example.com/sha256`, so editing the ConfigMap rolls the Deployment.

It shows the core's moving parts: a primary kind (`for_`), a watched kind
mapped back through a named cache index (`watches`), reads from the shared
cache, a pure decision, one idempotent write.

    python -m examples.configmap_checksum.operator --kubeconfig ~/.kube/config
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import signal
from typing import Any

from kubernetes_asyncio import client, config

from valkey_operator.core import (
    Client,
    Controller,
    LeaderElectionConfig,
    Manager,
    Request,
    Result,
    SharedInformer,
    build_controller,
    configure_logging,
)
from valkey_operator.core.resource import CONFIG_MAPS, DEPLOYMENTS

SOURCE_ANNOTATION = "checksum.example.com/configmap"
CHECKSUM_ANNOTATION = "checksum.example.com/sha256"
DEPLOYMENTS_BY_CONFIGMAP = "deployments-by-configmap"
MISSING = "missing"

Obj = dict[str, Any]


def configmap_key_of(deployment: Obj) -> list[str]:
    """Index function: the namespace/name of the ConfigMap a Deployment follows."""
    metadata = deployment["metadata"]
    source = metadata.get("annotations", {}).get(SOURCE_ANNOTATION)
    return [f"{metadata['namespace']}/{source}"] if source else []


def checksum(configmap: Obj | None) -> str:
    """What the annotation should say; a missing ConfigMap is a state of its own."""
    if configmap is None:
        return MISSING
    content = {"data": configmap.get("data", {}), "binaryData": configmap.get("binaryData", {})}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


class ChecksumReconciler:
    def __init__(self, client: Client, deployments: SharedInformer, configmaps: SharedInformer) -> None:
        self.client = client
        self.deployments = deployments
        self.configmaps = configmaps

    async def reconcile(self, request: Request) -> Result:
        deployment = self.deployments.store.get_by_key(f"{request.namespace}/{request.name}")
        keys = configmap_key_of(deployment) if deployment else []
        if deployment is None or not keys:
            return Result()
        wanted = checksum(self.configmaps.store.get_by_key(keys[0]))
        template = deployment["spec"]["template"].get("metadata", {})
        if template.get("annotations", {}).get(CHECKSUM_ANNOTATION) != wanted:
            patch = {"spec": {"template": {"metadata": {"annotations": {CHECKSUM_ANNOTATION: wanted}}}}}
            await self.client.patch(DEPLOYMENTS, request.name, patch, request.namespace)
        return Result()


def setup(manager: Manager) -> Controller:
    """Register the controller and its index on manager."""
    deployments = manager.informer(DEPLOYMENTS)
    deployments.add_indexers({DEPLOYMENTS_BY_CONFIGMAP: configmap_key_of})
    configmaps = manager.informer(CONFIG_MAPS)

    def deployments_following(configmap: Obj) -> list[Request]:
        metadata = configmap["metadata"]
        key = f"{metadata['namespace']}/{metadata['name']}"
        return [
            Request(d["metadata"]["name"], d["metadata"]["namespace"])
            for d in deployments.store.by_index(DEPLOYMENTS_BY_CONFIGMAP, key)
        ]

    return (
        build_controller(manager, "configmap-checksum")
        .for_(DEPLOYMENTS)
        .watches(CONFIG_MAPS, deployments_following)
        .with_workers(2)
        .complete(ChecksumReconciler(manager.client, deployments, configmaps))
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kubeconfig")
    parser.add_argument("--namespace")
    parser.add_argument("--metrics-bind-address", default="127.0.0.1:8080")
    parser.add_argument("--health-probe-bind-address", default="127.0.0.1:8081")
    parser.add_argument(
        "--leader-election-namespace", help="elect a leader through a Lease in this namespace"
    )
    args = parser.parse_args()
    configure_logging("console")
    configuration = client.Configuration()
    await config.load_kube_config(config_file=args.kubeconfig, client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        manager = Manager(
            api,
            field_manager="configmap-checksum",
            namespace=args.namespace,
            metrics_bind_address=args.metrics_bind_address,
            health_probe_bind_address=args.health_probe_bind_address,
            leader_election=(
                LeaderElectionConfig("configmap-checksum", args.leader_election_namespace)
                if args.leader_election_namespace
                else None
            ),
        )
        setup(manager)
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, manager.stop)
        loop.add_signal_handler(signal.SIGINT, manager.stop)
        await manager.run()


if __name__ == "__main__":
    asyncio.run(main())
