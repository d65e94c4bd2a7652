"""Valkey ACL users (SPEC 1.4 "ACLs"): the startup ACL file and per-user `ACL SETUSER` rules.

Users, in this order: `default` (disabled), the operator's admin user, the
replication user, the metrics sidecar's user while it is on, then spec.acl's
users in spec order. Each user's rules are
absolute, so applying them with ACL SETUSER converges whatever the user had:

1. `reset`: no passwords, keys, channels, commands or selectors, and off.
2. `on` (`off` for default).
3. `#<sha256>` per password hash, in spec order (listing old and new rotates); none for a user
   that logs in by certificate (`authentication: Certificate`): with no password, only a client
   certificate whose CN names it logs it in (tls-auth-clients-user CN).
4. Root permissions: for spec users only the keyless topology commands
   cluster-aware clients need (TOPOLOGY_COMMANDS); no keys, no channels.
5. One selector `(...)` per permission entry, in spec order. Inside it:
   key patterns (`~p` readwrite, `%R~p` read, `%W~p` write), channel patterns
   (`&c`, none by default), then the role's rules: category allows, category
   denies, command allows, command denies, each group in the role's order.
   So a command rule beats a category rule and a deny beats an allow at the
   same level, whatever order the role lists them in. Selectors are OR-ed by
   Valkey, so one entry's keys never gain another entry's commands.

The same text serves the file and ACL SETUSER: the file parser splits a line on
spaces and re-joins a selector's pieces, and both then split the selector's
inside with sdssplitargs, which is why a pattern holding a quote is written as
a double-quoted token there (see selector_token).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Literal

import attrs

from controllers.shared.credentials import InternalCredentials
from valkey_operator.api.cluster import AclUser, KeyAccess, Permission
from valkey_operator.api.resources import ADMIN_USER, EXPORTER_USER, REPLICATION_USER, RESERVED_USERNAMES
from valkey_operator.api.role import Access, ValkeyRole, ValkeyRoleSpec

TOPOLOGY_COMMANDS: tuple[str, ...] = (
    # discovering the cluster and following MOVED/ASK
    "+cluster|slots",
    "+cluster|shards",
    "+cluster|nodes",
    "+cluster|info",
    "+cluster|myid",
    "+cluster|myshardid",
    "+cluster|keyslot",
    "+asking",
    "+readonly",
    "+readwrite",
    # connection set-up and health checks
    "+hello",
    "+auth",
    "+ping",
    "+echo",
    "+reset",
    "+client|setname",
    "+client|getname",
    "+client|setinfo",
    "+client|id",
    # command metadata (some clients route by it)
    "+command",
)
"""Keyless commands every user gets so cluster-aware clients can connect, discover and route."""

REPLICATION_RULES: tuple[str, ...] = (
    "~*",
    "+@write",
    "-flushall",
    "-flushdb",
    "-swapdb",
    "+psync",
    "+sync",
    "+replconf",
    "+ping",
    "+select",
    "+cluster|syncslots",
)
"""What replication and atomic slot migration need: proven in part 2 by migrating populated slots.

Checked by hand on 9.1.2: a populated slot of every data type (with hash field TTLs and stream
groups) and a slot under concurrent writes, deletes and expiries migrated with these rules.

A replica authenticates as `primaryuser` and only runs PING/REPLCONF/PSYNC (SYNC with dual-channel
replication); the replicated stream is then applied by Valkey's internal client, whatever the user
may do. Atomic slot migration is the other way round: the source connects to the target as
`primaryuser` and pushes the slots as commands (an AOF-format snapshot, then the incremental
stream: SELECT, every write command, DEL/UNLINK of expired or deleted keys) plus CLUSTER SYNCSLOTS,
and the target checks them against this user. Hence @write on every key, minus the whole-database
commands migration never sends.
"""

ADMIN_COMMANDS: tuple[str, ...] = (
    # AUTH: every connection of the admin client (valkey-py) and of the backup's RDB stream
    "+auth",
    # INFO: the observer's probe (server, replication, memory, persistence), the operator's redis_*
    # series (valkey_exporter.py) and the backup's RDB stream (INFO server: the node's RDB format)
    "+info",
    # the observer's probe (shared/probe.py): slot migrations, cluster state, identity, topology
    "+cluster|getslotmigrations",
    "+cluster|info",  # also the operator's redis_* series (valkey_exporter.py)
    "+cluster|myid",
    "+cluster|myshardid",
    "+cluster|nodes",
    # the observer's probe: each node's users, to keep them as rendered (acl_decision.py)
    "+acl|list",
    # the observer's probe: each runtime tunable's value and the operator's own (tunables.PROBED_NAMES)
    "+config|get",
    # the observer's probe: whether the node knows the commands spec.acl's roles name
    "+command|info",
    # the actor's topology steps: bootstrap and scale-up (MEET, ADDSLOTSRANGE, REPLICATE), scaling
    # (MIGRATESLOTS), switchover, rollout and day-2 failover (FAILOVER), promotion of a replica
    # whose primary is gone (FAILOVER TAKEOVER), removal of gone nodes (FORGET)
    "+cluster|meet",
    "+cluster|addslotsrange",
    "+cluster|replicate",
    "+cluster|migrateslots",
    "+cluster|failover",
    "+cluster|forget",
    # the actor's runtime tunables (SetConfig), TLS file reload (ReloadTls: tls-*-file), and the
    # backup's RDB stream: repl-diskless-sync-delay 0 just before its SYNC, then back (rdb_stream.py)
    "+config|set",
    # the actor's ACL sync (SyncAcl): every user set as rendered, stray users removed
    "+acl|setuser",
    "+acl|deluser",
    # the backup's RDB stream (rdb_stream.py), as `valkey-cli --rdb` asks: REPLCONF rdb-only/capa
    # eof/version, then SYNC
    "+replconf",
    "+sync",
    # a OneInstant backup (controllers/backup/instant.py): every primary's writes held while every
    # shard's source forks, bounded by the pause's own timeout, then released
    "+client|pause",
    "+client|unpause",
)
"""Every command the operator sends as its admin user, and nothing else: no keys, no channels.

