"""TLS certificate lifecycle end to end: rotation reloaded live, CA rotation, bad Secrets, expiry.

Real pods running the TLS build of valkey-server, real handshakes. The test
bed's kubelet updates mounted Secret files 2 s after a Secret changes (a real
kubelet takes up to about two minutes); the operator here is told so with
secretSyncSeconds 5. Each rotation runs under the data checker's TLS writes
(one connection per primary, held throughout) and a prober that opens a new
handshake to every node every 0.2 s trusting the CAs the test says a client
trusts. What the operator's status claims is held to what the nodes do
(tls_support): the files in each pod, the CONFIG SETs each node received,
and the client certificates each node accepts.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import socket
import ssl
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from chart_operator import ChartOperator
from cluster_support import (
    SUPERUSER,
    SUPERUSER_PASSWORD,
    Catalog,
    admin_client,
    create_cluster,
    image_config,
    lives_of,
    owned_pods,
    put_tls_secret,
    require_image,
    status_of,
    warnings,
    whole_passes,
)
from cryptography import x509
from tls_support import (
    TLS_FILES,
    ClientIdentity,
    answers,
    client_list,
    every_pod_holds,
    reload_requests,
    write_ca,
)

from controllers.shared import layout
from valkey_operator.core.client import Client
from valkey_operator.core.conditions import find_condition
from valkey_operator.core.resource import SECRETS
from valkey_operator.core.rest import Obj
from valkey_operator.valkey.admin import AdminClient, ValkeyCommandError
from valkey_testbed import certs, images
from valkey_testbed.datachecker import DataChecker
from valkey_testbed.kubelet.control import KubeletControl
from valkey_testbed.operatorproc import LOOPBACK_NETWORKS
from valkey_testbed.wait import NotYet, eventually

SYNC = 5
"""secretSyncSeconds for these tests: the test bed's kubelet writes Secret files after 2 s."""
pytestmark = [
    pytest.mark.integration,
    pytest.mark.usefixtures("valkey_crds"),
    pytest.mark.operator_values(f"operatorConfig.secretSyncSeconds={SYNC}"),
]

ROTATION_BOUND = 60.0
"""Generous bound for Secret change -> every node presenting the new certificate (measured: a few s)."""


class Pki:
    def __init__(self, name: str) -> None:
        self.ca, self.ca_key = certs.issue_ca(name)

    def leaf(self, **validity: Any) -> tuple[bytes, bytes]:
        cert, key = certs.issue_leaf(
            self.ca, self.ca_key, "valkey", ip_addresses=("127.0.0.1",), server=True, client=True, **validity
        )
        return certs.pem(cert), certs.key_pem(key)


def serial_of(pem: bytes) -> str:
    return format(x509.load_pem_x509_certificate(pem).serial_number, "X")


async def create_tls_cluster(
    kube: Client, namespace: str, name: str, config: str, shards: int, replicas: int, secret: str = "tls"
) -> None:
    await create_cluster(kube, namespace, name, config, shards, replicas, tls={"secretRef": secret})


async def active(kube: Client, namespace: str, name: str, timeout: float = 300) -> Obj:
    async def done() -> Obj | NotYet:
        status = await status_of(kube, namespace, name)
        return status if status.get("state") == "Active" else NotYet(status.get("message"))

    return await eventually(done, f"{name} Active", timeout, interval=0.25)


