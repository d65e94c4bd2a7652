"""ValkeyCluster: a sharded Valkey cluster built from a ValkeyConfig (SPEC 1.4)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, ClassVar

import attrs

from valkey_operator.api.backup import BackupSchedule, PointInTimeStatus, Restore, RestoreStatus
from valkey_operator.api.convert import Model, empty_to_none
from valkey_operator.api.external import ExternalAccess, ExternalEndpoint
from valkey_operator.api.fields import (
    KEY,
    Schema,
    cel_list,
    conditions,
    described,
    item,
    lit,
    matches,
    name_ref,
    observed_generation,
    qualified_keys,
    raw,
    rule,
    schema,
)
from valkey_operator.api.limits import (
    ACL_PATTERN,
    DNS_LABEL_1035,
    LABEL_VALUE,
    MAX_ACL_USERS,
    MAX_ANNOTATION_VALUE,
    MAX_ANNOTATIONS,
    MAX_CLUSTER_NAME,
    MAX_LABEL_VALUE,
    MAX_MESSAGE,
    MAX_NAME,
    MAX_NODE_SELECTOR,
    MAX_PASSWORD_HASHES,
    MAX_PATTERN,
    MAX_PATTERNS,
    MAX_PERMISSIONS,
    MAX_PULL_SECRETS,
    MAX_QUALIFIED_NAME,
    MAX_REPLICAS_PER_SHARD,
    MAX_SHARDS,
    MAX_STATUS_NODES,
    MAX_TOLERATIONS,
    MAX_USERNAME,
    MAX_ZONES,
    PASSWORD_HASH,
    USERNAME,
)
from valkey_operator.api.meta import Condition, ObjectMeta
from valkey_operator.api.network import NetworkPolicySpec
from valkey_operator.api.resources import (
    CLIENT_SERVICE_SUFFIX,
    GENERATED_USERNAME,
    INTERNAL_SECRET_SUFFIX,
    RESERVED_ANNOTATION_PREFIX,
    RESERVED_USERNAMES,
    VALKEY_CLUSTERS,
)
from valkey_operator.core.resource import Resource

# Schema defaults; repeated here so a model built in code means what the server would store.
DEFAULT_SHARDS = 3
DEFAULT_REPLICAS_PER_SHARD = 1

# The cluster's condition types.
READY = "Ready"
PROGRESSING = "Progressing"
DEGRADED = "Degraded"
STALLED = "Stalled"
"""kstatus's abnormal-true condition: True (kstatus Failed) while the operator cannot go on by itself:
a new cluster that cannot serve, or what only a human can lift (an operator flag, RBAC, an image
that never pulls: controllers/cluster/decision/stalled.py)."""


class KeyAccess(enum.StrEnum):
    READ = "read"
    WRITE = "write"
    READWRITE = "readwrite"


class ZoneSpread(enum.StrEnum):
    """Unset in a spec means the operator config's defaultZoneSpread."""

    BEST_EFFORT = "bestEffort"
    REQUIRED = "required"


class TolerationOperator(enum.StrEnum):
    EXISTS = "Exists"
    EQUAL = "Equal"