The admin user never reads or writes a key, so it has no key or channel pattern: a command
outside this list (FLUSHALL, KEYS, DEBUG, SHUTDOWN, a data command) is refused with NOPERM.
tests/unit/controllers/cluster/test_admin_commands.py ties the list to the commands the code
sends; tests/integration/valkey/test_admin_acl_server.py runs each path against real servers.
CONFIG SET cannot be narrowed by parameter in Valkey's ACL: Valkey's protected configs (`dir`,
`dbfilename`, ... refused by CONFIG SET while `enable-protected-configs` is `no`, its default)
keep the file paths out of reach. ACL SETUSER is inherently as strong as every permission.
"""

_USERNAME = re.compile(r"[A-Za-z0-9._-]+")
_PASSWORD_HASH = re.compile(r"[0-9a-f]{64}")
_COMMAND = re.compile(r"[a-z0-9_-]+(\|[a-z0-9_-]+)?")

RoleLookup = Callable[[str], ValkeyRole | ValkeyRoleSpec | None]
AclErrorReason = Literal["RoleNotFound", "InvalidAcl"]


@attrs.frozen
class AclError:
    """Why the ACL cannot be rendered; the caller reports it in status and applies nothing."""

    reason: AclErrorReason
    message: str


@attrs.frozen
class UserAcl:
    """One user: `ACL SETUSER <username> <rules...>`, or a `user <username> <rules...>` file line."""

    username: str
    rules: tuple[str, ...]

    def file_line(self) -> str:
        return " ".join(("user", self.username, *self.rules))


@attrs.frozen
class RenderedAcl:
    users: tuple[UserAcl, ...]

    @property
    def text(self) -> str:
        """The startup ACL file (`aclfile`). No comments: Valkey's ACL file does not allow them."""
        return "".join(user.file_line() + "\n" for user in self.users)

    @property
    def usernames(self) -> tuple[str, ...]:
        return tuple(user.username for user in self.users)

    def rules_of(self, username: str) -> tuple[str, ...] | None:
        return next((user.rules for user in self.users if user.username == username), None)


def internal_users(credentials: InternalCredentials, exporter: bool = False) -> tuple[UserAcl, ...]:
    """default (disabled), the admin user (ADMIN_COMMANDS), the replication user, and the metrics
    sidecar's read-only user while the sidecar is on (render/exporter.py)."""
    users = (
        UserAcl("default", ("reset", "off")),
        UserAcl(ADMIN_USER, ("reset", "on", f"#{credentials.admin_hash}", *ADMIN_COMMANDS)),
        UserAcl(REPLICATION_USER, ("reset", "on", f"#{credentials.replication_hash}", *REPLICATION_RULES)),
    )
    if not exporter:
        return users
    from controllers.cluster.render.exporter import acl_rules

    return (*users, UserAcl(EXPORTER_USER, acl_rules(credentials)))


def selector_token(token: str) -> str:
    """A token inside `(...)`, which Valkey splits with sdssplitargs: quote it when it holds a quote."""
    if '"' not in token and "'" not in token:
        return token
    return '"' + token.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _key_tokens(permission: Permission) -> list[str]:
    if any(key.pattern == "*" and key.access == KeyAccess.READWRITE for key in permission.keys):
        return ["~*"]  # Valkey rejects any key pattern added after ~*; it covers them all anyway
    prefix = {KeyAccess.READWRITE: "~", KeyAccess.READ: "%R~", KeyAccess.WRITE: "%W~"}
    return list(dict.fromkeys(prefix[key.access] + key.pattern for key in permission.keys))


