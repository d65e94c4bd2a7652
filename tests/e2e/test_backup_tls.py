"""A TLS cluster backed up to a TLS S3 endpoint and restored into a new TLS cluster (SPEC 1.7).

The operator reads each shard's snapshot over the cluster's TLS (verifying its
CA) and writes to an https endpoint whose certificate a private CA signs
(destination.caSecretName); the restoring pods' init containers download over
the same https with that CA mounted. Keys are written and read back through
the valkey-py cluster client over TLS.
"""

from __future__ import annotations

import pytest
from backup_support import destination, finished, restore_cluster, start_backup, storage_secret
from chart_operator import ChartOperator
from cluster_support import Catalog, create_cluster, image_config, put_tls_secret, settled
from keys_support import keys_of, read_back, write

from valkey_operator.core.client import Client
from valkey_operator.core.resource import SECRETS
from valkey_testbed import certs, images
from valkey_testbed.objectstore import ObjectStoreServer

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("valkey_crds")]

TLS = {"secretRef": "tls"}


@pytest.mark.timeout(600)
async def test_a_tls_cluster_is_backed_up_over_https_and_restored_into_a_tls_cluster(
    operator: ChartOperator,
    kube: Client,
    catalog: Catalog,
    namespace: str,
    object_store_tls: ObjectStoreServer,
) -> None:
    ca, ca_key = certs.issue_ca("backup-tls")
    leaf, key = certs.issue_leaf(ca, ca_key, "valkey", ip_addresses=("127.0.0.1",), server=True, client=True)
    ca_pem = certs.pem(ca)
    await put_tls_secret(kube, namespace, (certs.pem(leaf), certs.key_pem(key)), ca_pem)
    config = await image_config(catalog, images.newest_image())
    await create_cluster(kube, namespace, "secure", config, 2, 1, tls=TLS)
    status = await settled(kube, namespace, "secure", 360)
    keys = keys_of("tls", 1000)
    await write(status, keys, ca_pem.decode())

    store_ca = object_store_tls.ca_pem
    assert store_ca is not None and object_store_tls.endpoint.startswith("https://")
    await kube.create(
        SECRETS,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "store-ca", "namespace": namespace},
            "stringData": {"ca.crt": store_ca},
        },
    )
    await storage_secret(kube, namespace, object_store_tls)
    bucket = object_store_tls.create_bucket()
    await start_backup(
        kube, namespace, "secure-1", "secure", destination(object_store_tls, bucket, caSecretName="store-ca")
    )
    backup = await finished(kube, namespace, "secure-1")
    assert backup["phase"] == "Completed", backup
    assert backup["totalKeys"] == len(keys)

    await restore_cluster(kube, namespace, "secure-copy", config, "secure-1", 2, 0, tls=TLS)
    restored = await settled(kube, namespace, "secure-copy", 300)
    assert restored["restore"]["phase"] == "Verified"
    assert not await read_back(restored, keys, ca_pem.decode())
