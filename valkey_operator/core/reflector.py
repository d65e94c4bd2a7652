"""ListWatch reflector: keep a Store equal to the API server's state of one resource.

Modelled on client-go's `tools/cache.Reflector`:

- LIST in pages of 500 (following `continue`; an expired continue token
  restarts the list unpaged), then replace the store. Objects that vanished
  since the previous state are reported as deletes of a
  `DeletedFinalStateUnknown` tombstone: their DELETED event was never seen.
- Which state a LIST asks for follows client-go's `relistResourceVersion`:
  the first one resourceVersion "0" (any state, so the API server answers
  from its watch cache in one response instead of paging through etcd); a
  relist the last synced resourceVersion with `resourceVersionMatch:
  NotOlderThan`, so the store never travels back in time; and when the server
  answers that version is gone (410) or not reached yet, a consistent read
  (no resourceVersion) at once. As for any client-go informer, the first
  LIST of a process may be a little behind etcd (a lagging API server of an
  HA control plane); the watch that follows brings it up to date.
- WATCH from the list's resourceVersion with bookmarks and a server-side
  timeout (randomised 300..600 s by default, so a fleet of clients does not
  reconnect in lock-step). ADDED/MODIFIED/DELETED update the store; BOOKMARK
  only advances the resourceVersion.
- A watch that ends normally (its timeout) is resumed from the last
  resourceVersion without relisting. 410 Gone (as HTTP status or as an ERROR
  event) or "resourceVersion too large" means the resume point is unusable:
  relist. Anything else (connection errors, 5xx, cut streams) backs off with
  jitter and then resumes the watch, which relists only if the server
  answers 410.

Watch bodies are split on newlines by hand, not with aiohttp's
`readline`, which refuses lines over 64 KiB; objects can be larger.

With `metadata_only` the LIST and WATCH ask for PartialObjectMetadata (as
client-go's metadata informers do): the store holds only `metadata` (no Secret
payloads in memory), and every write to an object is still an update, since
each one changes its resourceVersion. As controller-runtime does, the
objects get their resource's kind and apiVersion, not PartialObjectMetadata.

The reflector does not know about handlers: after each store change it calls
an `EventSink` (the informer) with the stored object(s).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncGenerator, AsyncIterable, Callable
from typing import Any, Protocol, TypedDict

import aiohttp
import attrs
import orjson
import structlog

from valkey_operator.core.clock import Clock, RealClock
from valkey_operator.core.resource import Resource
from valkey_operator.core.rest import (
    PARTIAL_OBJECT_METADATA,
    PARTIAL_OBJECT_METADATA_LIST,
    ApiError,
    Obj,
    RestClient,
)
from valkey_operator.core.store import DeletedFinalStateUnknown, Store

__all__ = ["EventSink", "LineSplitter", "Reflector", "WatchBackoff", "iter_lines"]

log = structlog.get_logger(__name__)

PAGE_SIZE = 500
MIN_WATCH_TIMEOUT = 300.0
LIST_TIMEOUT = 60.0
UNPAGED_LIST_TIMEOUT = 300.0
CONNECT_TIMEOUT = 30.0
# The server ends a watch at timeoutSeconds; allow this much silence beyond it
# before the client gives the connection up as dead.
READ_TIMEOUT_SLACK = 30.0
# A watch that ends cleanly this fast without a single event is treated as a
# failure (client-go's "very short watch"), so a misbehaving server or proxy
# cannot make the reflector spin.
SHORT_WATCH = 1.0


class EventSink(Protocol):
    """Receives every change after it has been applied to the store."""

    def on_add(self, obj: Obj) -> None: ...

    def on_update(self, old: Obj, new: Obj) -> None: ...

    def on_delete(self, obj: Obj | DeletedFinalStateUnknown) -> None: ...


@attrs.define
class WatchBackoff:
    """Exponential backoff with jitter, reset after a healthy period (client-go's defaults).

    The n-th consecutive failure waits initial * factor**(n-1), capped at
    maximum, plus up to `jitter` times that again at random. When the last
    failure is more than `reset_after` seconds old the sequence starts over.
    """

    initial: float = 0.8
    maximum: float = 30.0
    factor: float = 2.0
    jitter: float = 1.0
    reset_after: float = 120.0
    _current: float = attrs.field(init=False, default=0.0)
    _last_failure: float | None = attrs.field(init=False, default=None)

    def next_delay(self, now: float, random_fraction: float) -> float:
        """The delay before the next attempt; `random_fraction` is in [0, 1)."""
        if self._last_failure is None or now - self._last_failure > self.reset_after:
            self._current = self.initial
        else:
            self._current = min(self._current * self.factor, self.maximum)
        self._last_failure = now
        return self._current * (1.0 + self.jitter * random_fraction)


class _Accept(TypedDict, total=False):
    """RestClient's `accept` argument, passed only when it is not the default.

    So RestClient subclasses written before `accept` existed (test doubles)
    keep working for full-object informers.
    """

    accept: str


class _ResumeImpossible(Exception):
    """The watch's resourceVersion is expired (410) or ahead of the server: relist."""


class _WatchFailed(Exception):
    """An ERROR event other than expiry, or a watch that ended suspiciously fast."""


class LineSplitter:
    """Non-empty newline-delimited frames of any length, from byte chunks fed one at a time.

    Synchronous, so the watch applies every frame of a chunk in one loop: an async generator
    yielding frame by frame cost a resumption per event.
    """

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending: list[bytes] = []  # the start of a frame whose newline has not arrived

    def feed(self, chunk: bytes) -> list[bytes]:
        """The frames this chunk completes."""
        if b"\n" not in chunk:
            if chunk:
                self._pending.append(chunk)
            return []
        if self._pending:
            self._pending.append(chunk)
            chunk = b"".join(self._pending)
            self._pending.clear()
        frames = chunk.split(b"\n")
        tail = frames.pop()
        if tail:
            self._pending.append(tail)
        return [frame for frame in frames if frame and not frame.isspace()]

    def close(self) -> bytes | None:
        """The last frame when the stream ended without a newline after it."""
        tail = b"".join(self._pending)
        self._pending.clear()
        return tail if tail and not tail.isspace() else None


async def iter_lines(chunks: AsyncIterable[bytes]) -> AsyncGenerator[bytes, None]:
    """Non-empty newline-delimited frames of any length from a stream of byte chunks."""
    splitter = LineSplitter()
    async for chunk in chunks:
        for line in splitter.feed(chunk):
            yield line
    tail = splitter.close()
    if tail is not None:
        yield tail


def _status_says_resume_impossible(status: Obj) -> bool:
    """410 Gone/Expired, or the 504 the API server sends for a resourceVersion it has not reached."""
    if status.get("code") == 410 or status.get("reason") in ("Gone", "Expired"):
        return True
    causes = (status.get("details") or {}).get("causes") or []
    return any(cause.get("reason") == "ResourceVersionTooLarge" for cause in causes)


class Reflector:
    """Lists and watches one resource (optionally one namespace and selectors) into a Store."""

    def __init__(
        self,
        rest: RestClient,
        resource: Resource,
        store: Store,
        sink: EventSink,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        metadata_only: bool = False,
        page_size: int = PAGE_SIZE,
        watch_timeout: float | None = None,
        backoff: WatchBackoff | None = None,
        clock: Clock | None = None,
        random_fraction: Callable[[], float] = random.random,
    ) -> None:
        """`watch_timeout` (seconds) fixes the server-side watch timeout; None randomises 300..600."""
        self.resource = resource
        self.namespace = namespace or None
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.metadata_only = metadata_only
        self._list_accept: _Accept = {"accept": PARTIAL_OBJECT_METADATA_LIST} if metadata_only else {}
        self._watch_accept: _Accept = {"accept": PARTIAL_OBJECT_METADATA} if metadata_only else {}
        self._rest = rest
        self._store = store
        self._sink = sink
        self._path = resource.path(self.namespace)
        self._page_size = page_size
        self._watch_timeout = watch_timeout
        self._backoff = backoff if backoff is not None else WatchBackoff()
        self._clock: Clock = clock if clock is not None else RealClock()
        self._random = random_fraction
        self._last_sync_resource_version = ""
        self._last_sync_unavailable = False  # the server refused it for a LIST: read consistently
        self._watch_events = 0  # events applied by the current (or last) watch
        self._synced = asyncio.Event()
        self._log = log.bind(
            resource=str(resource), namespace=self.namespace or "", metadata_only=metadata_only
        )

    @property
    def last_sync_resource_version(self) -> str:
        """The resourceVersion the store is known to be current at ("" before the first list)."""
        return self._last_sync_resource_version

    @property
    def has_synced(self) -> bool:
        """True once the first LIST has been applied to the store and reported to the sink."""
        return self._synced.is_set()

    async def wait_for_sync(self) -> None:
        await self._synced.wait()

    async def run(self) -> None:
        """List, then watch forever; returns only by cancellation."""
        need_list = True
        # "Cannot resume" answers with no watch progress in between: the first
        # relists at once, a repeat (a fresh resourceVersion refused again) backs off.
        resume_refusals = 0
        while True:
            try:
                if need_list:
                    await self._list_and_replace()
                    need_list = False
                await self._watch()
                resume_refusals = 0
                continue
            except _ResumeImpossible as exc:
                need_list = True
                resume_refusals = 1 if self._watch_events else resume_refusals + 1
                self._log.info("watch_resume_impossible_relisting", reason=str(exc))
                if resume_refusals == 1:
                    continue
            except Exception as exc:
                # Nothing may kill the reflector: every failure is a retry.
                self._log.warning(
                    "list_failed" if need_list else "watch_failed",
                    error=str(exc) or type(exc).__name__,
                    error_type=type(exc).__name__,
                )
            delay = self._backoff.next_delay(self._clock.now(), self._random())
            await self._clock.sleep(delay)

    # -- list ------------------------------------------------------------------

    def _selector_query(self) -> dict[str, str | int | bool | None]:
        return {"labelSelector": self.label_selector, "fieldSelector": self.field_selector}

    def _list_resource_version(self) -> dict[str, str | int | bool | None]:
        """client-go's relistResourceVersion: any state first, then not older than the last sync."""
        if self._last_sync_unavailable:
            return {}
        if not self._last_sync_resource_version:
            return {"resourceVersion": "0"}
        return {"resourceVersion": self._last_sync_resource_version, "resourceVersionMatch": "NotOlderThan"}

    async def _list(self) -> tuple[list[Obj], str]:
        """A LIST, paged; an expired continue token restarts it unpaged and consistent."""
        items: list[Obj] = []
        continue_token: str | None = None
        while True:
            version = {} if continue_token else self._list_resource_version()
            query = {
                **self._selector_query(),
                **version,
                "limit": self._page_size,
                "continue": continue_token,
            }
            try:
                page = await self._rest.request(
                    "GET", self._path, query=query, timeout=LIST_TIMEOUT, **self._list_accept
                )
            except ApiError as exc:
                if version.get("resourceVersion") and (exc.gone or _status_says_resume_impossible(exc.body)):
                    self._log.info("list_resource_version_unavailable", reason=str(exc))
                    self._last_sync_unavailable = True
                    continue
                if not (exc.gone and continue_token):
                    raise
                self._log.info("list_continue_expired_listing_unpaged")
                page = await self._rest.request(
                    "GET",
                    self._path,
                    query=self._selector_query(),
                    timeout=UNPAGED_LIST_TIMEOUT,
                    **self._list_accept,
                )
                items = []
                continue_token = None
            items.extend(page.get("items") or ())
            metadata = page.get("metadata") or {}
            continue_token = metadata.get("continue") or None
            if continue_token is None:
                resource_version = metadata.get("resourceVersion")
                if not resource_version:
                    raise ValueError("LIST response without metadata.resourceVersion")
                self._last_sync_unavailable = False
                return items, str(resource_version)

    def _set_type(self, obj: Obj) -> None:
        """Give an object its resource's kind and apiVersion.

        Full list items carry none (watch events do). Metadata-only items and
        events say PartialObjectMetadata, which is overwritten: readers and
        handlers (owner mapping, event recording) see the kind they asked for.
        """
        if self.metadata_only:
            obj["apiVersion"] = self.resource.api_version
            obj["kind"] = self.resource.kind
        else:
            obj.setdefault("apiVersion", self.resource.api_version)
            obj.setdefault("kind", self.resource.kind)

    async def _list_and_replace(self) -> None:
        objects, resource_version = await self._list()
        for obj in objects:
            self._set_type(obj)
        # Scoped to this reflector's namespace: other reflectors may feed the same store.
        previous = self._store.snapshot(self.namespace)
        stored = self._store.replace(objects, resource_version, namespace=self.namespace)
        self._last_sync_resource_version = resource_version
        for new in stored:
            old = previous.pop(self._store.key_of(new), None)
            if old is None:
                self._sink.on_add(new)
            else:
                # As client-go: every object still present is reported as an
                # update, even when unchanged (equal resourceVersions).
                self._sink.on_update(old, new)
        for key, old in previous.items():
            self._sink.on_delete(DeletedFinalStateUnknown(key, old))
        first = not self._synced.is_set()
        self._synced.set()
        self._log.info(
            "listed",
            objects=len(stored),
            vanished=len(previous),
            resource_version=resource_version,
            initial=first,
        )

    # -- watch -----------------------------------------------------------------

    def _next_watch_timeout(self) -> int:
        if self._watch_timeout is not None:
            return max(1, round(self._watch_timeout))
        return round(MIN_WATCH_TIMEOUT * (1.0 + self._random()))

    async def _watch(self) -> None:
        """One WATCH from the last resourceVersion; returns when the server ends it."""
        timeout_seconds = self._next_watch_timeout()
        query = {
            **self._selector_query(),
            "watch": True,
            "resourceVersion": self._last_sync_resource_version,
            "allowWatchBookmarks": True,
            "timeoutSeconds": timeout_seconds,
        }
        client_timeout = aiohttp.ClientTimeout(
            sock_connect=CONNECT_TIMEOUT, sock_read=timeout_seconds + READ_TIMEOUT_SLACK
        )
        started = self._clock.now()
        self._watch_events = 0
        splitter = LineSplitter()
        apply, loads = self._apply, orjson.loads
        try:
            async with self._rest.stream(
                self._path, query=query, timeout=client_timeout, **self._watch_accept
            ) as response:
                async for chunk in response.content.iter_any():
                    for line in splitter.feed(chunk):
                        apply(loads(line))
                        self._watch_events += 1
                tail = splitter.close()
                if tail is not None:
                    apply(loads(tail))
                    self._watch_events += 1
        except ApiError as exc:
            if exc.gone or _status_says_resume_impossible(exc.body):
                raise _ResumeImpossible(str(exc)) from exc
            raise
        if self._watch_events == 0 and self._clock.now() - started < SHORT_WATCH:
            raise _WatchFailed("watch ended immediately without events")

    def _apply(self, event: Any) -> None:
        if not isinstance(event, dict) or not isinstance(event.get("object"), dict):
            raise _WatchFailed("malformed watch event")
        event_type = event.get("type")
        obj: Obj = event["object"]
        if event_type == "ERROR":
            if _status_says_resume_impossible(obj):
                raise _ResumeImpossible(f"{obj.get('code')} {obj.get('reason')}: {obj.get('message')}")
            raise _WatchFailed(f"watch ERROR {obj.get('code')} {obj.get('reason')}: {obj.get('message')}")
        resource_version = (obj.get("metadata") or {}).get("resourceVersion")
        if event_type == "BOOKMARK":
            pass
        elif event_type in ("ADDED", "MODIFIED"):
            self._set_type(obj)
            old, new = self._store.upsert(obj)
            if old is None:
                self._sink.on_add(new)
            else:
                self._sink.on_update(old, new)
        elif event_type == "DELETED":
            # The event's object is the final state; report it, not the cached one.
            self._set_type(obj)
            final = self._store.transform_object(obj)
            self._store.delete(final)
            self._sink.on_delete(final)
        else:
            self._log.warning("watch_event_type_unknown", event_type=str(event_type))
            return
        if resource_version:
            self._last_sync_resource_version = str(resource_version)