def presented(ip: str, timeout: float = 2.0) -> str:
    """The serial of the certificate the node at ip presents (no verification: we want to see it)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection((ip, layout.VALKEY_PORT), timeout) as raw, context.wrap_socket(raw) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return format(x509.load_der_x509_certificate(der).serial_number, "X")


async def serials(kube: Client, namespace: str, name: str) -> dict[str, str]:
    pods = await owned_pods(kube, namespace, name)
    found = {}
    for pod in pods:
        ip = pod["status"].get("podIP")
        if ip:
            found[pod["metadata"]["name"]] = await asyncio.to_thread(presented, ip)
    return found


async def content_seen(kube: Client, namespace: str, name: str, previous: str) -> str:
    """Wait until status.tls records Secret content other than `previous`; return its hash."""

    async def done() -> str | NotYet:
        recorded = (await status_of(kube, namespace, name)).get("tls") or {}
        current = recorded.get("secretHash", previous)
        return current if current != previous else NotYet(recorded)

    return await eventually(done, f"{name} saw the new Secret content", 60, interval=0.2)


async def everyone_presents(kube: Client, namespace: str, name: str, serial: str, timeout: float) -> float:
    started = time.monotonic()

    async def done() -> bool | NotYet:
        found = await serials(kube, namespace, name)
        return all(value == serial for value in found.values()) or NotYet(found)

    await eventually(done, f"every node of {name} presents {serial}", timeout, interval=0.2)
    return time.monotonic() - started


def client_context(*cas: x509.Certificate) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=certs.pem(*cas).decode())
    context.check_hostname = False  # cluster redirects carry IPs: the CA is verified, not the name
    return context


class HandshakeProber:
    """New TLS handshakes to every node, every 0.2 s, trusting the given CAs; counts failures."""

    def __init__(self, ips: Sequence[str], context: ssl.SSLContext) -> None:
        self.ips, self.context = list(ips), context
        self.attempts = 0
        self.failures: list[str] = []
        self._task: asyncio.Task[None] | None = None

    async def _one(self, ip: str) -> None:
        try:
            _, writer = await asyncio.wait_for(
                asyncio.open_connection(ip, layout.VALKEY_PORT, ssl=self.context), 3.0
            )
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
        except (OSError, ssl.SSLError, TimeoutError) as exc:
            self.failures.append(f"{ip}: {exc}")

    async def _run(self) -> None:
        deadline = time.monotonic() + 600  # bounded
        while time.monotonic() < deadline:
            await asyncio.gather(*(self._one(ip) for ip in self.ips))
            self.attempts += len(self.ips)
            await asyncio.sleep(0.2)

    async def __aenter__(self) -> HandshakeProber:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


async def sync_counts(admin: AdminClient, primaries: Sequence[str]) -> dict[str, tuple[str, str]]:
    """Full and partial resyncs each primary served: unchanged means no replication link broke."""
    counts = {}
    for ip in primaries:
        async with admin.connect(ip) as node:
            stats = await node.info("stats")
        counts[ip] = (stats.get("sync_full", ""), stats.get("sync_partial_ok", ""))
    return counts


async def writer_connections(admin: AdminClient, primaries: Sequence[str]) -> dict[str, set[str]]:
    """Per primary, the ids of the data checker's connections (SUPERUSER's, last command SET or
    WAIT), once it holds one on every primary."""

    async def done() -> dict[str, set[str]] | NotYet:
        found = {}
        for ip in primaries:
            clients = await client_list(admin, ip)
            found[ip] = {
                id_
                for id_, c in clients.items()
                if c.get("user") == SUPERUSER and c.get("cmd") in ("set", "wait")
            }
        return found if all(found.values()) else NotYet(found)

    return await eventually(done, "the writer holds a connection to every primary", 60, interval=0.2)


async def still_open(admin: AdminClient, held: dict[str, set[str]]) -> dict[str, set[str]]:
    """Of the connections in `held`, those each node no longer has (empty: every one still open)."""
    closed = {}
    for ip, ids in held.items():
        gone = ids - set(await client_list(admin, ip))
        if gone:
            closed[ip] = gone
    return closed


@pytest.mark.timeout(900)
async def test_leaf_and_ca_rotation_reach_every_node_without_a_restart_or_a_lost_write(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str, tmp_path: Path
) -> None:
    """A new leaf, then a CA rotation (bundle, new-CA leaf, old CA dropped), judged by the nodes:
    a client certificate of the new CA only is accepted once every node loaded the bundle and the
    old CA's is refused once it was dropped; the writer's connections, held throughout, never
    failed a write."""
    require_image(images.tls_image())
    old, new = Pki("rotation-old-ca"), Pki("rotation-new-ca")
    first = old.leaf()
    await put_tls_secret(kube, namespace, first, certs.pem(old.ca))
    config = await image_config(catalog, images.tls_image())
    await create_tls_cluster(kube, namespace, "rot", config, shards=3, replicas=1)
    status = await active(kube, namespace, "rot")
    assert status["tls"]["notAfter"]
    admin = await admin_client(kube, namespace, "rot")
    admin = AdminClient(
        credentials=admin.credentials,
        ca_pem=certs.pem(old.ca, new.ca).decode(),
        allowed_networks=LOOPBACK_NETWORKS,
    )
    ips = [node["ip"] for node in status["nodes"]]
    primaries = [node["ip"] for node in status["nodes"] if node["role"] == "primary"]
    lives = await lives_of(kube, namespace, "rot")
    syncs = await sync_counts(admin, primaries)
    old_client = ClientIdentity.issue(old.ca, old.ca_key, tmp_path / "old-client")
    new_client = ClientIdentity.issue(new.ca, new.ca_key, tmp_path / "new-client")
    trust_old, trust_new = write_ca(tmp_path / "old", old.ca), write_ca(tmp_path / "new", new.ca)

    async def accepted(trust: Path, identity: ClientIdentity) -> dict[str, str]:
        return await answers(ips, trust, SUPERUSER, SUPERUSER_PASSWORD, identity)

    # The probe tells the CAs apart: the nodes trust only the old CA, so only its client is accepted.
    assert set((await accepted(trust_old, old_client)).values()) == {"PONG"}
    refused = await accepted(trust_old, new_client)
    assert "PONG" not in refused.values(), refused
    checker = DataChecker(
        [(ip, layout.VALKEY_PORT) for ip in primaries],
        replicas=1,
        username=SUPERUSER,
        password=SUPERUSER_PASSWORD,
        ssl=client_context(old.ca, new.ca),
        prefix="tls",
    )
    stop = asyncio.Event()
    async with checker, HandshakeProber(ips, client_context(old.ca, new.ca)) as prober:
        writer = asyncio.create_task(
            checker.run_writer(max_keys=200_000, duration=600, interval=0.01, stop=stop)
        )
        held = await writer_connections(admin, primaries)
        timings = {}
        # 1. A new leaf from the same CA.
        second = old.leaf()
        await put_tls_secret(kube, namespace, second, certs.pem(old.ca))
        timings["leaf"] = await everyone_presents(
            kube, namespace, "rot", serial_of(second[0]), ROTATION_BOUND
        )
        await active(kube, namespace, "rot", 120)
        # 2. CA rotation: the bundle first (the leaf stays; Active again once every node surely
        #    loaded it), then a leaf of the new CA, then the old CA dropped. Each Active is held to
        #    what the nodes accept at once, not after a wait.
        seen = (await status_of(kube, namespace, "rot"))["tls"]["secretHash"]
        await put_tls_secret(kube, namespace, second, certs.pem(old.ca, new.ca))
        started = time.monotonic()
        seen = await content_seen(kube, namespace, "rot", seen)
        await active(kube, namespace, "rot", 120)
        timings["bundle"] = time.monotonic() - started
        bundle_loaded = await accepted(trust_old, new_client)
        assert set(bundle_loaded.values()) == {"PONG"}, (
            f"Active, but not every node loaded the bundle: {bundle_loaded}"
        )
        third = new.leaf()
        await put_tls_secret(kube, namespace, third, certs.pem(old.ca, new.ca))
        timings["new-ca leaf"] = await everyone_presents(
            kube, namespace, "rot", serial_of(third[0]), ROTATION_BOUND
        )
        seen = await content_seen(kube, namespace, "rot", seen)
        await active(kube, namespace, "rot", 120)
        chain = await answers(ips, trust_new, SUPERUSER, SUPERUSER_PASSWORD)  # the server chain, new CA alone
        assert set(chain.values()) == {"PONG"}, chain
        await put_tls_secret(kube, namespace, third, certs.pem(new.ca))
        started = time.monotonic()
        await content_seen(kube, namespace, "rot", seen)
        final = await active(kube, namespace, "rot", 120)
        timings["drop old CA"] = time.monotonic() - started
        dropped = await accepted(trust_new, old_client)
        kept = await accepted(trust_new, new_client)
        stop.set()
        written = await writer
        closed = await still_open(admin, held)
        verified = await checker.verify()
    print(
        f"[tls] rotation timings {dict((k, round(v, 1)) for k, v in timings.items())}, "
        f"{prober.attempts} handshakes, writer {written}"
    )
    assert "PONG" not in dropped.values(), f"Active, but a node still trusts the dropped CA: {dropped}"
    assert set(kept.values()) == {"PONG"}, kept
    # Open connections kept working: the writer's connections of before the rotation are the ones
    # it still holds, and none of its writes failed.
    assert closed == {}, f"connections the writer held before the rotation were closed: {closed}"
    assert written.failed == 0 and not written.errors, written
    assert written.acknowledged > 100
    assert verified.ok, verified
    assert prober.failures == [], prober.failures[:5]
    assert prober.attempts > 100
    assert await lives_of(kube, namespace, "rot") == lives  # no pod replaced or restarted
    assert await sync_counts(admin, primaries) == syncs  # no replication link broke
    assert final["tls"]["secretHash"] != status["tls"]["secretHash"]
    # The operator still reaches every node with only the new CA.
    reports = final["nodes"]
    assert len(reports) == 6 and all(node.get("nodeId") for node in reports)


BAD_SECRETS = {
    "missing": None,
    "no ca.crt": "no-ca",
    "key does not match": "mismatch",
    "expired": "expired",
    "encrypted key": "encrypted",
    "not issued by its CA": "stranger",
}


def bad_secret(kind: str, pki: Pki, namespace: str, name: str) -> Obj:
    cert, key = pki.leaf()
    ca = certs.pem(pki.ca)
    now = datetime.datetime.now(datetime.UTC)
    if kind == "mismatch":
        key = pki.leaf()[1]
    elif kind == "expired":
        cert, key = pki.leaf(
            not_before=now - datetime.timedelta(days=10), not_after=now - datetime.timedelta(days=1)
        )
    elif kind == "encrypted":
        cert_obj, key_obj = certs.issue_leaf(pki.ca, pki.ca_key, "valkey", server=True)
        cert, key = certs.pem(cert_obj), certs.key_pem(key_obj, b"passphrase")
    elif kind == "stranger":
        ca = certs.pem(Pki("stranger").ca)
    body = certs.tls_secret(name, namespace, cert, key, ca)
    if kind == "no-ca":
        del body["data"]["ca.crt"]
    return body


UNPROJECTED = frozenset({None, "no-ca"})
"""Bad Secrets the kubelet cannot project (no Secret; a key the volume lists is missing): it keeps
the last files it wrote, as a real kubelet does, so the nodes' files stay the previous ones."""

