"""Which failures are refusals: classified from what the actor saw, never by the actor (pure).

The actor reports what happened to each action as facts: Valkey's words, whether
the server answered the command with an error (rather than not answering), the
user an ACL SETUSER was refused for, the API server's HTTP status. Whether that
is a refusal of the input (it repeats until the input changes: the refused
value is not sent again, memory.py) or the API server's authorizer denying the
operator (it repeats until a human grants the permission, stalled.py) is decided
here, when decide() finishes the pass with the failures (`Decision.after`):
- SetConfig answered with an error: the directive Valkey's error names ("possibly
  related to argument 'x'"), else the only one sent, else "" (named none: the
  next pass sends the directives one by one);
- ReloadTls answered with an error once the files are surely written
  (`confirm` set): refused as "tls"; before that the files may still be the
  old ones, so it is retried, not refused;
- SyncAcl: the user whose ACL SETUSER was answered with an error;
- any API error with status 403 from the authorizer: forbidden (RBAC).
A failure already classified (tests, the simulator) is kept as it is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import attrs

from controllers.cluster.decision.actions import Failure, ReloadTls, SetConfig, SyncAcl
from controllers.cluster.decision.stalled import rbac_denied

_REFUSED_ARGUMENT = re.compile(r"argument '([^']+)'")


def refused_argument(message: str, pending: Mapping[str, str]) -> str | None:
    """The directive a multi-argument CONFIG SET names in its error ("possibly related to argument 'x'")."""
    match = _REFUSED_ARGUMENT.search(message)
    if match is None:
        return None
    named = match.group(1).lower()
    return next((name for name in pending if name.lower() == named), None)


def _refused(failure: Failure) -> str | None:
    action = failure.action
    if not failure.command_error:
        return None
    if isinstance(action, SetConfig):
        settings = dict(action.settings)
        named = refused_argument(failure.message, settings)
        if named is not None:
            return named
        return next(iter(settings)) if len(settings) == 1 else ""
    if isinstance(action, ReloadTls):
        return "tls" if action.confirm is not None else None
    if isinstance(action, SyncAcl):
        return failure.user or None
    return None


def classified(failure: Failure) -> Failure:
    """The failure with `refused` and `forbidden` decided from what the actor reported."""
    refused = failure.refused if failure.refused is not None else _refused(failure)
    forbidden = failure.forbidden or (
        failure.http_status is not None and rbac_denied(failure.http_status, failure.message)
    )
    if refused == failure.refused and forbidden == failure.forbidden:
        return failure
    return attrs.evolve(failure, refused=refused, forbidden=forbidden)