class TaintEffect(enum.StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


class ClientAuth(enum.StrEnum):
    OPTIONAL = "Optional"
    REQUIRED = "Required"


class Authentication(enum.StrEnum):
    PASSWORD = "Password"
    CERTIFICATE = "Certificate"


class ClusterState(enum.StrEnum):
    CREATING = "Creating"
    ACTIVE = "Active"
    UPDATING = "Updating"
    FAILED = "Failed"


class NodeRole(enum.StrEnum):
    PRIMARY = "primary"
    REPLICA = "replica"


class SwitchoverPhase(enum.StrEnum):
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    REFUSED = "Refused"
    FAILED = "Failed"


def _acl_pattern(description: str, what: str) -> Schema:
    message = f"a {what} pattern is a glob without spaces, parentheses or control characters"
    return item(
        description,
        min_length=1,
        max_length=MAX_PATTERN,
        rules=[matches(ACL_PATTERN, message, got=message + "; got ")],
    )


@described("A key pattern and the access granted to it.")
@attrs.frozen(kw_only=True)
class KeyPattern(Model):
    """A key glob; access defaults to readwrite as in the schema."""

    pattern: str = attrs.field(
        metadata={KEY: _acl_pattern("Glob-style key pattern, for example app:* (ACL ~pattern).", "key")}
    )
    access: KeyAccess = attrs.field(
        default=KeyAccess.READWRITE,
        metadata=schema(
            "read (%R~), write (%W~) or readwrite (~, the default).", max_length=16, publish_default=True
        ),
    )


@described("A role applied to a set of keys and channels.")
@attrs.frozen(kw_only=True)
class Permission(Model):
    """One ACL selector: a role's commands limited to these keys and channels."""

    role_ref: str = attrs.field(
        metadata=name_ref("Name of the ValkeyRole whose commands apply.", "ValkeyRole")
    )
    keys: tuple[KeyPattern, ...] = attrs.field(
        default=(),
        metadata=schema(
            "Key patterns the role's commands may touch. Without keys the entry grants no key access.",
            max_items=MAX_PATTERNS,
        ),
    )
    channels: tuple[str, ...] = attrs.field(
        default=(),
        metadata=schema(
            "Pub/Sub channel patterns the role's commands may use (ACL &pattern). "
            "Without channels the entry grants no channel access.",
            max_items=MAX_PATTERNS,
            items=_acl_pattern("Glob-style channel pattern, for example events:*.", "channel"),
        ),
    )


_RESERVED = cel_list(RESERVED_USERNAMES)
_RESERVED_TEXT = ", ".join(RESERVED_USERNAMES)
_HASH_MESSAGE = (
    "a password hash is the SHA-256 of the password as exactly 64 lowercase hex characters (0-9, a-f)"
)


_GENERATED_NAME = (
    "lowercase letters and digits, with '.' between them but no '-' (the last '-' of "
    "<cluster>-<username> must separate the cluster from the user, so no two clusters' Secrets "
    "share a name), and not " + INTERNAL_SECRET_SUFFIX
)


@described(
    "One Valkey ACL user.",
    rules=[
        rule(
            "!(has(self.passwordHashes) && has(self.passwordSecretName))",
            "set passwordHashes or passwordSecretName, not both",
            reason="FieldValueForbidden",
            field_path=".passwordSecretName",
        ),
        rule(
            "!(has(self.authentication) && self.authentication == 'Certificate') || "
            "!(has(self.passwordHashes) || has(self.passwordSecretName))",
            "a user with authentication Certificate has no password: set neither passwordHashes "
            "nor passwordSecretName",
            reason="FieldValueForbidden",
            field_path=".authentication",
        ),
        rule(
            "has(self.passwordHashes) || has(self.passwordSecretName) || "
            "(has(self.authentication) && self.authentication == 'Certificate') || "
            f"(self.username.matches({raw(GENERATED_USERNAME)}) && "
            f"self.username != {lit(INTERNAL_SECRET_SUFFIX)})",
            "a user without passwordHashes or passwordSecretName gets a generated Secret named "
            f"<cluster>-<username>, so its username must be {_GENERATED_NAME}",
            message_expression=lit("user ")
            + " + self.username + "
            + lit(
                " has neither passwordHashes nor passwordSecretName, so the operator generates the "
                f"Secret <cluster>-<username>: the username must then be {_GENERATED_NAME}; "
                "rename the user or set a password source"
            ),
            field_path=".username",
        ),
    ],
)
@attrs.frozen(kw_only=True)
class AclUser(Model):
    """Where the user's passwords come from: at most one of two sources, or a generated Secret.

    `password_hashes` are lowercase hex SHA-256 (listing old and new rotates without downtime);
    `password_secret_name` names a Secret whose values are the passwords; with neither, the
    operator generates the `<cluster>-<username>` Secret (SPEC 1.9).
    """

    username: str = attrs.field(
        metadata=schema(
            f"The user's name: letters, digits, '.', '_' and '-'. Unique in the list; {_RESERVED_TEXT} "
            "are reserved (the default user is disabled; the others are the operator's internal users).",
            min_length=1,
            max_length=MAX_USERNAME,
            rules=[
                matches(
                    USERNAME,
                    "a username may contain only letters, digits, '.', '_' and '-'",
                    got="a username may contain only letters, digits, '.', '_' and '-'; got ",
                ),
                rule(
                    f"!(self in {_RESERVED})",
                    f"is reserved: {_RESERVED_TEXT} belong to Valkey and the operator",
                    message_expression=lit("username ")
                    + " + self + "
                    + lit(
                        f" is reserved ({_RESERVED_TEXT} belong to Valkey and the operator); "
                        "choose another name"
                    ),
                ),
            ],
        )
    )
    password_hashes: tuple[str, ...] = attrs.field(
        default=(),
        metadata=schema(
            "SHA-256 hashes of the user's passwords as lowercase hex (the first field printed by "
            'printf %s "$PASSWORD" | sha256sum). Any listed password works, so rotate by listing old '
            "and new, then removing the old. Not with passwordSecretName; with neither, the operator "
            "generates the Secret <cluster>-<username> (keys username, password and uri) once.",
            min_items=1,
            max_items=MAX_PASSWORD_HASHES,
            list_type="set",
            items=item(
                "SHA-256 of a password: exactly 64 lowercase hex characters.",
                max_length=64,
                rules=[
                    rule(
                        f"self.matches({raw(PASSWORD_HASH)})",
                        _HASH_MESSAGE,
                        message_expression=lit(_HASH_MESSAGE + "; this one ")
                        + " + (self.size() != 64 ? "
                        + lit("has another length")
                        + " : self.matches('[A-F]') ? "
                        + lit("has uppercase characters")
                        + " : "
                        + lit("has characters other than 0-9 and a-f")
                        + ")",
                    )
                ],
            ),
        ),
    )
    password_secret_name: str | None = attrs.field(
        default=None,
        metadata=name_ref(
            "Name of a Secret in the cluster's namespace whose values are the user's passwords (any "
            "key names, one password per key; several keys during a rotation). The operator hashes "
            "them and watches the Secret: a changed Secret is applied to every node with ACL SETUSER, "
            "without restarts. A missing or empty Secret holds the cluster with reason "
            "PasswordSecretInvalid. Not with passwordHashes.",
            "Secret",
        ),
    )
    authentication: Authentication | None = attrs.field(
        default=None,
        metadata=schema(
            "Password (the default): the user logs in with AUTH and one of its passwords. "
            "Certificate: the user has no password and logs in only by presenting a client "
            "certificate whose subject CN is its username, issued by a CA in the TLS Secret's ca.crt "
            "(Valkey's tls-auth-clients-user CN). Needs spec.tls.clientAuth Required.",
            max_length=16,
        ),
    )
    permissions: tuple[Permission, ...] = attrs.field(
        default=(),
        metadata=schema(
            "What the user may do. Each entry becomes its own ACL selector, pairing one role's "
            "commands with that entry's keys and channels, so one entry's keys never gain another "
            "entry's commands.",
            required=True,
            min_items=1,
            max_items=MAX_PERMISSIONS,
        ),
    )

    @property
    def by_certificate(self) -> bool:
        """Logs in by client certificate only: it has no password."""
        return self.authentication is Authentication.CERTIFICATE

    @property
    def generated_password(self) -> bool:
        """Whether the operator generates this user's password Secret."""
        return not self.password_hashes and self.password_secret_name is None and not self.by_certificate


@attrs.frozen(kw_only=True)
class Tls(Model):
    secret_ref: str = attrs.field(
        metadata=name_ref(
            "Name of a kubernetes.io/tls Secret in the cluster's namespace with tls.crt, "
            "tls.key and ca.crt (one or more CAs). Checked before use: a missing, expired or "
            "mismatched one holds the cluster with reason TlsSecretInvalid.",
            "Secret",
        )
    )
    client_auth: ClientAuth | None = attrs.field(
        default=None,
        metadata=schema(
            "Optional (the default): clients may present a certificate, which is then verified "
            "(tls-auth-clients optional). Required: every client must present a certificate issued by "
            "a CA in ca.crt (tls-auth-clients yes), and a certificate whose subject CN names an ACL "
            "user logs in as that user without a password (tls-auth-clients-user CN); the operator "
            "presents the Secret's own certificate. A change is applied to every node at runtime, "
            "without restarts.",
            max_length=16,
        ),
    )

    @property
    def clients_need_certificates(self) -> bool:
        return self.client_auth is ClientAuth.REQUIRED


def presents_certificate(spec: Tls | None, recorded: TlsStatus | None) -> bool:
    """Whether the operator presents the TLS Secret's certificate to the nodes: while the spec
    requires client certificates, and until every node was seen to require none (a node still
    requiring them must let the operator in to be told it need not any more). Not otherwise: a
    Secret whose new leaf comes from a CA the nodes have not loaded yet must not lock it out."""
    if spec is None:
        return False
    return spec.clients_need_certificates or (
        recorded is not None and recorded.client_auth is ClientAuth.REQUIRED
    )


@described("The redis_exporter sidecar: one in every Valkey pod, on the pod IP's port 9121 (named metrics).")
@attrs.frozen(kw_only=True)
class Exporter(Model):
    enabled: bool = attrs.field(
        default=False,
        metadata=schema(
            "Run the real redis_exporter (the operator's --exporter-image) next to every Valkey node, "
            "reading INFO at each scrape with a read-only ACL user of its own. A change rolls the pods "
            "(a sidecar cannot be added to a running pod). Not available with tls.",
            publish_default=True,
        ),
    )


@described("Per-node Valkey metrics in redis_exporter's names.")
@attrs.frozen(kw_only=True)
class Metrics(Model):
    exporter: Exporter | None = attrs.field(
        default=None, metadata=schema("The redis_exporter sidecar (off by default).")
    )

    @property
    def exporter_enabled(self) -> bool:
        return self.exporter is not None and self.exporter.enabled


@described(
    "A toleration, as in a Pod's spec.tolerations.",
    rules=[
        rule(
            "!(has(self.operator) && self.operator == 'Exists' && has(self.value) && self.value != '')",
            "a toleration with operator Exists must not set a value",
        ),
        rule(
            "(has(self.key) && self.key != '') || (has(self.operator) && self.operator == 'Exists')",
            "a toleration without a key must use operator Exists",
        ),
        rule(
            "!has(self.tolerationSeconds) || (has(self.effect) && self.effect == 'NoExecute')",
            "tolerationSeconds requires effect NoExecute",
        ),
    ],
)
@attrs.frozen(kw_only=True)
class Toleration(Model):
    """The core Toleration fields, passed to pods verbatim."""

    key: str | None = attrs.field(
        default=None,
        metadata=schema(
            "Taint key the toleration applies to; empty with operator Exists matches every taint.",
            max_length=MAX_QUALIFIED_NAME,
        ),
    )
    operator: TolerationOperator | None = attrs.field(
        default=None, metadata=schema("Exists or Equal (the default).", max_length=8)
    )
    value: str | None = attrs.field(
        default=None,
        metadata=schema(
            "Taint value to match with operator Equal; empty with Exists.", max_length=MAX_LABEL_VALUE
        ),
    )
    effect: TaintEffect | None = attrs.field(
        default=None,
        metadata=schema(
            "Taint effect to match: NoSchedule, PreferNoSchedule or NoExecute; empty matches all.",
            max_length=16,
        ),
    )
    toleration_seconds: int | None = attrs.field(
        default=None,
        metadata=schema("With effect NoExecute: how long the pod stays bound after the taint appears."),
    )


@attrs.frozen(kw_only=True)
class Placement(Model):
    zones: tuple[str, ...] = attrs.field(
        default=(),
        metadata=schema(
            "Zones (topology.kubernetes.io/zone) the pods may run in: a required node affinity.",
            max_items=MAX_ZONES,
            list_type="set",
            items=item(
                "A zone name (a label value).",
                min_length=1,
                max_length=MAX_LABEL_VALUE,
                rules=[
                    matches(
                        LABEL_VALUE,
                        "a zone must be a valid label value: letters, digits, '-', '_' and '.', "
                        "starting and ending with a letter or digit",
                    )
                ],
            ),
        ),
    )
    zone_spread: ZoneSpread | None = attrs.field(
        default=None,
        metadata=schema(
            "How strictly each shard's pods spread over zones: bestEffort (topology spread "
            "ScheduleAnyway) or required (DoNotSchedule, plus a cluster-wide soft spread). "
            "Unset: the operator's defaultZoneSpread. A change applies to pods created later.",
            max_length=16,
        ),
    )
    node_selector: Mapping[str, str] = attrs.field(
        factory=dict,
        metadata=schema(
            "Node labels the pods require, passed verbatim to the pods' nodeSelector.",
            max_properties=MAX_NODE_SELECTOR,
            items=item("Required label value.", max_length=MAX_LABEL_VALUE),
            rules=[
                qualified_keys("label"),
                rule(
                    f"self.all(k, self[k].matches({raw(LABEL_VALUE)}))",
                    "values must be valid label values",
                    message_expression=lit("values must be valid label values; the value of ")
                    + f" + self.filter(k, !self[k].matches({raw(LABEL_VALUE)}))[0] + "
                    + lit(" is not"),
                ),
            ],
        ),
    )
    tolerations: tuple[Toleration, ...] = attrs.field(
        default=(),
        metadata=schema(
            "Tolerations of the pods, as in a Pod's spec.tolerations.", max_items=MAX_TOLERATIONS
        ),
    )
    priority_class_name: str | None = attrs.field(
        default=None, metadata=name_ref("PriorityClass of the pods.", "PriorityClass")
    )


_PREFIX = RESERVED_ANNOTATION_PREFIX


@described(
    "ValkeyClusterSpec describes a sharded Valkey cluster built from a ValkeyConfig.",
    rules=[
        rule(
            "has(self.tls) == has(oldSelf.tls)",
            "tls cannot be added or removed after the cluster is created (TLS mode is fixed for the "
            "life of a cluster; tls.secretRef may change)",
            message_expression=(
                "has(oldSelf.tls) ? "
                + lit(
                    "tls cannot be removed after the cluster is created: the cluster stays TLS-only "
                    "(tls.secretRef may change); create a new cluster without tls instead"
                )
                + " : "
                + lit(
                    "tls cannot be added after the cluster is created: the cluster stays plain-text; "
                    "create a new cluster with tls instead"
                )
            ),
            reason="FieldValueForbidden",
            field_path=".tls",
        ),
        rule(
            "has(self.restore) == has(oldSelf.restore)",
            "restore is set at creation only: it cannot be added to or removed from an existing cluster",
            message_expression=(
                "has(oldSelf.restore) ? "
                + lit(
                    "restore cannot be removed after the cluster is created: it records the backup the "
                    "cluster was created from"
                )
                + " : "
                + lit(
                    "restore cannot be added to an existing cluster: a backup is restored only into a new "
                    "cluster; create one with spec.restore instead"
                )
            ),
            reason="FieldValueForbidden",
            field_path=".restore",
        ),
        rule(
            "!has(self.restore) || !has(oldSelf.restore) || self.restore == oldSelf.restore",
            "restore cannot change after the cluster is created; create a new cluster to restore "
            "another source",
            reason="FieldValueForbidden",
            field_path=".restore",
        ),
        rule(
            "!has(self.tls) || !has(self.metrics) || !has(self.metrics.exporter) || "
            "!self.metrics.exporter.enabled",
            "metrics.exporter cannot be enabled on a TLS cluster: redis_exporter checks the server "
            "certificate against the pod IP it dials, which the cluster's certificate need not carry",
            reason="FieldValueForbidden",
            field_path=".metrics.exporter.enabled",
        ),
    ],
)
@attrs.frozen(kw_only=True)
class ValkeyClusterSpec(Model):
    config_ref: str = attrs.field(
        metadata=name_ref(
            "Name of the ValkeyConfig (cluster-scoped) the cluster is built from: image, resources "
            "and valkey.conf settings. Until it resolves, the cluster does not progress.",
            "ValkeyConfig",
        )
    )
    shards: int = attrs.field(
        default=DEFAULT_SHARDS,
        metadata=schema(
            f"Number of shards (primaries); the 16384 slots are spread evenly over them. 1 to "
            f"{MAX_SHARDS}. Scaling moves slots with atomic slot migration; no key is lost.",
            fmt="int32",
            minimum=1,
            maximum=MAX_SHARDS,
            publish_default=True,
        ),
    )
    replicas_per_shard: int = attrs.field(
        default=DEFAULT_REPLICAS_PER_SHARD,
        metadata=schema(
            f"Replicas per shard, 0 to {MAX_REPLICAS_PER_SHARD}. With 0 a lost pod loses its shard's "
            "data (a cache); with replicas a replica is promoted.",
            fmt="int32",
            minimum=0,
            maximum=MAX_REPLICAS_PER_SHARD,
            publish_default=True,
        ),
    )
    acl: tuple[AclUser, ...] = attrs.field(
        default=(),
        metadata=schema(
            "Valkey ACL users, unique by username. Rendered into each node's startup ACL and kept on "
            "every live node: users whose rules differ from the rendered ones (ACL LIST) are set "
            "again, users the operator did not render are deleted. The default user is disabled.",
            max_items=MAX_ACL_USERS,
            list_type="map",
            map_keys=("username",),
        ),
    )
    tls: Tls | None = attrs.field(
        default=None,
        metadata=schema(
            "TLS for clients, replication and the cluster bus (TLS only: the plain port is closed). "
            "Cannot be added or removed after creation. A new secretRef rolls the pods onto the new "
            "Secret; new data in the same Secret (a renewed certificate, a CA bundle) is loaded by "
            "every node without a restart."
        ),
    )
    placement: Placement | None = attrs.field(
        default=None,
        metadata=schema(
            "Where the pods run. A change of zones, nodeSelector, tolerations or priorityClassName "
            "rolls the pods (shard by shard, replicas first); a zoneSpread change replaces no pod."
        ),
    )
    image_pull_secrets: tuple[str, ...] = attrs.field(
        default=(),
        metadata=schema(
            "Names of Secrets (kubernetes.io/dockerconfigjson) in the cluster's namespace used to pull "
            "the Valkey image from a private registry; copied to every Valkey pod's "
            "spec.imagePullSecrets. A change applies to pods created later (it does not roll the "
            "cluster: running pods have already pulled their image).",
            max_items=MAX_PULL_SECRETS,
            list_type="set",
            items=name_ref("Name of an image pull Secret.", "Secret")[KEY],
        ),
    )
    pod_annotations: Mapping[str, str] = attrs.field(
        factory=dict,
        metadata=schema(
            f"Annotations added to every Valkey pod. Keys under {_PREFIX} are the operator's and are "
            "rejected. New and changed keys are patched onto live pods; a removed key stays on a live "
            "pod until the pod is replaced.",
            max_properties=MAX_ANNOTATIONS,
            items=item("Annotation value.", max_length=MAX_ANNOTATION_VALUE),
            rules=[
                rule(
                    f"self.all(k, !k.startsWith({lit(_PREFIX)}))",
                    f"keys with the prefix {_PREFIX} are reserved for the operator",
                    message_expression=lit("annotation ")
                    + f" + self.filter(k, k.startsWith({lit(_PREFIX)}))[0] + "
                    + lit(f" is not allowed: keys with the prefix {_PREFIX} are reserved for the operator"),
                ),
                qualified_keys("annotation"),
            ],
        ),
    )
    metrics: Metrics | None = attrs.field(
        default=None,
        metadata=schema(
            "Per-node Valkey metrics in redis_exporter's names, for the dashboards people already run."
        ),
    )
    network_policy: NetworkPolicySpec | None = attrs.field(
        default=None,
        metadata=schema(
            "Who may reach the cluster's pods: a NetworkPolicy named after the cluster, on unless "
            "enabled is false. The cluster bus (16379) only from the cluster's own pods; the client "
            "port (6379) from clientFrom (default: every pod in the namespace), the cluster's own pods "
            "and the operator; the exporter's port (9121) from metricsFrom (default: every pod in the "
            "namespace). Enforced only by a network plugin that implements NetworkPolicy."
        ),
    )
    external_access: ExternalAccess | None = attrs.field(
        default=None,
        metadata=schema(
            "Clients outside Kubernetes: a Service per pod (NodePort or LoadBalancer), and every node "
            "announces its Service's address in CLUSTER SLOTS, CLUSTER SHARDS and MOVED "
            "(cluster-announce-hostname, cluster-preferred-endpoint-type hostname), so clients inside "
            "the cluster are sent to those addresses too. The cluster bus and the operator keep pod "
            "IPs. Removing it deletes the Services and announces pod IPs again."
        ),
    )
    backup: BackupSchedule | None = attrs.field(
        default=None,
        metadata=schema(
            "Scheduled backups: a ValkeyBackup of this cluster on every tick of schedule, written to "
            "destination; the oldest completed ones beyond keep are deleted with their objects."
        ),
    )
    restore: Restore | None = attrs.field(
        default=None,
        metadata=schema(
            "Create the cluster from a Completed ValkeyBackup (backupName) or from an archived "
            "cluster's history at a second (pointInTime). Set at creation only: it cannot be added, "
            "removed or changed later. From a backup, the cluster is created at the backup's shard "
            "count, each shard loads its object (checked against its SHA-256) and its key count is "
            "verified against the manifest. From an archive (needs persistence mode aof), it is "
            "created at the source's shard count at that moment, each shard loads its primary's "
            "history cut at the second and reports its keys. Then it scales to spec.shards with atomic "
            "slot migration. Until then the cluster is not reported Active; a source that cannot be "
            "used holds it, with the reason in status.restore."
        ),
    )


def _status(description: str, max_length: int, **knobs: Any) -> Any:
    """An optional status string."""
    return attrs.field(default=None, metadata=schema(description, max_length=max_length, **knobs))


def _count(description: str) -> Any:
    """An optional non-negative int32 status count."""
    return attrs.field(default=None, metadata=schema(description, fmt="int32", minimum=0))


@described("One Valkey node (pod) as last observed.")
@attrs.frozen(kw_only=True)
class NodeStatus(Model):
    """One Valkey node (pod) as last observed; fields other than pod and shard appear once known."""

    pod: str = attrs.field(
        metadata=schema("Name of the pod running the node.", max_length=MAX_NAME, required=False)
    )
    shard: int = attrs.field(
        metadata=schema("Shard index the node belongs to.", fmt="int32", minimum=0, required=False)
    )
    role: NodeRole | None = attrs.field(
        default=None, metadata=schema("primary or replica, as Valkey reports it.", max_length=16)
    )
    node_id: str | None = _status("Valkey cluster node id.", 64)
    ip: str | None = _status("IP address of the pod.", 64)
    version: str | None = _status("Valkey version the running binary reports.", 64)
    slots: str | None = _status("Slots the node owns, for example 0-5460.", 131072)
    """Slot ranges a primary owns, like "0-5460"."""
    in_sync: bool | None = attrs.field(
        default=None,
        metadata=schema(
            "Replicas only: the replication link is up and the replica trails its primary by at most "
            "1 MiB (the rule a rolling update and a switchover use before handing a primary over)."
        ),
    )


@attrs.frozen(kw_only=True)
class RolloutStatus(Model):
    """A rolling update under way."""

    shards_updated: int = attrs.field(
        default=0,
        metadata=schema("Shards whose every pod runs the current template.", fmt="int32", minimum=0),
    )
    shards: int = attrs.field(default=0, metadata=schema("Shards in spec.", fmt="int32", minimum=0))
    shard: int = attrs.field(default=0, metadata=schema("The shard rolling now.", fmt="int32", minimum=0))
    step: str = attrs.field(
        default="", metadata=schema("What the rolling shard does in this pass.", max_length=512)
    )
    started_at: str | None = _status("When this rolling update began (RFC 3339).", 64, fmt="date-time")


@attrs.frozen(kw_only=True)
class TlsStatus(Model):
    """The certificate material of a TLS cluster, as the operator last saw and confirmed it."""

    secret_hash: str | None = _status(
        "Hash of the tls.crt, tls.key and ca.crt the operator last saw in the Secret "
        "spec.tls.secretRef names.",
        64,
    )
    changed_at: str | None = _status(
        "When the operator first saw that content (RFC 3339); every node older than this "
        "is reloaded once the kubelet has had time to update the mounted files.",
        64,
        fmt="date-time",
    )
    client_auth: ClientAuth | None = attrs.field(
        default=None,
        metadata=schema(
            "Required while spec.tls.clientAuth is Required or any node may still require client "
            "certificates (the operator then presents the Secret's certificate); Optional once every "
            "node answers without.",
            max_length=16,
        ),
    )
    not_after: str | None = _status(
        "When the earliest certificate a node serves expires (RFC 3339), read from a real "
        "TLS handshake with each node.",
        64,
        fmt="date-time",
    )


@attrs.frozen(kw_only=True)
class SwitchoverStatus(Model):
    """The latest switchover requested with the valkey.gomomento.com/switchover annotation."""

    request: str | None = _status(
        "The annotation value handled (<shard>[/<pod>][@<token>]); a value equal to it is never acted "
        "on again.",
        262144,
    )
    phase: SwitchoverPhase | None = attrs.field(
        default=None,
        metadata=schema(
            "Running, Succeeded (the new primary serves the shard's slots), Refused (nothing was done; "
            "see message) or Failed (the hand-over did not happen in time; the old primary still serves).",
            max_length=16,
        ),
    )
    from_: str | None = attrs.field(
        default=None,
        metadata=schema("The pod that was the shard's primary.", json="from", max_length=MAX_NAME),
    )
    to: str | None = _status("The replica's pod asked to take over.", MAX_NAME)
    message: str | None = _status("Human-readable explanation of the phase.", MAX_MESSAGE)
    started_at: str | None = _status("When the request was accepted (RFC 3339).", 64, fmt="date-time")
    finished_at: str | None = _status(
        "When the request ended: Succeeded, Refused or Failed (RFC 3339).", 64, fmt="date-time"
    )


@described("ValkeyClusterStatus is observed and written by the operator.")
@attrs.frozen(kw_only=True)
class ValkeyClusterStatus(Model):
    state: ClusterState | None = attrs.field(
        default=None, metadata=schema("Lifecycle state: Creating, Active, Updating or Failed.", max_length=16)
    )
    message: str | None = _status("Human-readable explanation of the state.", MAX_MESSAGE)
    endpoint: str | None = _status(
        "The seed address clients connect to: <cluster>-client.<namespace>.svc.<domain>:<port>, "
        "the domain being the operator's --cluster-domain (default cluster.local). It resolves "
        "only to nodes that are cluster members and serve.",
        512,
    )
    """The seed address clients connect to: the client Service, serving members only."""
    observed_generation: int | None = observed_generation()
    shards: int | None = _count("Shards that exist.")
    ready_shards: int | None = _count("Shards whose primary and replicas are ready and in sync.")
    ready_nodes: int | None = _count("Nodes that are ready and joined.")
    ready: str | None = _status(
        "readyNodes/desired nodes (shards x (1 + replicasPerShard)), for example 5/6: the Ready "
        "printer column.",
        32,
    )
    current_image: str | None = _status(
        "The image reference every node runs; while any pod runs an outdated pod template it "
        "keeps its previous value and the cluster is Updating.",
        1024,
    )
    config_hash: str | None = _status(
        "The settingsHash of the effective config every node runs (pod template and runtime "
        "settings confirmed with CONFIG GET); until every node runs it, the previous value stays "
        "and the cluster is Updating.",
        128,
    )
    nodes: tuple[NodeStatus, ...] = attrs.field(
        default=(), metadata=schema("Per-node view.", max_items=MAX_STATUS_NODES)
    )
    rollout: RolloutStatus | None = attrs.field(
        default=None,
        converter=empty_to_none,
        metadata=schema(
            "A rolling update under way (absent when every pod runs the current pod template): shard "
            "by shard, replicas first, each primary handed over with a coordinated failover.",
            empty_is_none=True,
        ),
    )
    max_primaries_per_node: int | None = attrs.field(
        default=None,
        metadata=schema(
            "The most slot-serving primaries one Kubernetes node holds; the operator moves primaries "
            "(coordinated failover) toward at most ceil(primaries / nodes hosting the cluster).",
            fmt="int32",
            minimum=0,
        ),
    )
    tls: TlsStatus | None = attrs.field(
        default=None,
        converter=empty_to_none,
        metadata=schema("TLS clusters only: the certificate material the nodes serve.", empty_is_none=True),
    )
    restore: RestoreStatus | None = attrs.field(
        default=None,
        converter=empty_to_none,
        metadata=schema(
            "Clusters created with spec.restore only: how far the restore has come.",
            empty_is_none=True,
        ),
    )
    last_backup: str | None = _status(
        "Name of the newest Completed ValkeyBackup the schedule in spec.backup created.", MAX_NAME
    )
    point_in_time: PointInTimeStatus | None = attrs.field(
        default=None,
        converter=empty_to_none,
        metadata=schema(
            "spec.backup.pointInTime only: how far every node's history is archived.",
            empty_is_none=True,
        ),
    )
    switchover: SwitchoverStatus | None = attrs.field(
        default=None,
        converter=empty_to_none,
        metadata=schema(
            "The latest switchover requested with the valkey.gomomento.com/switchover annotation "
            "(<shard>[/<pod>][@<token>]): a coordinated CLUSTER FAILOVER to an in-sync replica.",
            empty_is_none=True,
        ),
    )
    external_endpoints: tuple[ExternalEndpoint, ...] = attrs.field(
        default=(),
        metadata=schema(
            "spec.externalAccess only: the address each node announces to clients, once it does.",
            max_items=MAX_STATUS_NODES,
        ),
    )
    conditions: tuple[Condition, ...] = conditions(
        "Conditions: Ready, Progressing and Degraded, each with a reason."
    )


@described(
    "ValkeyCluster is a sharded Valkey cluster built from a ValkeyConfig. The operator creates its "
    "pods, headless Service, ConfigMap, Secret and PodDisruptionBudgets (all owned, garbage "
    'collected with it). The annotation valkey.gomomento.com/paused: "true" stops all changes; '
    "valkey.gomomento.com/switchover: <shard>[/<pod>][@<token>] hands a shard's primary over to an "
    "in-sync replica; a new valkey.gomomento.com/restartedAt value rolls every pod.",
    rules=[
        rule(
            f"self.metadata.name.matches({raw(DNS_LABEL_1035)})",
            f"a ValkeyCluster name must be a DNS-1035 label of at most {MAX_CLUSTER_NAME} characters "
            "(lowercase letters, digits and '-', starting with a letter): it names the cluster's "
            "Service and pods",
            message_expression=lit(
                f"a ValkeyCluster name must be a DNS-1035 label of at most {MAX_CLUSTER_NAME} characters "
                "(lowercase letters, digits and '-', starting with a letter), because it names the cluster's "
                "Service and pods; got "
            )
            + " + self.metadata.name",
            field_path=".metadata.name",
        ),
        rule(
            "!has(self.spec.acl) || !self.spec.acl.exists(u, has(u.authentication) && "
            "u.authentication == 'Certificate') || (has(self.spec.tls) && has(self.spec.tls.clientAuth) "
            "&& self.spec.tls.clientAuth == 'Required')",
            "a user with authentication Certificate needs spec.tls.clientAuth Required",
            field_path=".spec.acl",
        ),
        rule(
            f"!self.metadata.name.endsWith({lit('-' + CLIENT_SERVICE_SUFFIX)})",
            f"a ValkeyCluster name may not end with -{CLIENT_SERVICE_SUFFIX}: the cluster's client "
            f"Service is <cluster>-{CLIENT_SERVICE_SUFFIX} and its peer Service <cluster>, so the "
            "peer Service would take another cluster's client Service name",
            message_expression=lit(
                f"a ValkeyCluster name may not end with -{CLIENT_SERVICE_SUFFIX}: its peer Service "
                f"is named after it, and cluster <x>'s client Service is <x>-{CLIENT_SERVICE_SUFFIX}; "
                "got "
            )
            + " + self.metadata.name",
            field_path=".metadata.name",
        ),
    ],
)
@attrs.frozen(kw_only=True)
class ValkeyCluster(Model):
    RESOURCE: ClassVar[Resource] = VALKEY_CLUSTERS

    metadata: ObjectMeta
    spec: ValkeyClusterSpec
    status: ValkeyClusterStatus | None = None
