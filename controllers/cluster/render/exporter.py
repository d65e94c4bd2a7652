"""The optional metrics sidecar (spec.metrics.exporter): the real redis_exporter next to Valkey.

Choices, and why:
- A native sidecar (an init container with restartPolicy Always): the Valkey pod is
  restartPolicy Never, and a plain second container would keep a pod whose valkey-server died
  Running; a native sidecar ends with the pod's main container, restarts on its own if it
  crashes, and does not hold the pod's readiness.
- Its own least-privileged ACL user (EXPORTER_USER, EXPORTER_RULES): INFO and a few read-only
  statistics commands, no keys, no channels, no CONFIG. The pod never holds the operator's admin
  password (the internal Secret is mounted without it), and a sidecar that can read metrics must
  not be able to write data or read the replication password (CONFIG GET masterauth).
- `--config-command=-`: redis_exporter would otherwise call CONFIG GET * on every scrape;
  maxmemory and maxclients reach it through INFO anyway.
- Listens on $(POD_IP):9121 only, as every listener in our pods.
- Hardened like the Valkey container: non-root (the pod's ids), read-only root filesystem, no
  privilege escalation, all capabilities dropped, RuntimeDefault seccomp, requests and limits.
"""

from __future__ import annotations

EXPORTER_USER = "valkey-exporter"
"""The sidecar's Valkey user: reserved, rendered only while the sidecar is enabled."""

EXPORTER_RULES: tuple[str, ...] = (
    "+info",
    "+ping",
    "+client|setname",
    "+cluster|info",
    "+latency|latest",
    "+latency|histogram",
    "+slowlog|len",
)
"""Every command redis_exporter runs with SIDECAR_FLAGS and no key checks (checked against its
v1.74.0 source, exporter/*.go, and by bench/exporter_sidecar.py: no command is refused). SLOWLOG GET
is left out on purpose: it returns the arguments of slow commands, that is key names and values."""

PORT = 9121
PORT_NAME = "exporter"

FLAGS: tuple[str, ...] = ("--config-command=-", "--redis-only-metrics")
"""What the sidecar passes besides the address and listener (testing.redisexporter.SIDECAR_FLAGS)."""
