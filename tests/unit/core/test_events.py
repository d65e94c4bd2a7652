"""The event recorder's series on the fake clock: repeats within six minutes patch one Event's series,
later ones start a new Event, and every timestamp comes from the injected clock."""

from __future__ import annotations

from typing import cast

from valkey_operator.core.client import Client
from valkey_operator.core.clock import FakeClock
from valkey_operator.core.events import SERIES_WINDOW_SECONDS, WARNING, EventRecorder
from valkey_operator.core.resource import Resource
from valkey_operator.core.rest import Obj, TransportError

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "ns", "uid": "u1"}}


class RecordingWriter:
    """Stands in for the API writes the recorder makes (this is a unit test of its own bookkeeping;
    tests/integration covers the real API server)."""

    def __init__(self) -> None:
        self.created: list[Obj] = []
        self.patched: list[tuple[str, Obj]] = []
        self.down = False

    async def create(self, resource: Resource, obj: Obj) -> Obj:
        if self.down:
            raise TransportError("connection refused")
        self.created.append(obj)
        return obj

    async def patch(self, resource: Resource, name: str, patch: Obj, namespace: str | None = None) -> Obj:
        self.patched.append((name, patch))
        return {}


def recorder(clock: FakeClock) -> tuple[EventRecorder, RecordingWriter]:
    writer = RecordingWriter()
    return EventRecorder(cast(Client, writer), "demo", "demo-0", clock), writer


async def test_repeats_within_the_window_become_a_series_and_later_ones_a_new_event() -> None:
    clock = FakeClock()
    events, writer = recorder(clock)
    await events.event(POD, WARNING, "Failed", "it broke")
    assert writer.created[0]["eventTime"] == "2027-01-15T08:00:00.000000Z"
    clock.step(60)
    await events.event(POD, WARNING, "Failed", "it broke")
    name = writer.created[0]["metadata"]["name"]
    assert writer.patched == [
        (name, {"series": {"count": 2, "lastObservedTime": "2027-01-15T08:01:00.000000Z"}})
    ]
    clock.step(SERIES_WINDOW_SECONDS)
    await events.event(POD, WARNING, "Failed", "it broke")
    assert len(writer.created) == 2 and len(writer.patched) == 1


async def test_an_event_that_cannot_be_written_is_dropped_not_raised() -> None:
    events, writer = recorder(FakeClock())
    writer.down = True
    await events.event(POD, WARNING, "Failed", "the API server is away")
    writer.down = False
    await events.event(POD, WARNING, "Failed", "the API server is away")
    assert len(writer.created) == 1  # not a series: the first was never written