EXPECTED = {
    None: "Secret {name} not found",
    "no-ca": "Secret {name} has no ca.crt",
    "mismatch": "tls.key does not match the certificate in tls.crt",
    "expired": "tls.crt expired at",
    "encrypted": "tls.key is encrypted",
    "stranger": "no CA in ca.crt issued tls.crt",
}


@pytest.mark.timeout(300)
async def test_a_bad_secret_at_creation_holds_the_cluster_and_says_why(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str
) -> None:
    require_image(images.tls_image())
    pki = Pki("creation-ca")
    config = await image_config(catalog, images.tls_image())
    for index, kind in enumerate(BAD_SECRETS.values()):
        secret = f"bad-{index}"
        if kind is not None:
            await kube.create(SECRETS, bad_secret(kind, pki, namespace, secret))
        await create_tls_cluster(kube, namespace, f"c{index}", config, 1, 0, secret=secret)

    async def every_one_says_why() -> bool | NotYet:
        found = {}
        for index, kind in enumerate(BAD_SECRETS.values()):
            status = await status_of(kube, namespace, f"c{index}")
            progressing = find_condition(status.get("conditions"), "Progressing") or {}
            wanted = EXPECTED[kind].format(name=f"bad-{index}")
            if progressing.get("reason") != "TlsSecretInvalid" or wanted not in progressing.get(
                "message", ""
            ):
                found[index] = progressing.get("message")
        return not found or NotYet(found)

    await eventually(every_one_says_why, "each cluster blocked with its Secret's problem", 60)
    for index in range(len(BAD_SECRETS)):
        assert await owned_pods(kube, namespace, f"c{index}") == []
    assert await warnings(kube, namespace, "TlsSecretInvalid")
    # Fixing a Secret lets its cluster form (the Secret watch wakes it; no pass waits for a timer).
    await kube.delete(SECRETS, "bad-2", namespace)
    cert, key = pki.leaf()
    await kube.create(SECRETS, certs.tls_secret("bad-2", namespace, cert, key, certs.pem(pki.ca)))
    await active(kube, namespace, "c2", 180)


