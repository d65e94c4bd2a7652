"""The rules every operator flag and ConfigMap value passes before anything starts (SPEC 1.5).

Each check returns the parsed value or raises `InvalidValue`, whose text is
one line naming the setting, the value and what is allowed: the operator
prints it and exits with status 2, so a typo never shows up later as a
traceback, a listener that cannot bind, or a standby that never leads.
"""

from __future__ import annotations

import ipaddress
import json
import re
import sys
from collections.abc import Sequence

from valkey_operator.valkey.admin import Network

DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS1123_SUBDOMAIN = re.compile(rf"{DNS1123_LABEL.pattern}(\.{DNS1123_LABEL.pattern})*")
BRACKETED = re.compile(r"\[(?P<host>[^\]]*)\]:(?P<port>[^:]*)")
BIND_ALLOWED = (
    "host:port, :port, [IPv6]:port or [IPv4]:port with port 0..65535 (0 picks a free port), or 0 to disable"
)


class InvalidValue(Exception):
    """A setting's value is not allowed; str() is the one line the operator prints before exiting 2."""

    def __init__(self, setting: str, value: str, allowed: str) -> None:
        self.setting = setting
        self.value = value
        self.allowed = allowed
        # json.dumps quotes the value and escapes newlines, so the message stays one line.
        super().__init__(f"invalid {setting} {json.dumps(value)}: allowed {allowed}")


def fail(message: str) -> None:
    """Print a start-up failure as the operator's one line on stderr (whitespace runs collapsed)."""
    print(f"valkey-operator: {' '.join(message.split())}", file=sys.stderr, flush=True)


def choice(setting: str, value: str, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise InvalidValue(setting, value, " or ".join(allowed))
    return value


def integer(setting: str, value: str, minimum: int) -> int:
    """A plain decimal integer >= minimum (no sign, no spaces)."""
    if not (value.isascii() and value.isdigit()) or int(value) < minimum:
        raise InvalidValue(setting, value, f"an integer >= {minimum}")
    return int(value)


def dns1123_label(setting: str, value: str) -> str:
    """A namespace name: lowercase alphanumerics and '-', at most 63, starting and ending alphanumeric."""
    if len(value) > 63 or not DNS1123_LABEL.fullmatch(value):
        raise InvalidValue(
            setting, value, "a DNS-1123 label (lowercase a-z, 0-9 and '-', alphanumeric at both ends, <= 63)"
        )
    return value


def dns1123_subdomain(setting: str, value: str) -> str:
    """An object name such as a Lease's: DNS-1123 labels joined by '.', at most 253 characters."""
    if len(value) > 253 or not DNS1123_SUBDOMAIN.fullmatch(value):
        raise InvalidValue(
            setting,
            value,
            "a DNS-1123 subdomain (lowercase a-z, 0-9, '-' and '.', alphanumeric at both ends, <= 253)",
        )
    return value


def dns_name(setting: str, value: str) -> str:
    """A DNS domain such as cluster.local: a DNS-1123 subdomain whose labels are <= 63 characters."""
    if len(value) > 253 or not DNS1123_SUBDOMAIN.fullmatch(value) or max(map(len, value.split("."))) > 63:
        raise InvalidValue(
            setting, value, "a DNS name (lowercase labels of a-z, 0-9 and '-', <= 63 each, joined by '.')"
        )
    return value


LABEL_KEY = re.compile(rf"({DNS1123_SUBDOMAIN.pattern}/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def labels(setting: str, value: str) -> tuple[tuple[str, str], ...]:
    """key=value,key=value (Kubernetes label keys and values), sorted; "" is none."""
    pairs = []
    for part in filter(None, value.split(",")):
        key, equals, label = part.partition("=")
        if not (equals and LABEL_KEY.fullmatch(key) and len(label) <= 63 and LABEL_VALUE.fullmatch(label)):
            raise InvalidValue(setting, value, "Kubernetes labels as key=value, comma-separated")
        pairs.append((key, label))
    return tuple(sorted(dict(pairs).items()))


def networks(setting: str, value: str) -> tuple[Network, ...]:
    """Comma-separated CIDRs (IPv4 or IPv6, host bits zero); a bare address is a /32 or /128."""
    allowed = "comma-separated CIDRs such as 10.0.0.0/8,fd00::/8 (host bits zero)"
    parsed: list[Network] = []
    for part in value.split(","):
        try:
            parsed.append(ipaddress.ip_network(part.strip()))
        except ValueError:
            raise InvalidValue(setting, value, allowed) from None
    return tuple(parsed)


def bind_address(setting: str, value: str) -> tuple[str, int] | None:
    """host:port, :port (every IPv4 address), [IP]:port, or "0" (disabled: None).

    The brackets take an IPv4 address too, as Go's net.SplitHostPort does, so one form such as
    `[$(POD_IP)]:8080` serves an IPv4 and an IPv6 pod IP alike."""
    if value == "0":
        return None
    bracketed = BRACKETED.fullmatch(value)
    if bracketed:
        host, port = bracketed["host"], bracketed["port"]
        valid_host = _is_ip(host, version=6) or _is_ip(host, version=4)
    else:
        host, sep, port = value.partition(":")
        valid_host = bool(sep) and (not host or _is_ip(host, version=4) or _is_hostname(host))
    if not valid_host or not (port.isascii() and port.isdigit()) or int(port) > 65535:
        raise InvalidValue(setting, value, BIND_ALLOWED)
    return host, int(port)


def distinct_ports(first: tuple[str, str], second: tuple[str, str]) -> None:
    """Two enabled listeners (setting, value) may not ask for the same fixed port."""
    (first_setting, first_value), (second_setting, second_value) = first, second
    first_bound = bind_address(first_setting, first_value)
    second_bound = bind_address(second_setting, second_value)
    if first_bound and second_bound and first_bound[1] == second_bound[1] != 0:
        raise InvalidValue(
            second_setting,
            second_value,
            f"a port other than {first_setting}'s {first_bound[1]}, or 0 to disable one of them",
        )


def _is_hostname(text: str) -> bool:
    """A DNS name whose last label is not all digits (so '1.2.3' is not taken for a name)."""
    return bool(DNS1123_SUBDOMAIN.fullmatch(text)) and not text.rsplit(".", 1)[-1].isdigit()


def _is_ip(text: str, version: int) -> bool:
    try:
        return ipaddress.ip_address(text).version == version
    except ValueError:
        return False
