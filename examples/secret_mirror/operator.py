"""secret-mirror: labelled Secrets of one namespace, copied into another and kept equal.

A Secret in the source namespace labelled `mirror.example.com/enabled: "true"` gets a copy of the
same name in the target namespace. Editing it updates the copy; deleting or unlabelling it deletes
the copy, which a finalizer guarantees (an owner reference cannot cross namespaces). A copy edited
or deleted by hand is put back. One replica acts at a time (a Lease). Public API only.
"""

import argparse
import asyncio
import signal
from typing import Any

from valkey_operator.core import (
    SECRETS,
    LeaderElectionConfig,
    Manager,
    Request,
    Result,
    add_finalizer,
    build_controller,
    configure_logging,
    data_changed,
    load_config,
    remove_finalizer,
)

ENABLED_LABEL = "mirror.example.com/enabled"
COPY_OF_LABEL = "mirror.example.com/copy-of"
FINALIZER = "mirror.example.com/copy"
Obj = dict[str, Any]


def copy_of(secret: Obj, target: str) -> Obj:
    """The copy in target: the source's type and data, labelled with the source's name."""
    name = secret["metadata"]["name"]
    metadata = {"name": name, "namespace": target, "labels": {COPY_OF_LABEL: name}}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": metadata, **pick(secret, "type", "data")}


def pick(obj: Obj, *keys: str) -> Obj:
    return {key: obj[key] for key in keys if key in obj}


class MirrorReconciler:
    def __init__(self, manager: Manager, source: str, target: str) -> None:
        self.client, self.cache, self.source, self.target = manager.client, manager.cache, source, target

    async def reconcile(self, request: Request) -> Result:
        """Level-based: copy while labelled and alive, else delete the copy, then let the source go."""
        secret = self.cache.get(SECRETS, request.name, self.source)  # None once it is gone
        meta = secret["metadata"] if secret else {}
        if meta.get("labels", {}).get(ENABLED_LABEL) == "true" and "deletionTimestamp" not in meta:
            assert secret is not None
            secret = await add_finalizer(self.client, SECRETS, secret, FINALIZER)
            await self.client.apply(SECRETS, copy_of(secret, self.target))
            return Result()
        if self.cache.get(SECRETS, request.name, self.target) is not None:  # only our copies are cached
            await self.client.delete(SECRETS, request.name, self.target)  # gone already: success
        if secret is not None:
            await remove_finalizer(self.client, SECRETS, secret, FINALIZER)  # gone already: success
        return Result()


def setup(manager: Manager, source: str, target: str) -> None:
    """One controller: source Secrets (data_changed: a Secret has no generation) and the copies."""

    def source_of(copy: Obj) -> list[Request]:
        return [Request(copy["metadata"]["labels"][COPY_OF_LABEL], source)]

    builder = build_controller(manager, "secret-mirror").for_(
        SECRETS, namespace=source, update_filter=data_changed
    )
    builder = builder.watches(SECRETS, source_of, namespace=target, label_selector=COPY_OF_LABEL)
    builder.complete(MirrorReconciler(manager, source, target))


def leader_election(namespace: str) -> LeaderElectionConfig:
    return LeaderElectionConfig("secret-mirror", namespace)  # identity: $POD_NAME or host, per process


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kubeconfig")
    parser.add_argument("--source", required=True)
    parser.add_argument("--target", required=True)
    args = parser.parse_args()
    configure_logging("console")
    config = await load_config(args.kubeconfig)  # --kubeconfig, $KUBECONFIG, in-cluster or ~/.kube/config
    manager = Manager(config, field_manager="secret-mirror", leader_election=leader_election(args.target))
    setup(manager, args.source, args.target)
    for signum in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(signum, manager.stop)
    await manager.run()


if __name__ == "__main__":
    asyncio.run(main())