@pytest.mark.timeout(600)
async def test_a_bad_secret_on_a_running_cluster_keeps_the_old_certificate_until_fixed(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str, kubelet: KubeletControl
) -> None:
    """Each bad Secret reaches the pods' files, and still no node is told to reload: every node
    serves the old certificate until a good Secret replaces it."""
    require_image(images.tls_image())
    pki = Pki("running-ca")
    now = datetime.datetime.now(datetime.UTC)
    short = pki.leaf(not_after=now + datetime.timedelta(days=3))  # inside the 7-day warning
    await put_tls_secret(kube, namespace, short, certs.pem(pki.ca))
    config = await image_config(catalog, images.tls_image())
    await create_tls_cluster(kube, namespace, "run", config, shards=1, replicas=1)
    status = await active(kube, namespace, "run")

    # The expiry: a gauge per node from the served certificate, Degraded and an Event.
    expected = x509.load_pem_x509_certificate(short[0]).not_valid_after_utc.timestamp() - time.time()
    for node in status["nodes"]:
        seconds = await operator.sample(
            "valkey_node_tls_certificate_expiry_seconds",
            {"namespace": namespace, "cluster": "run", "pod": node["pod"]},
        )
        assert seconds is not None and abs(seconds - expected) < 120, (seconds, expected)
    degraded = find_condition(status["conditions"], "Degraded") or {}
    assert degraded.get("reason") == "CertificateExpiring", degraded
    assert await warnings(kube, namespace, "CertificateExpiring")

    # Each bad Secret in turn (the mismatched key last), held until the kubelet wrote it into every
    # pod, for the operator's secretSyncSeconds and for two whole passes after that: Degraded with
    # the Secret's problem, an Event, every node still serving the old certificate, no node sent a
    # CONFIG SET (how a reload is asked for), no pod touched.
    lives = await lives_of(kube, namespace, "run")
    ips = [node["ip"] for node in status["nodes"]]
    admin = await admin_client(kube, namespace, "run")
    admin = AdminClient(
        credentials=admin.credentials, ca_pem=certs.pem(pki.ca).decode(), allowed_networks=LOOPBACK_NETWORKS
    )
    files = {
        layout.TLS_CERT_KEY: short[0],
        layout.TLS_KEY_KEY: short[1],
        layout.TLS_CA_KEY: certs.pem(pki.ca),
    }
    await every_pod_holds(kubelet, kube, namespace, "run", files)  # what the nodes loaded
    reloads = {ip: await reload_requests(admin, ip) for ip in ips}
    held: dict[str, float] = {}
    for kind in sorted(BAD_SECRETS.values(), key=lambda kind: kind == "mismatch"):
        put_at = time.monotonic()
        if kind is None:
            await kube.delete(SECRETS, "tls", namespace)
        else:
            bad = bad_secret(kind, pki, namespace, "tls")
            if await kube.get_or_none(SECRETS, "tls", namespace) is None:
                await kube.create(SECRETS, bad)
            else:
                await kube.replace(SECRETS, bad)
            if kind not in UNPROJECTED:
                files = {key: base64.b64decode(bad["data"][key]) for key in TLS_FILES}
        wanted = EXPECTED[kind].format(name="tls")

        async def reported(wanted: str = wanted) -> Obj | NotYet:
            current = await status_of(kube, namespace, "run")
            degraded = find_condition(current.get("conditions"), "Degraded") or {}
            ok = degraded.get("reason") == "TlsSecretInvalid" and wanted in degraded.get("message", "")
            return current if ok else NotYet(degraded)

        await eventually(reported, f"the bad Secret ({kind}) reported", 60)
        await every_pod_holds(kubelet, kube, namespace, "run", files)
        # A good Secret's content is loaded secretSyncSeconds after the operator first sees it: an
        # operator that reloaded a bad one would have done so by now, and in one of these passes.
        await asyncio.sleep(max(0.0, put_at + SYNC - time.monotonic()))
        await whole_passes(operator, kube, namespace, "run")
        held[str(kind)] = round(time.monotonic() - put_at, 1)
        served = await serials(kube, namespace, "run")
        assert set(served.values()) == {serial_of(short[0])}, f"({kind}) a node serves another leaf: {served}"
        told = {ip: await reload_requests(admin, ip) for ip in ips}
        assert told == reloads, f"({kind}) a node was told to reload: {told}, before {reloads}"
    print(f"[tls] each bad Secret held (s): {held}")
    assert await warnings(kube, namespace, "TlsSecretInvalid")
    # The files on disk now hold a key that does not match the certificate: Valkey itself refuses
    # them, so a reload would not even have taken.
    async with admin.connect(ips[0]) as node:
        with pytest.raises(ValkeyCommandError):
            await node.config_set(
                {"tls-cert-file": layout.TLS_CERT_FILE, "tls-key-file": layout.TLS_KEY_FILE}
            )
    assert await lives_of(kube, namespace, "run") == lives

    # Fixed: a good, long-lived leaf is loaded live and the warnings clear.
    good = pki.leaf()
    await put_tls_secret(kube, namespace, good, certs.pem(pki.ca))
    await everyone_presents(kube, namespace, "run", serial_of(good[0]), ROTATION_BOUND)
    final = await active(kube, namespace, "run", 120)

    async def clear() -> bool | NotYet:
        current = await status_of(kube, namespace, "run")
        degraded = find_condition(current.get("conditions"), "Degraded") or {}
        return degraded.get("status") == "False" or NotYet(degraded)

    await eventually(clear, "Degraded cleared", 60)
    assert await lives_of(kube, namespace, "run") == lives
    assert final["state"] == "Active"
    # The counter the bad Secrets were judged by does move when a node is told to reload.
    moved = {ip: (await reload_requests(admin, ip))["calls"] - reloads[ip]["calls"] for ip in ips}
    assert all(count > 0 for count in moved.values()), moved
