"""spec.tls.clientAuth Required and users that log in by certificate (pure parts).

Valkey 9.1.2, checked by hand: with `tls-auth-clients yes` a client without a certificate is cut off
in the handshake; with `tls-auth-clients-user CN` a certificate whose CN names an enabled user logs
in as that user, and one whose CN names no user stays `default` (disabled here), so the operator,
presenting the Secret's own certificate, still logs in with its password. A user with no password
cannot be logged into with AUTH at all.
"""

from __future__ import annotations

import os

import attrs
import observed
from observed import line

from controllers.cluster.decision.actions import SetConfig
from controllers.cluster.decision.context import Context
from controllers.cluster.decision.desired import Desired, DesiredTls
from controllers.cluster.decision.plan import plan
from controllers.cluster.render.acl import render_acl
from controllers.cluster.render.config import owned_directives
from controllers.shared.credentials import InternalCredentials
from controllers.shared.observation import Observation
from controllers.shared.tls import Certificate, TlsMaterial
from valkey_operator.api.cluster import AclUser, Authentication, Permission
from valkey_operator.api.role import AclCategory, CategoryRule, ValkeyRoleSpec
from valkey_operator.valkey.pem_file import pem_path
from valkey_operator.valkey.slots import SlotRange

MATERIAL = TlsMaterial(
    secret="tls", leaf=Certificate(fingerprint="f", serial="F", not_after=2e9), ca_pem="", content_hash="c"
)
CREDENTIALS = InternalCredentials(admin_password="a" * 32, replication_password="r" * 32)


def test_required_client_certificates_are_written_into_valkey_conf() -> None:
    optional = dict(owned_directives(tls=True))
    assert (optional["tls-auth-clients"], optional["tls-auth-clients-user"]) == ("optional", "off")
    required = dict(owned_directives(tls=True, client_certificates=True))
    assert (required["tls-auth-clients"], required["tls-auth-clients-user"]) == ("yes", "CN")
    assert "tls-auth-clients" not in dict(owned_directives(tls=False))


def test_a_certificate_user_gets_no_password_and_no_generated_secret() -> None:
    user = AclUser(
        username="app-x",
        authentication=Authentication.CERTIFICATE,
        permissions=(Permission(role_ref="reader"),),
    )
    assert user.by_certificate and not user.generated_password
    rendered = render_acl(
        [user],
        {"reader": ValkeyRoleSpec(categories=(CategoryRule(name=AclCategory("read")),))}.get,
        CREDENTIALS,
    )
    assert not isinstance(rendered, Exception) and hasattr(rendered, "rules_of"), rendered
    rules = rendered.rules_of("app-x")
    assert rules is not None and rules[:2] == ("reset", "on")
    assert not [rule for rule in rules if rule.startswith(("#", ">", "nopass"))], rules


def test_a_change_of_client_auth_is_set_on_every_live_node_without_a_restart() -> None:
    node = observed.primary(
        "a" * 40,
        slots=(SlotRange(0, 16383),),
        known=(line("a" * 40, "10.0.0.1", slots=(SlotRange(0, 16383),), me=True),),
        config={"tls-auth-clients": "optional", "tls-auth-clients-user": "off"},
    )
    observation = Observation(pods=(observed.pod("vk-0-a", 0, "10.0.0.1"),), nodes={"vk-0-a": node})
    desired = Desired(
        shards=1,
        replicas_per_shard=0,
        template_hash="t1",
        image="i",
        tls=DesiredTls(material=MATERIAL, client_certificates=True),
    )
    sets = [
        dict(a.settings)
        for a in plan(observation, desired, Context(now=0.0)).actions
        if isinstance(a, SetConfig)
    ]
    assert sets and sets[0]["tls-auth-clients"] == "yes" and sets[0]["tls-auth-clients-user"] == "CN"
    back = attrs.evolve(desired, tls=DesiredTls(material=MATERIAL))
    sets = [
        dict(a.settings)
        for a in plan(observation, back, Context(now=0.0)).actions
        if isinstance(a, SetConfig)
    ]
    assert not [s for s in sets if "tls-auth-clients" in s or "tls-auth-clients-user" in s]


def test_a_pem_is_readable_by_path_and_written_to_no_directory() -> None:
    pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    path = pem_path(pem)
    assert path.startswith("/proc/self/fd/")
    with open(path) as found:
        assert found.read() == pem
    assert pem_path(pem) == path
    assert os.readlink(path).startswith("/memfd:")
