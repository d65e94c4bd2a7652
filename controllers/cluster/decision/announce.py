"""What a node announces to clients (pure): its pod IP, or with spec.externalAccess its Service's
address (external.py says in which order a new node gets there).

The address goes in cluster-announce-hostname (an IPv4 literal or a DNS name) and
cluster-announce-client-port / -client-tls-port, with cluster-preferred-endpoint-type hostname.
CLUSTER SLOTS, CLUSTER SHARDS and MOVED then name it, while CLUSTER NODES, which the operator reads,
keeps each node's pod IP (it shows the client port, which the operator does not read). The bus and
replication keep pod IPs and real ports (checked on valkey-server 9.1.2).
"""

from __future__ import annotations

from collections.abc import Mapping

from controllers.cluster.render.external import DesiredExternal, announced_address
from valkey_operator.api.tunables import (
    ANNOUNCE_CLIENT_PORT,
    ANNOUNCE_CLIENT_TLS_PORT,
    ANNOUNCE_HOSTNAME,
    PREFERRED_ENDPOINT,
)
from valkey_operator.core.rest import Obj

POD_ADDRESSES: Mapping[str, str] = {
    PREFERRED_ENDPOINT: "ip",
    ANNOUNCE_HOSTNAME: "",
    ANNOUNCE_CLIENT_PORT: "0",
    ANNOUNCE_CLIENT_TLS_PORT: "0",
}
"""What a node of a cluster without externalAccess announces: its pod IP and real port (Valkey's
defaults, as CONFIG GET prints them)."""


def external_address(
    external: DesiredExternal | None, service: Obj | None, host_ip: str | None
) -> tuple[str, int] | None:
    """(host, port) a pod's Service gives it, once there is one (None without externalAccess)."""
    if external is None:
        return None
    return announced_address(service, host_ip)


def wanted(external: DesiredExternal | None, service: Obj | None, host_ip: str | None) -> dict[str, str]:
    """The announce directives a node should run, as CONFIG GET prints them. With externalAccess a
    node without an address yet already answers with hostnames: it announces none of its own, and
    it is not met until it does."""
    if external is None:
        return dict(POD_ADDRESSES)
    found = external_address(external, service, host_ip)
    if found is None:
        return {PREFERRED_ENDPOINT: "hostname"}
    host, port = found
    return {
        PREFERRED_ENDPOINT: "hostname",
        ANNOUNCE_HOSTNAME: host,
        ANNOUNCE_CLIENT_PORT: str(port),
        ANNOUNCE_CLIENT_TLS_PORT: str(port),
    }
