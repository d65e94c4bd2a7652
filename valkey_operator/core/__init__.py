"""The embeddable controller core: nothing here knows about Valkey.

The public API, in controller-runtime's terms (see docs/embedding.md):
"""

from valkey_operator.core.builder import ControllerBuilder, build_controller
from valkey_operator.core.client import Client, retry_on_conflict
from valkey_operator.core.clock import Clock, FakeClock, RealClock
from valkey_operator.core.conditions import find_condition, is_true, set_condition
from valkey_operator.core.controller import Controller
from valkey_operator.core.events import NORMAL, WARNING, EventRecorder
from valkey_operator.core.finalizers import add_finalizer, has_finalizer, remove_finalizer
from valkey_operator.core.handler import generation_changed, request_for_object, requests_for_controller_owner
from valkey_operator.core.informer import NAMESPACE_ALL, FuncHandler, SharedInformer, SharedInformerFactory
from valkey_operator.core.leaderelection import LeadershipLost
from valkey_operator.core.logging import configure_logging
from valkey_operator.core.manager import LeaderElectionConfig, Manager
from valkey_operator.core.reconcile import Reconciler, Request, Result, TerminalError
from valkey_operator.core.resource import Resource
from valkey_operator.core.rest import ApiError, Obj, RestClient
from valkey_operator.core.store import DeletedFinalStateUnknown, Store, strip_managed_fields

__all__ = [
    "NAMESPACE_ALL",
    "NORMAL",
    "WARNING",
    "ApiError",
    "Client",
    "Clock",
    "Controller",
    "ControllerBuilder",
    "DeletedFinalStateUnknown",
    "EventRecorder",
    "FakeClock",
    "FuncHandler",
    "LeaderElectionConfig",
    "LeadershipLost",
    "Manager",
    "Obj",
    "RealClock",
    "Reconciler",
    "Request",
    "Resource",
    "RestClient",
    "Result",
    "SharedInformer",
    "SharedInformerFactory",
    "Store",
    "TerminalError",
    "add_finalizer",
    "build_controller",
    "configure_logging",
    "find_condition",
    "generation_changed",
    "has_finalizer",
    "is_true",
    "remove_finalizer",
    "request_for_object",
    "requests_for_controller_owner",
    "retry_on_conflict",
    "set_condition",
    "strip_managed_fields",
]
