"""The chaos run's curated objects (ValkeyImage, ValkeyConfig, ValkeyRole, TLS Secret, ValkeyCluster)
and the spec changes the schedule asks for, each one API write.

Names carry a per-run suffix, so a run never touches another run's (or a
test's) cluster-scoped objects. The cluster is TLS (so the Secret can be
rotated) unless `tls` is off; a TLS cluster's "roll" changes the config's CPU
request (a pod-template change, rolled like an image change: the catalog has
one TLS-capable image), a plain cluster's roll switches the config between
two catalog images.
"""

from __future__ import annotations

import contextlib
import hashlib
import secrets

import attrs
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from valkey_operator.api.resources import GROUP, VALKEY_CLUSTERS, VALKEY_CONFIGS, VALKEY_IMAGES, VALKEY_ROLES
from valkey_operator.core.client import Client
from valkey_operator.core.resource import CONFIG_MAPS, SECRETS, Resource
from valkey_operator.core.rest import ApiError, Obj
from valkey_testbed import certs, images
from valkey_testbed.chaos.schedule import POLICIES

CLUSTER_LABEL = f"{GROUP}/cluster"
"""The label the operator puts on every pod of a cluster (docs/cluster-internals.md)."""
USERNAME = "chaos"
NODE_TIMEOUT_MS = 5000  # >= 5000 ms on the test bed's 2 shared cores (TESTBED.md)
SECRET_SYNC_SECONDS = 5  # the session kubelet writes Secret files after 2 s
CPU_VARIANTS = ("100m", "150m")
PLAIN_IMAGES = ("valkey/valkey:9.1.0",)
"""The second image of a plain cluster's image roll (the first is the newest, TLS-capable build)."""


def internal_secret(cluster: str) -> str:
    """The Secret holding the operator's own users' passwords (SPEC 1.4, owned objects)."""
    return f"{cluster}-internal"


@attrs.frozen
class Names:
    suffix: str
    namespace: str
    tls: bool = True

    @property
    def cluster(self) -> str:
        return "chaos"

    @property
    def config(self) -> str:
        return f"chaos-{self.suffix}"

    @property
    def role(self) -> str:
        return f"chaos-{self.suffix}"

    def image(self, variant: int) -> str:
        return f"chaos-{self.suffix}-{variant}"

    @property
    def secret(self) -> str:
        return "chaos-tls"


class Pki:
    """The cluster's CA and the leaves issued from it (a rotation is a new leaf of the same CA)."""

    def __init__(self) -> None:
        self.ca: x509.Certificate
        self.ca_key: ec.EllipticCurvePrivateKey
        self.ca, self.ca_key = certs.issue_ca("chaos-ca")
        self.issued = 0

    @property
    def ca_pem(self) -> bytes:
        return certs.pem(self.ca)

    def leaf(self) -> tuple[bytes, bytes]:
        self.issued += 1
        cert, key = certs.issue_leaf(
            self.ca, self.ca_key, "valkey", ip_addresses=("127.0.0.1",), server=True, client=True
        )
        return certs.pem(cert), certs.key_pem(key)


@attrs.frozen
class Catalog:
    """Image references of the run: index 0 is what the cluster starts on."""

    references: tuple[str, ...]

    @classmethod
    def for_mode(cls, tls: bool) -> Catalog:
        newest = images.tls_image()
        if images.resolve_image(newest) is None:
            raise RuntimeError(f"{newest} is not installed: run `python -m valkey_testbed build`")
        extra = () if tls else tuple(ref for ref in PLAIN_IMAGES if images.resolve_image(ref) is not None)
        return cls((newest, *extra))


