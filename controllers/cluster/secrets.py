"""The content of the Secrets clusters reference (their TLS Secrets), without caching every Secret.

Every Secret is watched metadata-only (no data in memory), which tells when a
referenced one changes (its resourceVersion) and enqueues its clusters; the
content of a referenced Secret is read with one GET when its resourceVersion
differs from the copy held here, so only referenced Secrets' data is kept.
"""

from __future__ import annotations

from collections.abc import Callable

from valkey_operator.core.client import Client
from valkey_operator.core.resource import SECRETS
from valkey_operator.core.rest import Obj

MetadataLookup = Callable[[str, str], Obj | None]
"""(namespace, name) -> the Secret's cached metadata, or None when the cache has no such Secret."""


class ReferencedSecrets:
    def __init__(self, client: Client, metadata: MetadataLookup) -> None:
        self.client = client
        self.metadata = metadata
        self._content: dict[str, tuple[str, Obj]] = {}

    async def get(self, namespace: str, name: str) -> Obj | None:
        """The Secret as the API server has it at least as new as the watch shows; None when absent."""
        key = f"{namespace}/{name}"
        shown = self.metadata(namespace, name)
        if shown is None:
            self._content.pop(key, None)
            return None
        version = shown.get("metadata", {}).get("resourceVersion", "")
        held = self._content.get(key)
        if held is not None and held[0] == version:
            return held[1]
        secret = await self.client.get_or_none(SECRETS, name, namespace)
        if secret is None:
            self._content.pop(key, None)
            return None
        self._content[key] = (secret.get("metadata", {}).get("resourceVersion", ""), secret)
        return secret

    def forget(self, namespace: str, name: str) -> None:
        self._content.pop(f"{namespace}/{name}", None)