def _channel_tokens(permission: Permission) -> list[str]:
    if "*" in permission.channels:
        return ["&*"]  # likewise for channels after &*
    return list(dict.fromkeys("&" + channel for channel in permission.channels))


def role_rules(role: ValkeyRoleSpec) -> list[str]:
    """Category allows, category denies, command allows, command denies (see the module doc)."""
    rules = [f"+@{c.name}" for c in role.categories if c.access == Access.ALLOW]
    rules += [f"-@{c.name}" for c in role.categories if c.access == Access.DENY]
    rules += [f"+{c.name}" for c in role.commands if c.access == Access.ALLOW]
    rules += [f"-{c.name}" for c in role.commands if c.access == Access.DENY]
    return rules


def selector(permission: Permission, role: ValkeyRoleSpec) -> str:
    tokens = [*_key_tokens(permission), *_channel_tokens(permission), *role_rules(role)]
    return "(" + " ".join(selector_token(token) for token in tokens) + ")"


def user_acl(user: AclUser, roles: dict[str, ValkeyRoleSpec]) -> UserAcl:
    """A validated spec user's rules; `roles` must hold every role its permissions reference."""
    hashes = [f"#{h}" for h in dict.fromkeys(user.password_hashes)]
    selectors = [selector(p, roles[p.role_ref]) for p in user.permissions]
    return UserAcl(user.username, ("reset", "on", *hashes, *TOPOLOGY_COMMANDS, *selectors))


def _pattern_problem(what: str, pattern: str) -> str | None:
    if not pattern:
        return f"an empty {what} pattern"
    if any(char.isspace() or ord(char) < 0x20 or ord(char) == 0x7F or char in "()" for char in pattern):
        return f"{what} pattern {pattern!r} holds whitespace, a control character or a parenthesis"
    return None


def _user_problems(user: AclUser) -> Iterable[str]:
    name = user.username
    if not _USERNAME.fullmatch(name):
        yield f"username {name!r} may contain only letters, digits, '.', '_' and '-'"
    elif name in RESERVED_USERNAMES:
        yield f"username {name} is reserved"
    if not user.password_hashes and not user.by_certificate:
        yield f"user {name} has no password hash"
    for password_hash in user.password_hashes:
        if not _PASSWORD_HASH.fullmatch(password_hash):
            yield f"user {name} has a password hash that is not 64 lowercase hex characters"
    for permission in user.permissions:
        for key in permission.keys:
            problem = _pattern_problem("key", key.pattern)
            if problem:
                yield f"user {name}: {problem}"
        for channel in permission.channels:
            problem = _pattern_problem("channel", channel)
            if problem:
                yield f"user {name}: {problem}"


def _spec_of(role: ValkeyRole | ValkeyRoleSpec) -> ValkeyRoleSpec:
    return role.spec if isinstance(role, ValkeyRole) else role


def _command_problems(role_name: str, role: ValkeyRoleSpec) -> Iterable[str]:
    for command in role.commands:
        if not _COMMAND.fullmatch(command.name):
            yield f"ValkeyRole {role_name}: command {command.name!r} is not a lowercase command[|subcommand]"


def role_commands(user: AclUser, roles: RoleLookup) -> tuple[tuple[str, str], ...]:
    """(role, command) for every command rule of the user's roles, deny rules too: Valkey refuses a
    name it does not know either way, so each must be checked against the nodes."""
    found: dict[tuple[str, str], None] = {}
    for permission in user.permissions:
        role = roles(permission.role_ref)
        if role is None:
            continue
        for command in _spec_of(role).commands:
            found[(permission.role_ref, command.name)] = None
    return tuple(found)


def render_acl(
    users: Sequence[AclUser],
    roles: RoleLookup,
    credentials: InternalCredentials,
    exporter: bool = False,
) -> RenderedAcl | AclError:
    """Every user's rules, or the first kind of problem found (each kind lists all its instances).

    Whether Valkey knows each role command is not decided here: the planner asks the nodes
    (acl_decision.py), since an unknown one must hold back only the users that need it.
    """
    names = [user.username for user in users]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    problems = [f"username {name} is listed more than once" for name in duplicates]
    problems += [problem for user in users for problem in _user_problems(user)]

    referenced = list(dict.fromkeys(p.role_ref for user in users for p in user.permissions))
    found: dict[str, ValkeyRoleSpec] = {}
    missing: list[str] = []
    for role_name in referenced:
        role = roles(role_name)
        if role is None:
            missing.append(role_name)
        else:
            found[role_name] = _spec_of(role)
    if missing:
        return AclError("RoleNotFound", "ValkeyRole not found: " + ", ".join(sorted(missing)))

    bad_commands = [p for name, role in found.items() for p in _command_problems(name, role)]
    if problems or bad_commands:
        return AclError("InvalidAcl", "; ".join([*problems, *bad_commands]))
    internal = internal_users(credentials, exporter)
    return RenderedAcl((*internal, *(user_acl(user, found) for user in users)))
