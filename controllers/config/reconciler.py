"""ValkeyConfig reconciler: resolve the chain into status, protect while referenced."""

from __future__ import annotations

from typing import Any

import structlog

from controllers.indexes import ReferenceIndex
from controllers.protection import reconcile_protection
from controllers.shared.config_resolve import ResolutionFailure, ResolvedConfig, resolve
from controllers.status import status_patch
from valkey_operator.api.resources import (
    CONFIG_PROTECTION_FINALIZER,
    VALKEY_CLUSTERS,
    VALKEY_CONFIGS,
    VALKEY_IMAGES,
)
from valkey_operator.core.builder import build_controller
from valkey_operator.core.client import Client
from valkey_operator.core.conditions import find_condition, set_condition
from valkey_operator.core.controller import Controller
from valkey_operator.core.events import NORMAL, WARNING, EventRecorder
from valkey_operator.core.manager import Manager
from valkey_operator.core.reconcile import Request, Result
from valkey_operator.core.rest import Obj

log = structlog.get_logger(__name__)

RESOLVED = "Resolved"
READY = "Ready"
"""Mirrors Resolved, for kstatus and `kubectl wait --for=condition=Ready` (SPEC 1.8)."""


def desired_status(config: Obj, outcome: ResolvedConfig | ResolutionFailure) -> Obj:
    """The status this pass observed (pure); conditions keep their transition times."""
    current = config.get("status", {})
    generation = config["metadata"].get("generation")
    status: dict[str, Any] = {"observedGeneration": generation}
    if isinstance(outcome, ResolvedConfig):
        status["resolvedImage"] = outcome.image.to_status()
        status["settingsHash"] = outcome.settings_hash
        if outcome.persistence.enabled:
            status["persistence"] = outcome.persistence.to_json()
        chain = " -> ".join(outcome.chain)
        message = f"image {outcome.image.reference} (version {outcome.image.version}) via {chain}"
        conditions = set_condition(current.get("conditions"), RESOLVED, True, "Resolved", message, generation)
        conditions = set_condition(conditions, READY, True, "Resolved", message, generation)
    else:
        conditions = set_condition(
            current.get("conditions"), RESOLVED, False, outcome.reason, outcome.message, generation
        )
        # kstatus reads Ready: InProgress until the chain resolves (a missing base may yet appear).
        conditions = set_condition(conditions, READY, False, outcome.reason, outcome.message, generation)
    status["conditions"] = conditions
    return status


class ConfigReconciler:
    def __init__(self, client: Client, index: ReferenceIndex, events: EventRecorder) -> None:
        self.client = client
        self.index = index
        self.events = events

    async def reconcile(self, request: Request) -> Result:
        config = self.index.config(request.name)
        if config is None:
            return Result()
        referenced = self.index.config_needed(request.name)
        config = await reconcile_protection(
            self.client, VALKEY_CONFIGS, config, CONFIG_PROTECTION_FINALIZER, referenced
        )
        if config is None or ("deletionTimestamp" in config["metadata"] and not referenced):
            return Result()  # going away now; no status to write
        outcome = resolve(request.name, self.index.config, self.index.image)
        current = config.get("status", {})
        desired = desired_status(config, outcome)
        patch = status_patch(current, desired)
        if patch is not None:
            await self.client.patch_status(VALKEY_CONFIGS, request.name, patch)
            await self._record_transition(config, current, desired)
        return Result()

    async def _record_transition(self, config: Obj, current: Obj, desired: Obj) -> None:
        before = find_condition(current.get("conditions"), RESOLVED)
        after = find_condition(desired.get("conditions"), RESOLVED)
        assert after is not None
        if before is not None and (before["status"], before["reason"]) == (after["status"], after["reason"]):
            return
        if after["status"] == "True":
            await self.events.event(config, NORMAL, "Resolved", after["message"])
        else:
            await self.events.event(config, WARNING, after["reason"], after["message"])


def setup(manager: Manager, index: ReferenceIndex, workers: int) -> Controller:
    """Reconcile a config when it, its chain, its image, or its referrers change; the whole chain
    above a changed config or cluster, whose protection depends on it (config_needed)."""

    def config_fanout(config: Obj) -> list[Request]:
        name = config["metadata"]["name"]
        base = config.get("spec", {}).get("baseRef")
        names = {name, *index.descendants([name]), *index.ancestors(base)}
        return [Request(n) for n in sorted(names)]

    def configs_of_image(image: Obj) -> list[Request]:
        direct = index.configs_using_image(image["metadata"]["name"])
        return [Request(n) for n in sorted({*direct, *index.descendants(direct)})]

    def config_of_cluster(cluster: Obj) -> list[Request]:
        return [Request(name) for name in index.ancestors(cluster.get("spec", {}).get("configRef"))]

    return (
        build_controller(manager, "valkeyconfig")
        .for_(VALKEY_CONFIGS)
        .watches(VALKEY_CONFIGS, config_fanout)
        .watches(VALKEY_IMAGES, configs_of_image)
        .watches(VALKEY_CLUSTERS, config_of_cluster, namespace=index.clusters.namespaces)
        .with_workers(workers)
        .complete(ConfigReconciler(manager.client, index, manager.event_recorder("valkeyconfig")))
    )