class Objects:
    """Creates the run's objects and applies its spec changes."""

    def __init__(self, kube: Client, names: Names, catalog: Catalog) -> None:
        self.kube = kube
        self.names = names
        self.catalog = catalog
        self.pki = Pki()
        self.password = secrets.token_hex(16)
        self.shards = 0
        self.replicas = 0

    async def create(self, shards: int, replicas: int) -> None:
        names, kube = self.names, self.kube
        await kube.create(
            CONFIG_MAPS,
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "valkey-operator-config", "namespace": names.namespace},
                "data": {"secretSyncSeconds": str(SECRET_SYNC_SECONDS)},
            },
        )
        for variant, reference in enumerate(self.catalog.references):
            version = images.valkey_version(reference)
            image = {"repository": "valkey/valkey", "tag": version, "version": version}
            await kube.create(VALKEY_IMAGES, _body(VALKEY_IMAGES, names.image(variant), image))
        config: Obj = {
            "imageRef": names.image(0),
            "resources": {"cpu": CPU_VARIANTS[0], "memory": "256Mi"},
            "valkey": {"cluster-node-timeout": str(NODE_TIMEOUT_MS), "maxmemory-policy": POLICIES[0]},
        }
        await kube.create(VALKEY_CONFIGS, _body(VALKEY_CONFIGS, names.config, config))
        await kube.create(VALKEY_ROLES, _body(VALKEY_ROLES, names.role, role_spec(0)))
        spec: Obj = {
            "configRef": names.config,
            "shards": shards,
            "replicasPerShard": replicas,
            "acl": [
                {
                    "username": USERNAME,
                    "passwordHashes": [hashlib.sha256(self.password.encode()).hexdigest()],
                    "permissions": [
                        {"roleRef": names.role, "keys": [{"pattern": "*", "access": "readwrite"}]}
                    ],
                }
            ],
        }
        if names.tls:
            await self.put_secret()
            spec["tls"] = {"secretRef": names.secret}
        await kube.create(VALKEY_CLUSTERS, _body(VALKEY_CLUSTERS, names.cluster, spec, names.namespace))
        self.shards, self.replicas = shards, replicas

    async def put_secret(self) -> str:
        """Create or rotate the TLS Secret: a new leaf of the same CA. Returns the leaf's serial."""
        cert, key = self.pki.leaf()
        body = certs.tls_secret(self.names.secret, self.names.namespace, cert, key, self.pki.ca_pem)
        if await self.kube.get_or_none(SECRETS, self.names.secret, self.names.namespace) is None:
            await self.kube.create(SECRETS, body)
        else:
            await self.kube.patch(SECRETS, self.names.secret, {"data": body["data"]}, self.names.namespace)
        return format(x509.load_pem_x509_certificate(cert).serial_number, "X")

    # --- spec changes -------------------------------------------------------------------------------

    async def scale(self, *, shards: int | None = None, replicas: int | None = None) -> None:
        spec: Obj = {}
        if shards is not None:
            spec["shards"] = self.shards = shards
        if replicas is not None:
            spec["replicasPerShard"] = self.replicas = replicas
        await self.kube.patch(VALKEY_CLUSTERS, self.names.cluster, {"spec": spec}, self.names.namespace)

    async def runtime_setting(self, policy: int) -> str:
        value = POLICIES[policy % len(POLICIES)]
        patch = {"spec": {"valkey": {"maxmemory-policy": value}}}
        await self.kube.patch(VALKEY_CONFIGS, self.names.config, patch)
        return value

    async def roll(self, variant: int) -> str:
        """A pod-template change: another catalog image where there is one, else another CPU request."""
        if len(self.catalog.references) > 1:
            index = variant % len(self.catalog.references)
            await self.kube.patch(
                VALKEY_CONFIGS, self.names.config, {"spec": {"imageRef": self.names.image(index)}}
            )
            return f"image {self.catalog.references[index]}"
        cpu = CPU_VARIANTS[variant % len(CPU_VARIANTS)]
        await self.kube.patch(VALKEY_CONFIGS, self.names.config, {"spec": {"resources": {"cpu": cpu}}})
        return f"cpu request {cpu}"

    async def role_edit(self, variant: int) -> None:
        # A merge patch replaces lists whole: the role's categories become exactly the variant's.
        await self.kube.patch(VALKEY_ROLES, self.names.role, {"spec": role_spec(variant)})

    async def cleanup(self) -> None:
        """Delete the cluster-scoped objects (the namespace takes the rest); best effort."""
        names = self.names
        for resource, name in (
            (VALKEY_CLUSTERS, names.cluster),
            (VALKEY_CONFIGS, names.config),
            (VALKEY_ROLES, names.role),
            *((VALKEY_IMAGES, names.image(i)) for i in range(len(self.catalog.references))),
        ):
            with contextlib.suppress(ApiError):
                await self.kube.delete(resource, name, names.namespace if resource.namespaced else None)


def _body(resource: Resource, name: str, spec: Obj, namespace: str | None = None) -> Obj:
    metadata: Obj = {"name": name} if namespace is None else {"name": name, "namespace": namespace}
    return {"apiVersion": resource.api_version, "kind": resource.kind, "metadata": metadata, "spec": spec}


def role_spec(variant: int) -> Obj:
    """What the load's user may run: read, write and WAIT always; the edit toggles @keyspace."""
    categories = [
        {"name": "read", "access": "allow"},
        {"name": "write", "access": "allow"},
        {"name": "dangerous", "access": "deny"},
    ]
    if variant % 2:
        categories.insert(2, {"name": "keyspace", "access": "allow"})
    return {"categories": categories, "commands": [{"name": "wait", "access": "allow"}]}
