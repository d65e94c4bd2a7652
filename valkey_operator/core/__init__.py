"""The embeddable controller core: nothing here knows about Valkey.

The public API is exactly `__all__`; each name's contract is in docs/embedding.md ("The public
API"), and tests/unit/core/test_public_api.py keeps the two and the examples' imports in
agreement. Everything else in the submodules is internal and may change.

`RestConfig` is kubernetes-asyncio's `Configuration`, imported on first use (module `__getattr__`):
`import valkey_operator.core` does not pay for kubernetes-asyncio's client package.
"""

from typing import TYPE_CHECKING, Any

from valkey_operator.core.builder import build_controller
from valkey_operator.core.cache import CacheReader, NotCached
from valkey_operator.core.client import Client, retry_on_conflict
from valkey_operator.core.clock import Clock, FakeClock, RealClock
from valkey_operator.core.conditions import find_condition, is_true, set_condition
from valkey_operator.core.events import NORMAL, WARNING, EventRecorder
from valkey_operator.core.finalizers import add_finalizer, has_finalizer, remove_finalizer
from valkey_operator.core.handler import data_changed, generation_changed, requests_for_controller_owner
from valkey_operator.core.informer import NAMESPACE_ALL, SharedInformer
from valkey_operator.core.leaderelection import LeadershipLost
from valkey_operator.core.logging import configure_logging
from valkey_operator.core.manager import LeaderElectionConfig, Manager
from valkey_operator.core.reconcile import Reconciler, Request, Result, TerminalError
from valkey_operator.core.resource import (
    CONFIG_MAPS,
    DEPLOYMENTS,
    EVENTS,
    LEASES,
    NAMESPACES,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    POD_DISRUPTION_BUDGETS,
    PODS,
    SECRETS,
    SERVICES,
    STORAGE_CLASSES,
    Resource,
)
from valkey_operator.core.rest import ApiError
from valkey_operator.core.restconfig import ConfigError, load_config
from valkey_operator.core.store import keep_metadata

if TYPE_CHECKING:
    from valkey_operator.core.restconfig import RestConfig

__all__ = [
    "CONFIG_MAPS",
    "DEPLOYMENTS",
    "EVENTS",
    "LEASES",
    "NAMESPACES",
    "NAMESPACE_ALL",
    "NODES",
    "NORMAL",
    "PERSISTENT_VOLUME_CLAIMS",
    "PODS",
    "POD_DISRUPTION_BUDGETS",
    "SECRETS",
    "SERVICES",
    "STORAGE_CLASSES",
    "WARNING",
    "ApiError",
    "CacheReader",
    "Client",
    "Clock",
    "ConfigError",
    "EventRecorder",
    "FakeClock",
    "LeaderElectionConfig",
    "LeadershipLost",
    "Manager",
    "NotCached",
    "RealClock",
    "Reconciler",
    "Request",
    "Resource",
    "RestConfig",
    "Result",
    "SharedInformer",
    "TerminalError",
    "add_finalizer",
    "build_controller",
    "configure_logging",
    "data_changed",
    "find_condition",
    "generation_changed",
    "has_finalizer",
    "is_true",
    "keep_metadata",
    "load_config",
    "remove_finalizer",
    "requests_for_controller_owner",
    "retry_on_conflict",
    "set_condition",
]


def __getattr__(name: str) -> Any:
    if name == "RestConfig":
        from valkey_operator.core import restconfig

        return restconfig.RestConfig
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
