"""configmap-checksum: a Deployment naming a ConfigMap (annotation checksum.example.com/configmap) gets
the SHA-256 of its data in the pod template, so editing the ConfigMap replaces the pods."""

import argparse
import asyncio
import hashlib
import json
import signal
from typing import Any

from valkey_operator.core import (
    CONFIG_MAPS,
    DEPLOYMENTS,
    LeaderElectionConfig,
    Manager,
    Request,
    Result,
    build_controller,
    configure_logging,
    load_config,
)

SOURCE_ANNOTATION = "checksum.example.com/configmap"
CHECKSUM_ANNOTATION = "checksum.example.com/sha256"
BY_CONFIGMAP = "deployments-by-configmap"
MISSING = "missing"
Obj = dict[str, Any]


def configmap_key_of(deployment: Obj) -> list[str]:
    """Index function: the namespace/name of the ConfigMap a Deployment follows."""
    metadata = deployment["metadata"]
    source = metadata.get("annotations", {}).get(SOURCE_ANNOTATION)
    return [f"{metadata['namespace']}/{source}"] if source else []


def checksum(configmap: Obj | None) -> str:
    """What the annotation should say; a missing ConfigMap is a state of its own."""
    content = json.dumps({key: (configmap or {}).get(key) for key in ("data", "binaryData")}, sort_keys=True)
    return hashlib.sha256(content.encode()).hexdigest() if configmap else MISSING


class ChecksumReconciler:
    def __init__(self, manager: Manager) -> None:
        self.client, self.cache = manager.client, manager.cache

    async def reconcile(self, request: Request) -> Result:
        deployment = self.cache.get(DEPLOYMENTS, request.name, request.namespace)
        keys = configmap_key_of(deployment) if deployment else []
        if deployment is None or not keys:
            return Result()
        wanted = checksum(self.cache.get(CONFIG_MAPS, keys[0].split("/")[1], request.namespace))
        template = deployment["spec"]["template"].get("metadata", {})
        if template.get("annotations", {}).get(CHECKSUM_ANNOTATION) != wanted:
            patch = {"spec": {"template": {"metadata": {"annotations": {CHECKSUM_ANNOTATION: wanted}}}}}
            await self.client.patch(DEPLOYMENTS, request.name, patch, request.namespace)
        return Result()


def setup(manager: Manager) -> None:
    manager.informer(DEPLOYMENTS).add_indexers({BY_CONFIGMAP: configmap_key_of})

    def deployments_following(configmap: Obj) -> list[Request]:
        key = f"{configmap['metadata']['namespace']}/{configmap['metadata']['name']}"
        found = manager.cache.by_index(DEPLOYMENTS, BY_CONFIGMAP, key)
        return [Request(d["metadata"]["name"], d["metadata"]["namespace"]) for d in found]

    builder = build_controller(manager, "configmap-checksum").for_(DEPLOYMENTS).with_workers(2)
    builder.watches(CONFIG_MAPS, deployments_following).complete(ChecksumReconciler(manager))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kubeconfig")
    parser.add_argument("--namespace")
    parser.add_argument("--leader-election-namespace", help="elect a leader through a Lease here")
    parser.add_argument("--metrics-bind-address", default="127.0.0.1:8080")
    parser.add_argument("--health-probe-bind-address", default="127.0.0.1:8081")
    args = parser.parse_args()
    configure_logging("console")
    lease = args.leader_election_namespace
    manager = Manager(
        await load_config(args.kubeconfig),  # the manager's own session, closed when run() ends
        field_manager="configmap-checksum",
        namespace=args.namespace,
        metrics_bind_address=args.metrics_bind_address,
        health_probe_bind_address=args.health_probe_bind_address,
        leader_election=LeaderElectionConfig("configmap-checksum", lease) if lease else None,
    )
    setup(manager)
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, manager.stop)
    await manager.run()


if __name__ == "__main__":
    asyncio.run(main())
