"""configmap-protection: a ConfigMap that pods mount cannot be deleted from under them.

A ConfigMap labelled `protection.example.com/enabled: "true"` carries a finalizer while any pod in
its namespace mounts it, so `kubectl delete` leaves it Terminating until the last such pod is gone
(the pattern of Kubernetes' own PVC protection). An index maps each ConfigMap to the pods using it.
Public API only.
"""

import argparse
import asyncio
import signal
from typing import Any

from valkey_operator.core import (
    CONFIG_MAPS,
    PODS,
    Manager,
    Request,
    Result,
    add_finalizer,
    build_controller,
    configure_logging,
    load_config,
    remove_finalizer,
)

ENABLED_LABEL = "protection.example.com/enabled"
FINALIZER = "protection.example.com/in-use"
PODS_BY_CONFIGMAP = "pods-by-configmap"
Obj = dict[str, Any]


def configmaps_mounted(pod: Obj) -> list[str]:
    """Index function: namespace/name of every ConfigMap a pod mounts (directly or projected)."""
    namespace, names = pod["metadata"]["namespace"], set()
    for volume in pod.get("spec", {}).get("volumes") or []:
        names.add((volume.get("configMap") or {}).get("name"))
        for source in (volume.get("projected") or {}).get("sources") or []:
            names.add((source.get("configMap") or {}).get("name"))
    return sorted(f"{namespace}/{name}" for name in names if name)


class ProtectionReconciler:
    def __init__(self, manager: Manager) -> None:
        self.client, self.cache = manager.client, manager.cache

    async def reconcile(self, request: Request) -> Result:
        """Level-based: a write from a stale cache gets 409 Conflict, raises, and is retried."""
        configmap = self.cache.get(CONFIG_MAPS, request.name, request.namespace)
        if configmap is None:
            return Result()
        protected = configmap["metadata"].get("labels", {}).get(ENABLED_LABEL) == "true"
        key = f"{request.namespace}/{request.name}"
        if protected and self.cache.by_index(PODS, PODS_BY_CONFIGMAP, key):
            if not configmap["metadata"].get("deletionTimestamp"):
                await add_finalizer(self.client, CONFIG_MAPS, configmap, FINALIZER)
        else:
            await remove_finalizer(self.client, CONFIG_MAPS, configmap, FINALIZER)
        return Result()


def setup(manager: Manager) -> None:
    """Register the index and the controller on manager."""
    manager.informer(PODS).add_indexers({PODS_BY_CONFIGMAP: configmaps_mounted})

    def configmaps_of(pod: Obj) -> list[Request]:
        return [Request(key.split("/")[1], key.split("/")[0]) for key in configmaps_mounted(pod)]

    builder = build_controller(manager, "configmap-protection").for_(CONFIG_MAPS).watches(PODS, configmaps_of)
    builder.complete(ProtectionReconciler(manager))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kubeconfig")
    parser.add_argument("--namespace")
    args = parser.parse_args()
    configure_logging("console")
    config = await load_config(args.kubeconfig)  # --kubeconfig, $KUBECONFIG, in-cluster or ~/.kube/config
    manager = Manager(config, field_manager="configmap-protection", namespace=args.namespace)
    setup(manager)
    for signum in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(signum, manager.stop)
    await manager.run()


if __name__ == "__main__":
    asyncio.run(main())
