"""The actor sends an in-place resize as a strategic-merge patch of the pods/resize subresource."""

from __future__ import annotations

import asyncio
from typing import Any

from render_support import context

from controllers.cluster.actor import Actor
from controllers.cluster.decision.actions import ResizePod
from controllers.shared.observation import ContainerResources
from valkey_operator.core.client import STRATEGIC_MERGE_PATCH, ApiError
from valkey_operator.core.resource import PODS


class PatchRecorder:
    """Stands in for the client: records each patch, answers with `status` when it is set."""

    def __init__(self, status: int | None = None) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.status = status

    async def patch(self, resource: Any, name: str, patch: Any, namespace: Any, **options: Any) -> Any:
        self.calls.append((resource, name, patch, namespace, options))
        if self.status is not None:
            raise ApiError(self.status, f"pods {name}: the resize is not allowed")
        return {}


def resize(memory: str = "512Mi") -> ResizePod:
    resources = ContainerResources(requests={"cpu": "500m", "memory": memory}, limits={"memory": memory})
    return ResizePod("cache-0-bcdfg", "uid-1", resources)


def test_a_resize_patches_only_the_valkey_containers_resources_through_the_subresource() -> None:
    client = PatchRecorder()
    ctx = context()
    outcome = asyncio.run(Actor(client, ctx, [], None).run([resize()]))  # type: ignore[arg-type]
    assert outcome.failures == ()
    ((resource, name, patch, namespace, options),) = client.calls
    assert (resource, name, namespace) == (PODS, "cache-0-bcdfg", ctx.namespace)
    assert options == {"patch_type": STRATEGIC_MERGE_PATCH, "subresource": "resize"}
    assert patch == {
        "metadata": {"uid": "uid-1"},
        "spec": {
            "containers": [
                {
                    "name": "valkey",
                    "resources": {
                        "requests": {"cpu": "500m", "memory": "512Mi"},
                        "limits": {"memory": "512Mi"},
                    },
                }
            ]
        },
    }


def test_a_refused_resize_is_a_failure_with_the_api_servers_status() -> None:
    client = PatchRecorder(status=422)
    outcome = asyncio.run(Actor(client, context(), [], None).run([resize()]))  # type: ignore[arg-type]
    (failure,) = outcome.failures
    assert failure.action == resize() and failure.http_status == 422
