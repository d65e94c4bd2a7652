"""Valkey's cluster replies the operator reads: CLUSTER NODES lines and CLUSTER GETSLOTMIGRATIONS
entries, parsed into small frozen models whose meaning is pinned down next to the fields (pure)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Self

import attrs

from valkey_operator.valkey.slots import SlotRanges, parse_slot_ranges


class NodeFlag(enum.StrEnum):
    """CLUSTER NODES flags the planner reads (others are kept verbatim)."""

    MYSELF = "myself"
    PRIMARY = "master"
    REPLICA = "slave"
    PFAIL = "fail?"
    FAIL = "fail"
    HANDSHAKE = "handshake"
    NOADDR = "noaddr"


@attrs.frozen(kw_only=True)
class KnownNode:
    """One line of CLUSTER NODES: another node (or itself) as one node sees it."""

    node_id: str
    ip: str | None
    """None when the node has no address ('noaddr', ':0')."""
    flags: frozenset[str] = frozenset()
    primary_id: str | None = None
    connected: bool = True
    slots: SlotRanges = ()
    pong_received_ms: int = 0
    """Unix milliseconds of the last PONG from that node (0: never, or the node itself)."""

    @property
    def failed(self) -> bool:
        """Agreed dead by the cluster (FAIL), not merely suspected (PFAIL)."""
        return NodeFlag.FAIL in self.flags

    @property
    def suspected(self) -> bool:
        return NodeFlag.PFAIL in self.flags

    @property
    def in_handshake(self) -> bool:
        """A MEET under way: the id is a temporary one, not a node's identity."""
        return NodeFlag.HANDSHAKE in self.flags

    @property
    def myself(self) -> bool:
        return NodeFlag.MYSELF in self.flags


def parse_cluster_nodes(text: str) -> tuple[KnownNode, ...]:
    """Parse CLUSTER NODES lines.

    Each line: '<id> <ip:port@cport[,host]> <flags> <primary|-> <ping> <pong> <epoch> <link> <slot>...'.

    Importing/migrating markers ('[5461->-<id>]') are skipped: atomic slot
    migration reports progress through CLUSTER GETSLOTMIGRATIONS instead.
    """
    nodes = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 8:
            continue
        address = fields[1].split("@")[0].split(",")[0]
        flags = frozenset(fields[2].split(","))
        host = None if NodeFlag.NOADDR in flags else address.rpartition(":")[0].strip("[]") or None
        slot_fields = [field for field in fields[8:] if not field.startswith("[")]
        nodes.append(
            KnownNode(
                node_id=fields[0],
                ip=host,
                flags=flags,
                primary_id=None if fields[3] == "-" else fields[3],
                connected=fields[7] == "connected",
                slots=parse_slot_ranges(" ".join(slot_fields)),
                pong_received_ms=int(fields[5]) if fields[5].isdigit() else 0,
            )
        )
    return tuple(nodes)


class MigrationOperation(enum.StrEnum):
    EXPORT = "EXPORT"
    IMPORT = "IMPORT"


TERMINAL_MIGRATION_STATES = frozenset({"success", "failed", "cancelled"})


@attrs.frozen(kw_only=True)
class SlotMigration:
    """One CLUSTER GETSLOTMIGRATIONS entry (Valkey 9 atomic slot migration), as this node reports it."""

    name: str
    operation: MigrationOperation
    slots: SlotRanges
    source_id: str | None
    """Only primaries of the participating shards report source and target."""
    target_id: str | None
    state: str
    """'success', 'failed', 'cancelled' are terminal; any other value is a migration under way."""
    message: str = ""
    last_update_time: int = 0

    @property
    def active(self) -> bool:
        return self.state not in TERMINAL_MIGRATION_STATES

    @property
    def failed(self) -> bool:
        return self.state in {"failed", "cancelled"}

    @classmethod
    def from_reply(cls, entry: Mapping[str, object]) -> Self:
        """From one entry of the reply, decoded to a str-keyed mapping (RESP2 pairs or RESP3 map)."""

        def text(key: str) -> str:
            value = entry.get(key)
            return value.decode() if isinstance(value, bytes) else str(value or "")

        return cls(
            name=text("name"),
            operation=MigrationOperation(text("operation").upper()),
            slots=parse_slot_ranges(text("slot_ranges")),
            source_id=text("source_node") or None,
            target_id=text("target_node") or None,
            state=text("state"),
            message=text("message"),
            last_update_time=int(text("last_update_time") or 0),
        )
