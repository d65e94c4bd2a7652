"""The optional metrics sidecar (spec.metrics.exporter): the real redis_exporter next to Valkey.

Choices, and why:
- A native sidecar (an init container with restartPolicy Always, after a restore's loader): the
  Valkey pod is restartPolicy Never, and a plain second container would keep a pod whose
  valkey-server died Running; a native sidecar ends with the pod's main container and restarts on
  its own if it crashes. It has no readiness probe, so it never holds the pod's readiness, and a
  liveness probe on its /health.
- Its own least-privileged ACL user (EXPORTER_USER, EXPORTER_RULES): INFO and a few read-only
  statistics commands, no keys, no channels, no CONFIG. Not the operator's admin user: the pod
  never holds the admin password (the internal Secret is mounted without it), and redis_exporter
  sends its configured password to any target its `/scrape?target=` endpoint is asked about, so
  whoever reaches port 9121 can collect that password: it must open nothing but statistics.
  The password is derived from the admin password (HMAC-SHA256, so it reveals nothing about it)
  rather than generated: nothing new to keep in the internal Secret's history, the same on every
  pass, and it changes only with the admin password. The sidecar reads it from the internal
  Secret's EXPORTER_PASSWORD_KEY through its environment.
- `--config-command=-`: redis_exporter would otherwise call CONFIG GET * on every scrape, which
  returns every setting (the replication password included) and needs CONFIG rights; maxmemory and
  maxclients reach it through INFO anyway. `--redis-only-metrics`: no Go runtime series (about
  290 per pod, bench/exporter_sidecar.py).
- Listens on $(POD_IP):9121 only, as every listener in our pods, on a port named `metrics`
  (what the chart's PodMonitor for Valkey pods selects).
- Hardened like the Valkey container (security.container_security_context): non-root (the pod's ids),
  read-only root filesystem, no privilege escalation, all capabilities dropped, RuntimeDefault
  seccomp; requests and limits from the measured footprint (17 MiB RSS, ~10 ms CPU per scrape).
- Not on TLS clusters: redis_exporter checks the server certificate's name against the pod IP it
  dials, which the cluster's certificate need not carry; the CRD refuses the combination and the
  render leaves the sidecar out if an old CRD let it through.
"""

from __future__ import annotations

import hashlib
import hmac

from controllers.cluster.render.context import RenderContext
from controllers.cluster.render.security import container_security_context
from controllers.shared import layout, names
from controllers.shared.credentials import InternalCredentials
from valkey_operator.api.resources import EXPORTER_USER
from valkey_operator.core.rest import Obj

CONTAINER_NAME = "exporter"
PORT = 9121
PORT_NAME = "metrics"
EXPORTER_PASSWORD_KEY = "exporter-password"
"""Key of the internal Secret holding the sidecar's password (present only while it is enabled)."""

EXPORTER_RULES: tuple[str, ...] = (
    "+info",
    "+ping",
    "+client|setname",
    "+cluster|info",
    "+latency|latest",
    "+latency|histogram",
    "+slowlog|len",
)
"""Every command redis_exporter v1.74.0 runs with FLAGS and no key checks (its exporter/*.go),
checked by bench/exporter_sidecar.py against real nodes: SLOWLOG GET is the only one refused, on
purpose (it returns the arguments of slow commands, that is key names and values), so the node's
ACL LOG shows that one denial and redis_slowlog_last_id is absent; redis_slowlog_length is there."""

FLAGS: tuple[str, ...] = ("--config-command=-", "--redis-only-metrics")
"""Besides the address and listener (the test bed's redisexporter.SIDECAR_FLAGS, kept equal by a test)."""

RESOURCES: Obj = {
    "requests": {"cpu": "10m", "memory": "32Mi"},
    "limits": {"cpu": "100m", "memory": "64Mi"},
}


def enabled(ctx: RenderContext) -> bool:
    """Whether the pods carry the sidecar: asked for, and not a TLS cluster (module docstring)."""
    metrics = ctx.cluster.spec.metrics
    return metrics is not None and metrics.exporter_enabled and ctx.tls_secret is None


def password(credentials: InternalCredentials) -> str:
    """The sidecar's password: HMAC-SHA256 of its username under the admin password (64 hex)."""
    key = credentials.admin_password.encode()
    return hmac.new(key, EXPORTER_USER.encode(), hashlib.sha256).hexdigest()


def acl_rules(credentials: InternalCredentials) -> tuple[str, ...]:
    """Absolute rules, like the other internal users': no keys, no channels, statistics only."""
    digest = hashlib.sha256(password(credentials).encode()).hexdigest()
    return ("reset", "on", f"#{digest}", *EXPORTER_RULES)


def secret_data(ctx: RenderContext, credentials: InternalCredentials) -> dict[str, str]:
    """The internal Secret's extra key while the sidecar is enabled."""
    return {EXPORTER_PASSWORD_KEY: password(credentials)} if enabled(ctx) else {}


def template_inputs(ctx: RenderContext) -> Obj:
    """What of the sidecar only new pods can change (its presence and image); empty when off, so
    clusters without it keep their template hash."""
    return {"exporter": {"image": ctx.exporter_image}} if enabled(ctx) else {}


def container(ctx: RenderContext) -> Obj:
    def field(name: str, path: str) -> Obj:
        return {"name": name, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": path}}}

    secret = {"secretKeyRef": {"name": names.secret_name(ctx.name), "key": EXPORTER_PASSWORD_KEY}}
    return {
        "name": CONTAINER_NAME,
        "image": ctx.exporter_image,
        "imagePullPolicy": "IfNotPresent",
        "restartPolicy": "Always",
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "args": [
            f"--redis.addr=redis://$(POD_IP):{layout.VALKEY_PORT}",
            f"--web.listen-address=$(POD_IP):{PORT}",
            *FLAGS,
        ],
        "env": [
            field("POD_IP", "status.podIP"),
            {"name": "REDIS_USER", "value": EXPORTER_USER},
            {"name": "REDIS_PASSWORD", "valueFrom": secret},
        ],
        "ports": [{"name": PORT_NAME, "containerPort": PORT, "protocol": "TCP"}],
        "livenessProbe": {
            "httpGet": {"path": "/health", "port": PORT_NAME},
            "initialDelaySeconds": 10,
            "periodSeconds": 20,
            "timeoutSeconds": 5,
            "failureThreshold": 3,
        },
        "securityContext": container_security_context(),
        "resources": RESOURCES,
    }


def with_sidecar(ctx: RenderContext, pod: Obj) -> Obj:
    """pod with the sidecar appended to its init containers (after a restore's loader) when enabled."""
    if not enabled(ctx):
        return pod
    spec = pod["spec"]
    return {**pod, "spec": {**spec, "initContainers": [*spec.get("initContainers", []), container(ctx)]}}
