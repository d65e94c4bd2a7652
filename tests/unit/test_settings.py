"""Every operator flag is validated before anything starts: one line naming flag, value, what is allowed."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from controllers.options import ControllerOptions
from valkey_operator import operator, settings, validation
from valkey_operator.__main__ import main
from valkey_operator.objectstore import REFUSE_LOCAL
from valkey_operator.operator import controller_options
from valkey_operator.operator_config import OperatorConfig
from valkey_operator.settings import ANY_ADDRESS, UsageError, parse
from valkey_operator.validation import InvalidValue

NO_SERVICE_ACCOUNT = Path("/nonexistent/serviceaccount/namespace")


def parsed(*argv: str, environ: dict[str, str] | None = None) -> settings.Settings:
    return parse(list(argv), environ or {}, NO_SERVICE_ACCOUNT)


def refused(*argv: str, environ: dict[str, str] | None = None) -> InvalidValue:
    with pytest.raises(InvalidValue) as caught:
        parsed(*argv, environ=environ)
    return caught.value


def test_defaults_dial_any_address_in_cluster_local() -> None:
    result = parsed()
    assert result.node_networks == (ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0"))
    assert ",".join(map(str, result.node_networks)) == ANY_ADDRESS
    assert result.node_networks == ControllerOptions().node_networks  # the in-process default agrees
    assert result.cluster_domain == "cluster.local"
    assert (result.metrics_bind_address, result.health_probe_bind_address) == (":8080", ":8081")
    assert result.workers == {"image": 2, "config": 2, "role": 2, "cluster": 4, "backup": 2}
    assert result.namespaces == ()
    assert result.operator_namespace is None
    assert result.leader_election_namespace is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0", None),
        (":8080", ("", 8080)),
        ("127.0.0.1:0", ("127.0.0.1", 0)),
        ("10.1.2.3:65535", ("10.1.2.3", 65535)),
        ("[::1]:9000", ("::1", 9000)),
        ("[::]:8080", ("::", 8080)),
        ("[fd00::1]:8080", ("fd00::1", 8080)),
        ("[127.0.0.1]:80", ("127.0.0.1", 80)),  # Go's net.SplitHostPort takes it: [$(POD_IP)]:port
        ("localhost:8080", ("localhost", 8080)),
        ("metrics.example.internal:1", ("metrics.example.internal", 1)),
    ],
)
def test_bind_addresses_accepted(value: str, expected: tuple[str, int] | None) -> None:
    assert validation.bind_address("--metrics-bind-address", value) == expected
    assert (
        parsed(f"--metrics-bind-address={value}", "--health-probe-bind-address=0").metrics_bind_address
        == value
    )


@pytest.mark.parametrize(
    "value",
    [
        "",
        "x:y",
        "8080",
        ":",
        ":65536",
        ":-1",
        ":+80",
        ":\uff18\uff10",  # fullwidth digits
        "::1:8080",
        "[::1]",
        "[localhost]:80",
        "[127.0.0.1:80",
        "[]:80",
        "[::1]:80:80",
        "1.2.3:80",
        "256.0.0.1:80",
        "Host:80",
        "host_name:80",
        "-bad:80",
        "127.0.0.1 :80",
    ],
)
def test_bind_addresses_refused(value: str) -> None:
    error = refused(f"--health-probe-bind-address={value}")
    assert error.setting == "--health-probe-bind-address"
    assert error.value == value
    assert "[IPv6]:port" in str(error)


@pytest.mark.parametrize(
    ("metrics", "probe"),
    [(":8080", ":8080"), ("127.0.0.1:9000", "[::1]:9000"), ("10.0.0.1:7000", "10.0.0.2:7000")],
)
def test_metrics_and_probe_on_the_same_port_refused(metrics: str, probe: str) -> None:
    error = refused(f"--metrics-bind-address={metrics}", f"--health-probe-bind-address={probe}")
    assert str(error).startswith(f'invalid --health-probe-bind-address "{probe}": allowed a port other than')
    assert "--metrics-bind-address" in str(error)


@pytest.mark.parametrize(
    ("metrics", "probe"),
    [(":8080", "0"), ("0", ":8080"), ("0", "0"), ("127.0.0.1:0", "127.0.0.1:0"), (":8080", ":8081")],
)
def test_same_port_allowed_when_one_is_disabled_or_ephemeral(metrics: str, probe: str) -> None:
    result = parsed(f"--metrics-bind-address={metrics}", f"--health-probe-bind-address={probe}")
    assert (result.metrics_bind_address, result.health_probe_bind_address) == (metrics, probe)


@pytest.mark.parametrize("flag", ["--namespace", "--leader-election-namespace", "--operator-namespace"])
@pytest.mark.parametrize("value", ["", "Apps", "apps.team", "-apps", "apps-", "a_b", "a" * 64, "ns/x"])
def test_namespaces_must_be_dns1123_labels(flag: str, value: str) -> None:
    error = refused(f"{flag}={value}")
    assert (error.setting, error.value) == (flag, value)
    assert "DNS-1123 label" in str(error)


@pytest.mark.parametrize("value", ["apps", "a", "team-1", "a" * 63, "0abc"])
def test_namespaces_accepted(value: str) -> None:
    result = parsed(f"--namespace={value}", f"--operator-namespace={value}")
    assert (result.namespaces, result.operator_namespace) == ((value,), value)


def test_several_namespaces_are_sorted_and_distinct() -> None:
    assert parsed("--namespace=team-b,team-a,team-b").namespaces == ("team-a", "team-b")


@pytest.mark.parametrize("value", ["a,", ",a", "a,,b", "a,B", "a, b"])
def test_every_listed_namespace_must_be_a_label(value: str) -> None:
    error = refused(f"--namespace={value}")
    assert (error.setting, error.value) == ("--namespace", value)
    assert "DNS-1123 labels" in str(error)


@pytest.mark.parametrize("value", ["valkey-operator-leader", "leader.valkey.example.com", "a" * 253, "x"])
def test_lease_names_accepted(value: str) -> None:
    assert parsed(f"--leader-election-id={value}").leader_election_id == value


@pytest.mark.parametrize("value", ["", "Leader", "leader_1", "leader.", ".leader", "a..b", "a" * 254, "a/b"])
def test_lease_names_must_be_dns1123_subdomains(value: str) -> None:
    error = refused(f"--leader-election-id={value}")
    assert (error.setting, error.value) == ("--leader-election-id", value)
    assert "DNS-1123 subdomain" in str(error)


@pytest.mark.parametrize("value", ["cluster.local", "k8s.example.com", "local", f"{'a' * 63}.io"])
def test_cluster_domains_accepted(value: str) -> None:
    assert parsed(f"--cluster-domain={value}").cluster_domain == value


@pytest.mark.parametrize(
    "value", ["", "Cluster.Local", "cluster.local.", "cluster..local", "clu_ster.local", f"{'a' * 64}.io"]
)
def test_cluster_domains_must_be_dns_names(value: str) -> None:
    error = refused(f"--cluster-domain={value}")
    assert (error.setting, error.value) == ("--cluster-domain", value)
    assert "DNS name" in str(error)


def test_node_networks_are_parsed_in_order() -> None:
    result = parsed("--node-networks=10.0.0.0/8, 127.0.0.0/8,fd00::/8,192.0.2.7")
    assert result.node_networks == tuple(
        ipaddress.ip_network(text) for text in ("10.0.0.0/8", "127.0.0.0/8", "fd00::/8", "192.0.2.7/32")
    )


@pytest.mark.parametrize(
    "value", ["", "10.0.0.0/33", "10.0.0.1/8", "10.0.0.0/8,", "10.0.0.0/8,,127.0.0.0/8", "any", "fd00::1/8"]
)
def test_node_networks_must_be_cidrs(value: str) -> None:
    error = refused(f"--node-networks={value}")
    assert (error.setting, error.value) == ("--node-networks", value)
    assert "CIDRs" in str(error)


def test_backup_endpoints_refuse_loopback_and_link_local_unless_a_network_is_allowed() -> None:
    default = parsed()
    assert default.backup_endpoint_allowed_networks == ()
    assert operator.controller_options(default, OperatorConfig()).backup_endpoints == REFUSE_LOCAL
    assert ControllerOptions().backup_endpoints == REFUSE_LOCAL  # the in-process default agrees
    allowed = parsed("--backup-endpoint-allowed-networks=127.0.0.0/8, fe80::/64")
    assert allowed.backup_endpoint_allowed_networks == (
        ipaddress.ip_network("127.0.0.0/8"),
        ipaddress.ip_network("fe80::/64"),
    )
    policy = operator.controller_options(allowed, OperatorConfig()).backup_endpoints
    assert policy.refusal("127.0.0.1") is None and policy.refusal("169.254.169.254") == "link-local"
    error = refused("--backup-endpoint-allowed-networks=localhost")
    assert (error.setting, error.value) == ("--backup-endpoint-allowed-networks", "localhost")


@pytest.mark.parametrize(("flag", "value"), [("--log-format", "text"), ("--log-level", "verbose")])
def test_log_format_and_level_are_enums(flag: str, value: str) -> None:
    error = refused(f"{flag}={value}")
    assert (error.setting, error.value) == (flag, value)


def test_log_format_and_level_accepted() -> None:
    result = parsed("--log-format=console", "--log-level=debug")
    assert (result.log_format, result.log_level) == ("console", "debug")


@pytest.mark.parametrize("controller", settings.CONTROLLERS)
@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5", "", " 3"])
def test_worker_counts_are_positive_integers(controller: str, value: str) -> None:
    error = refused(f"--{controller}-workers={value}")
    assert str(error) == f'invalid --{controller}-workers "{value}": allowed an integer >= 1'


def test_worker_counts_accepted() -> None:
    assert parsed("--cluster-workers=16", "--role-workers=1").workers["cluster"] == 16


def test_steady_probe_cap_defaults_to_five_minutes_and_is_at_least_thirty_seconds() -> None:
    assert parsed().steady_probe_max_seconds == 300 == ControllerOptions().steady_probe_max_seconds
    assert parsed("--steady-probe-max-seconds=30").steady_probe_max_seconds == 30
    error = refused("--steady-probe-max-seconds=29")
    assert str(error) == 'invalid --steady-probe-max-seconds "29": allowed an integer >= 30'


def test_kubeconfig_must_exist(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    assert refused(f"--kubeconfig={missing}").setting == "--kubeconfig"
    present = tmp_path / "kubeconfig.yaml"
    present.write_text("apiVersion: v1\n")
    assert parsed(f"--kubeconfig={present}").kubeconfig == str(present)


def test_operator_namespace_from_flag_then_env_then_service_account(tmp_path: Path) -> None:
    account = tmp_path / "namespace"
    account.write_text("from-account\n")
    env = {"POD_NAMESPACE": "from-env"}
    assert parse(["--operator-namespace=from-flag"], env, account).operator_namespace == "from-flag"
    assert parse([], env, account).operator_namespace == "from-env"
    assert parse([], {}, account).operator_namespace == "from-account"
    assert parse([], {}, NO_SERVICE_ACCOUNT).operator_namespace is None


def test_operator_namespace_from_env_or_file_is_validated(tmp_path: Path) -> None:
    assert refused(environ={"POD_NAMESPACE": "Bad_NS"}).setting == "POD_NAMESPACE"
    account = tmp_path / "namespace"
    account.write_text("Bad_NS")
    with pytest.raises(InvalidValue) as caught:
        parse([], {}, account)
    assert caught.value.setting == str(account)


def test_lease_namespace_defaults_to_the_operator_namespace() -> None:
    result = parsed("--leader-elect", environ={"POD_NAMESPACE": "ops"})
    assert result.leader_election_namespace == "ops"
    explicit = parsed(
        "--leader-elect", "--leader-election-namespace=leases", environ={"POD_NAMESPACE": "ops"}
    )
    assert explicit.leader_election_namespace == "leases"


def test_leader_election_without_any_namespace_is_refused() -> None:
    error = refused("--leader-elect")
    assert error.setting == "--leader-election-namespace"


def test_argparse_complaints_are_one_line() -> None:
    with pytest.raises(UsageError, match="unrecognized arguments: --metrics-port=1"):
        parsed("--metrics-port=1")
    with pytest.raises(UsageError, match="--cluster-domain"):
        parsed("--cluster-domain")


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--metrics-bind-address=x:y"], 'invalid --metrics-bind-address "x:y": allowed host:port'),
        (["--leader-election-id=Bad_Lease"], 'invalid --leader-election-id "Bad_Lease"'),
        (["--node-networks=10.0.0.0/33"], 'invalid --node-networks "10.0.0.0/33"'),
        (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    ],
)
def test_main_exits_2_with_one_line_and_no_usage(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith(f"valkey-operator: {named}")
    assert "usage:" not in captured.err
    assert "Traceback" not in captured.err


def test_a_value_with_a_newline_stays_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--cluster-domain=cluster.local\nevil"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        'valkey-operator: invalid --cluster-domain "cluster.local\\nevil": allowed a DNS name'
    )
    assert err.count("\n") == 1


def test_operator_pod_labels_reach_the_controllers_sorted_and_checked() -> None:
    found = parsed(
        "--operator-pod-labels=app.kubernetes.io/name=valkey-operator,app.kubernetes.io/instance=ops",
        environ={"POD_NAMESPACE": "valkey-system"},
    )
    assert found.operator_pod_labels == (
        ("app.kubernetes.io/instance", "ops"),
        ("app.kubernetes.io/name", "valkey-operator"),
    )
    options = controller_options(found, OperatorConfig())
    assert (options.operator_namespace, options.operator_pod_labels) == (
        "valkey-system",
        found.operator_pod_labels,
    )
    assert parsed().operator_pod_labels == ()
    for bad in ("novalue", "bad key=x", "k=not ok", "k=" + "x" * 64):
        assert refused(f"--operator-pod-labels={bad}").setting == "--operator-pod-labels"
