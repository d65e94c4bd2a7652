"""Shared builders for the render tests, and ports of the Valkey parsers the rendered text must survive."""

from __future__ import annotations

from typing import Any

from controllers.cluster.render.context import RenderContext
from controllers.shared.config_resolve import ResolvedConfig, ResolvedImage
from valkey_operator.api.cluster import ValkeyCluster, ZoneSpread

Obj = dict[str, Any]

UID = "0b5b6a4e-1f7c-4a53-9d0e-4f4f0c6a7e11"


def resolved(
    *,
    tag: str = "9.1.2",
    resources: dict[str, str] | None = None,
    valkey: dict[str, str] | None = None,
    pod_security: dict[str, int] | None = None,
    limits: dict[str, str] | None = None,
    digest: str | None = None,
) -> ResolvedConfig:
    return ResolvedConfig(
        ("cache",),
        ResolvedImage("v9", "valkey/valkey", tag, tag, digest),
        {"cpu": "1", "memory": "1Gi"} if resources is None else resources,
        dict(valkey or {}),
        pod_security or {"runAsUser": 999, "runAsGroup": 999, "fsGroup": 999},
        dict(limits or {}),
    )


def cluster(name: str = "cache", namespace: str = "team-a", **spec: Any) -> ValkeyCluster:
    return ValkeyCluster.from_dict(
        {
            "metadata": {"name": name, "namespace": namespace, "uid": UID, "generation": 1},
            "spec": {"configRef": "cache", **spec},
        }
    )


def context(
    *,
    config: ResolvedConfig | None = None,
    default_zone_spread: ZoneSpread = ZoneSpread.BEST_EFFORT,
    name: str = "cache",
    **spec: Any,
) -> RenderContext:
    return RenderContext(
        cluster=cluster(name, **spec),
        config=config or resolved(),
        default_zone_spread=default_zone_spread,
    )


# ---- ports of Valkey's parsers (src/sds.c sdssplitargs, src/acl.c ACLLoadFromFile) -----------------

_SPACE = b" \t\n\v\f\r"
_HEX = b"0123456789abcdefABCDEF"


def sdssplitargs(line: str) -> list[str] | None:
    """Valkey's sdssplitargs on UTF-8 bytes; None for unbalanced quotes, as Valkey returns NULL."""
    data = line.encode()
    end = len(data)

    def at(i: int) -> int:
        return data[i] if i < end else 0

    args: list[str] = []
    i = 0
    while True:
        while at(i) and at(i) in _SPACE:
            i += 1
        if not at(i):
            return args
        current = bytearray()
        inq = insq = done = False
        while not done:
            c = at(i)
            if inq:
                if c == ord("\\") and at(i + 1) == ord("x") and at(i + 2) in _HEX and at(i + 3) in _HEX:
                    current.append(int(data[i + 2 : i + 4], 16))
                    i += 3
                elif c == ord("\\") and at(i + 1):
                    i += 1
                    escaped = {ord("n"): 10, ord("r"): 13, ord("t"): 9, ord("b"): 8, ord("a"): 7}
                    current.append(escaped.get(at(i), at(i)))
                elif c == ord('"'):
                    if at(i + 1) and at(i + 1) not in _SPACE:
                        return None
                    done = True
                elif not c:
                    return None
                else:
                    current.append(c)
            elif insq:
                if c == ord("\\") and at(i + 1) == ord("'"):
                    i += 1
                    current.append(ord("'"))
                elif c == ord("'"):
                    if at(i + 1) and at(i + 1) not in _SPACE:
                        return None
                    done = True
                elif not c:
                    return None
                else:
                    current.append(c)
            elif c in (ord(" "), ord("\n"), ord("\r"), ord("\t"), 0):
                done = True
            elif c == ord('"'):
                inq = True
            elif c == ord("'"):
                insq = True
            else:
                current.append(c)
            if at(i):
                i += 1
        args.append(current.decode())


def merge_selectors(args: list[str]) -> list[str] | None:
    """ACLMergeSelectorArguments: re-join a selector split over several arguments."""
    merged: list[str] = []
    selector: str | None = None
    for arg in args:
        if selector is None and arg.startswith("(") and not arg.endswith(")"):
            selector = arg
            continue
        if selector is not None:
            selector += " " + arg
            if arg.endswith(")"):
                merged.append(selector)
                selector = None
            continue
        merged.append(arg)
    return None if selector is not None else merged


def parse_acl_file(text: str) -> dict[str, list[str]]:
    """ACLLoadFromFile's tokenising: username -> rule arguments (selectors whole)."""
    users: dict[str, list[str]] = {}
    for raw in text.split("\n"):
        line = raw.strip(" \t\r\n")
        if not line:
            continue
        argv = line.split(" ")
        assert argv[0] == "user" and len(argv) >= 2, line
        assert argv[1] not in users, f"duplicate user {argv[1]}"
        rules = merge_selectors(argv[2:])
        assert rules is not None, f"unmatched parenthesis: {line}"
        users[argv[1]] = [rule.strip("\t\r\n") for rule in rules]
    return users


def selector_ops(selector: str) -> list[str]:
    """aclCreateSelectorFromOpSet: the operations inside `( ... )`."""
    assert selector.startswith("(") and selector.endswith(")"), selector
    ops = sdssplitargs(selector[1:-1])
    assert ops is not None, f"unbalanced quotes in {selector}"
    return ops


def parse_valkey_conf(text: str) -> list[list[str]]:
    """loadServerConfigFromString's tokenising: one argument vector per directive line."""
    directives = []
    for raw in text.split("\n"):
        line = raw.strip(" \t\r\n")
        if not line or line.startswith("#"):
            continue
        args = sdssplitargs(line)
        assert args is not None, f"unbalanced quotes: {line}"
        directives.append(args)
    return directives
