"""ACL users in Valkey's own normal form, so rules the operator renders compare with `ACL LIST`.

Valkey does not print a user's rules as they were given: `ACL SETUSER u reset
on +@read +get +@read` lists as `user u on sanitize-payload resetchannels
alldbs -@all +get +@read`. `normal_form` applies the same rewriting to any
sequence of rules, so `normal_form(rendered) == normal_form(listed)` exactly
when the node enforces the rendered rules. The rewriting, as Valkey 9 does it
(tests/integration/valkey/test_acl_normal_form_server.py checks it on real servers):

- `reset` (or `nocommands`, `-@all`) empties the command rules; `+@all` (or
  `allcommands`) replaces them with `+@all`;
- a command rule `+cmd`/`-cmd` drops earlier rules for that command and for
  its subcommands (`cmd|sub`); `+cmd|sub` drops earlier rules for exactly it;
  a category rule drops earlier rules for the same category; then each is
  appended, so only the last word on a command or category counts;
- key patterns merge by pattern, their read/write flags OR-ed (`~a %R~a` is
  `~a`); channel patterns and password hashes are sets; `~*`/`allkeys`,
  `&*`/`allchannels` and `alldbs` are the same as their spelled-out forms;
- each selector `( ... )` is normalised the same way on its own, and starts
  from no keys, no channels, every database and no commands.
Nothing here knows the operator's users; it is Valkey's semantics only.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence

import attrs

ALL = "*"


@attrs.frozen
class Permissions:
    """Keys, channels, databases and command rules: a user's root permissions or one selector's."""

    keys: tuple[tuple[str, str], ...] = ()
    """(pattern, flags) in first-seen order; flags is 'RW', 'R' or 'W'."""
    channels: frozenset[str] = frozenset()
    databases: frozenset[str] | None = None
    """None: every database (Valkey 9's `alldbs`, also the only meaning before databases had ACLs)."""
    commands: tuple[str, ...] = ()
    """The command rules that still count, in order; `+@all` first when everything is allowed."""


@attrs.frozen
class UserRules:
    """A user as Valkey enforces it."""

    enabled: bool = False
    nopass: bool = False
    passwords: frozenset[str] = frozenset()
    """`#<sha256>` hashes."""
    sanitize_payload: bool = True
    root: Permissions = Permissions()
    selectors: tuple[Permissions, ...] = ()


class AclSyntaxError(ValueError):
    """A rule this model does not know; the caller treats the user as differing."""


def split_rules(text: str) -> list[str]:
    """Split the rules of an `ACL LIST` line (after `user <name>`) into rules, a selector being one."""
    rules: list[str] = []
    depth = 0
    current: list[str] = []
    for word in text.split(" "):
        if not word:
            continue
        if depth == 0 and not word.startswith("("):
            rules.append(word)
            continue
        current.append(word)
        depth += word.count("(") - word.count(")")
        if depth <= 0:
            rules.append(" ".join(current))
            current, depth = [], 0
    if current:
        raise AclSyntaxError(f"unbalanced selector in {text!r}")
    return rules


def parse_acl_list(lines: Iterable[str]) -> dict[str, UserRules]:
    """`ACL LIST` reply lines -> username -> normal form; a line this model cannot read is skipped
    from the result's rules by giving it an empty UserRules (so it never compares equal)."""
    users: dict[str, UserRules] = {}
    for line in lines:
        parsed = _parse_line(line)
        if parsed is not None:
            users[parsed[0]] = parsed[1]
    return users


@functools.lru_cache(maxsize=4096)
def _parse_line(line: str) -> tuple[str, UserRules] | None:
    """One `ACL LIST` line, parsed once: every node of every cluster lists the same users again on
    every probe (a profile of the operator under the side-by-side bench: 9 % of its CPU here)."""
    kind, _, rest = line.partition(" ")
    name, _, rules = rest.partition(" ")
    if kind != "user" or not name:
        return None
    try:
        return name, normal_form(split_rules(rules))
    except AclSyntaxError:
        return name, UserRules(enabled=False, nopass=True)


class _Builder:
    def __init__(self) -> None:
        self.keys: dict[str, set[str]] = {}
        self.channels: set[str] = set()
        self.databases: set[str] | None = None
        self.commands: list[str] = []

    def apply(self, rule: str) -> bool:
        """Apply a permission rule; False when it is not one (a user-level rule)."""
        lowered = rule.lower()
        if lowered in {"allkeys", "~*"}:
            self.keys = {ALL: {"R", "W"}}
        elif lowered == "resetkeys":
            self.keys = {}
        elif rule.startswith("~") or rule.startswith("%"):
            self._key(rule)
        elif lowered in {"allchannels", "&*"}:
            self.channels = {ALL}
        elif lowered == "resetchannels":
            self.channels = set()
        elif rule.startswith("&"):
            self.channels.add(rule[1:])
        elif lowered == "alldbs":
            self.databases = None
        elif lowered == "resetdbs":
            self.databases = set()
        elif lowered.startswith("db="):
            if self.databases is not None:
                self.databases.add(lowered[3:])
        elif lowered in {"allcommands", "+@all"}:
            self.commands = ["+@all"]
        elif lowered in {"nocommands", "-@all"}:
            self.commands = []
        elif rule[:1] in {"+", "-"} and len(rule) > 1:
            self._command(rule[0], rule[1:].lower())
        else:
            return False
        return True

    def _key(self, rule: str) -> None:
        if rule.startswith("~"):
            flags, pattern = {"R", "W"}, rule[1:]
        else:
            spec, sep, pattern = rule[1:].partition("~")
            flags = set(spec.upper())
            if not sep or not flags or not flags <= {"R", "W"}:
                raise AclSyntaxError(f"key rule {rule!r}")
        self.keys.setdefault(pattern, set()).update(flags)

    def _command(self, sign: str, name: str) -> None:
        if name.startswith("@"):
            stale = {name}
            self.commands = [rule for rule in self.commands if rule[1:] not in stale]
        else:
            parent = "|" not in name
            self.commands = [
                rule
                for rule in self.commands
                if rule[1:] != name and not (parent and rule[1:].startswith(name + "|"))
            ]
        self.commands.append(sign + name)

    def build(self) -> Permissions:
        keys = tuple((pattern, "".join(sorted(flags))) for pattern, flags in self.keys.items())
        if any(pattern == ALL and flags == "RW" for pattern, flags in keys):
            keys = ((ALL, "RW"),)
        channels = frozenset({ALL}) if ALL in self.channels else frozenset(self.channels)
        databases = None if self.databases is None else frozenset(self.databases)
        return Permissions(keys, channels, databases, tuple(self.commands))


def _unquote(word: str) -> str:
    """A selector token Valkey splits with sdssplitargs: a double-quoted one loses its quotes."""
    if len(word) >= 2 and word[0] == '"' and word[-1] == '"':
        return re.sub(r"\\(.)", r"\1", word[1:-1])
    return word


def normal_form(rules: Sequence[str]) -> UserRules:
    """The user that `ACL SETUSER <name> <rules...>` applied to a fresh user makes."""
    enabled, nopass, sanitize = False, False, True
    passwords: dict[str, None] = {}
    root = _Builder()
    selectors: list[Permissions] = []
    for rule in rules:
        lowered = rule.lower()
        if lowered == "reset":
            enabled, nopass, sanitize = False, False, True
            passwords, root, selectors = {}, _Builder(), []
        elif lowered in {"on", "off"}:
            enabled = lowered == "on"
        elif lowered == "nopass":
            nopass, passwords = True, {}
        elif lowered == "resetpass":
            nopass, passwords = False, {}
        elif rule.startswith("#"):
            passwords[rule.lower()] = None
            nopass = False
        elif rule.startswith("!"):
            passwords.pop("#" + rule[1:].lower(), None)
        elif lowered in {"sanitize-payload", "skip-sanitize-payload"}:
            sanitize = lowered == "sanitize-payload"
        elif lowered == "clearselectors":
            selectors = []
        elif rule.startswith("(") and rule.endswith(")"):
            selector = _Builder()
            for word in rule[1:-1].split():
                if not selector.apply(_unquote(word)):
                    raise AclSyntaxError(f"selector rule {word!r}")
            selectors.append(selector.build())
        elif not root.apply(rule):
            raise AclSyntaxError(f"rule {rule!r}")
    return UserRules(
        enabled=enabled,
        nopass=nopass,
        passwords=frozenset(passwords),
        sanitize_payload=sanitize,
        root=root.build(),
        selectors=tuple(selectors),
    )
