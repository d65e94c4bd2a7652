"""Running a SharedInformer for the length of a test, synced before the test reads it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from valkey_operator.core.informer import SharedInformer


@contextlib.asynccontextmanager
async def running(informer: SharedInformer) -> AsyncIterator[SharedInformer]:
    informer.start()
    try:
        async with asyncio.timeout(20):
            await informer.wait_for_sync()
        yield informer
    finally:
        await informer.stop()
