"""The value of the `valkey.gomomento.com/switchover` annotation: what a request names.

`<shard>[/<pod>][@<token>]`: the shard whose primary is handed over, the replica to promote (else
the operator picks the best in-sync one), and a token that only makes a request distinct. The
operator (controllers/cluster/decision/switchover.py) and the kubectl plugin read it here.
"""

from __future__ import annotations

import re

import attrs

FORMAT = "<shard>[/<pod>][@<token>]"
EXAMPLE = "1/mycluster-1-x7k2p@20261203T132000Z"


_VALUE = re.compile(
    r"^(?P<shard>[0-9]{1,4})(?:/(?P<pod>[a-z0-9](?:[-a-z0-9]{0,251}[a-z0-9])?))?(?:@(?P<token>.*))?$"
)


@attrs.frozen
class Request:
    """A parsed annotation value."""

    shard: int
    pod: str | None = None
    token: str | None = None


def parse(value: str) -> Request | str:
    """The request, or why the value is not one (a message naming the expected format)."""
    found = _VALUE.match(value.strip())
    if found is None:
        return f"expected {FORMAT} (for example {EXAMPLE}), got {shown(value)}"
    return Request(int(found["shard"]), found["pod"], found["token"])


def shown(value: str, limit: int = 120) -> str:
    """The value quoted for a message, cut short: an annotation may hold 256 KiB."""
    return repr(value if len(value) <= limit else value[:limit] + "...")
