"""Running a SharedInformer for the length of a test, synced before the test reads it; waiting for
objects written before it started."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from valkey_operator.core.informer import SharedInformer
from valkey_testbed.wait import NotYet, eventually


@contextlib.asynccontextmanager
async def running(informer: SharedInformer) -> AsyncIterator[SharedInformer]:
    informer.start()
    try:
        async with asyncio.timeout(20):
            await informer.wait_for_sync()
        yield informer
    finally:
        await informer.stop()


async def holding(informer: SharedInformer, *keys: str, timeout: float = 20.0) -> None:
    """Wait until the informer's store holds every key.

    Synced is not enough for an object written just before the informer started: the first LIST
    asks for resourceVersion "0", which the API server answers from its watch cache, and that cache
    can trail a create it has already answered (5 LISTs in 150 right after a create missed it on the
    test bed). The watch then brings the object, as a live add."""

    def held() -> bool | NotYet:
        missing = [key for key in keys if key not in informer.store]
        return not missing or NotYet(missing)

    await eventually(held, f"{', '.join(keys)} in the cache of {informer.resource}", timeout)
