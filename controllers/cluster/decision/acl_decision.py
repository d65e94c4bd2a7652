"""Which ACL users every node must have, and which go into the startup ACL file (pure).

A spec user enters the startup file, and is set on the nodes, only once every
command its roles name is one the nodes know (COMMAND INFO, asked each pass):
Valkey refuses to start with an ACL file naming an unknown command, so one bad
role must not stop every new pod. Until then the user is held: it keeps the
rules the startup file already had for it (the last ones that loaded), or is
left out of the file and left alone on the nodes. Unknown commands are
reported; commands no node could be asked about yet (no node answered) just
wait.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping

import attrs

from controllers.cluster.decision.desired import DesiredAcl, object_key
from controllers.cluster.render.acl import UserAcl
from controllers.shared.observation import NodeObservation
from controllers.shared.versions import meets_floor
from valkey_operator.core.rest import Obj
from valkey_operator.valkey.acl import AclSyntaxError, UserRules, normal_form, split_rules


@attrs.frozen
class UnknownCommand:
    role: str
    command: str
    users: tuple[str, ...]


@attrs.frozen(kw_only=True)
class AclDecision:
    users: tuple[UserAcl, ...]
    """Internal users, then spec users in spec order (held ones with their previous rules)."""
    forms: Mapping[str, UserRules]
    """Each of `users` in Valkey's normal form, to compare with ACL LIST."""
    protected: frozenset[str]
    """Usernames never deleted: internal users and every spec user (held ones included)."""
    unknown: tuple[UnknownCommand, ...]
    """Role commands some node does not know (their users are held)."""
    unverified: tuple[str, ...]
    """Spec users whose commands no node could be asked about yet (held until one answers)."""

    @property
    def file_text(self) -> str:
        """The startup ACL file (`aclfile`). No comments: Valkey's ACL file does not allow them."""
        return "".join(user.file_line() + "\n" for user in self.users)


def command_verdicts(nodes: Iterable[NodeObservation], commands: Iterable[str]) -> dict[str, bool | None]:
    """Per command: False when some node of a supported version does not know it, True when every
    node asked knows it, None when no node could be asked."""
    asked = [node.commands for node in nodes if node.commands is not None and meets_floor(node.version)]
    verdicts: dict[str, bool | None] = {}
    for command in commands:
        answers = [known[command] for known in asked if command in known]
        verdicts[command] = all(answers) if answers else None
    return verdicts


def file_users(secret: Obj | None, key: str) -> dict[str, UserAcl]:
    """The users of the startup ACL file as the Secret holds it now."""
    encoded = ((secret or {}).get("data") or {}).get(key)
    if not encoded:
        return {}
    try:
        text = base64.b64decode(encoded).decode()
    except (binascii.Error, UnicodeDecodeError):
        return {}
    users = {}
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        name, _, rules = rest.partition(" ")
        if kind == "user" and name:
            try:
                users[name] = UserAcl(name, tuple(split_rules(rules)))
            except AclSyntaxError:
                continue
    return users


def decide_acl(
    acl: DesiredAcl, nodes: Iterable[NodeObservation], objects: Mapping[str, Obj | None]
) -> AclDecision:
    verdicts = command_verdicts(nodes, sorted({c for user in acl.users for _, c in user.commands}))
    previous = file_users(objects.get(object_key("Secret", acl.secret)), acl.key) if acl.secret else {}
    users: list[UserAcl] = list(acl.internal)
    unknown: dict[tuple[str, str], list[str]] = {}
    unverified: list[str] = []
    for wanted in acl.users:
        name = wanted.user.username
        bad = [(role, command) for role, command in wanted.commands if verdicts.get(command) is False]
        for pair in bad:
            unknown.setdefault(pair, []).append(name)
        if not bad and all(verdicts.get(command) for _, command in wanted.commands):
            users.append(wanted.user)
            continue
        if not bad:
            unverified.append(name)
        if name in previous:
            users.append(previous[name])
    return AclDecision(
        users=tuple(users),
        forms={user.username: normal_form(user.rules) for user in users},
        protected=frozenset(
            [*(user.username for user in acl.internal), *(user.user.username for user in acl.users)]
        ),
        unknown=tuple(
            UnknownCommand(role, command, tuple(names)) for (role, command), names in sorted(unknown.items())
        ),
        unverified=tuple(unverified),
    )
