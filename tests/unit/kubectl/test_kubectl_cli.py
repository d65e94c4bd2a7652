"""The command line: kubectl's flags anywhere, --help per command, the context's namespace, and
what the plugin never imports (it asks the operator; it does not dial Valkey)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from valkey_operator.kubectl import cli, kube

PACKAGE = Path(cli.__file__).parent


def test_connection_flags_go_before_or_after_the_command() -> None:
    before = cli.parser().parse_args(["-n", "shop", "--context", "prod", "status", "cache"])
    after = cli.parser().parse_args(["status", "cache", "--namespace=shop", "--context=prod"])
    for args in (before, after):
        assert (args.namespace, args.context, args.cluster) == ("shop", "prod", "cache")
    bare = cli.parser().parse_args(["pause", "cache"])
    assert not hasattr(bare, "namespace") and not hasattr(bare, "kubeconfig")


@pytest.mark.parametrize("command", [name for name, *_ in cli.COMMANDS])
def test_every_command_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main([command, "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert (
        text.startswith(f"usage: kubectl valkey {command}") and "--kubeconfig" in text and "examples:" in text
    )


def test_switchover_waits_unless_told_not_to() -> None:
    assert cli.parser().parse_args(["switchover", "cache", "0"]).wait is True
    args = cli.parser().parse_args(["switchover", "cache", "0", "--to", "cache-0-b", "--no-wait"])
    assert (args.wait, args.to, args.shard) == (False, "cache-0-b", 0)


def test_the_namespace_defaults_to_the_contexts() -> None:
    contexts = [
        {"name": "dev", "context": {"cluster": "c", "user": "u", "namespace": "shop"}},
        {"name": "prod", "context": {"cluster": "c", "user": "u"}},
    ]
    assert kube.context_namespace(contexts, contexts[0], None) == "shop"
    assert kube.context_namespace(contexts, contexts[0], "prod") == "default"
    with pytest.raises(kube.UsageError, match=r"context 'qa' is not in the kubeconfig .*dev, prod"):
        kube.context_namespace(contexts, contexts[0], "qa")


def test_a_missing_kubeconfig_is_exit_status_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["status", "cache", f"--kubeconfig={tmp_path / 'absent'}"]) == 2
    assert "error: no kubeconfig at" in capsys.readouterr().err


def test_the_plugin_never_dials_valkey_nor_runs_controller_code() -> None:
    for path in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in {"valkey", "controllers"}, f"{path.name} imports {name}"
                assert not name.startswith("valkey_operator.valkey"), f"{path.name} imports {name}"


def test_api_errors_read_as_one_line_with_a_hint_for_refusals() -> None:
    from valkey_operator.core.rest import ApiError
    from valkey_operator.kubectl.common import explain

    forbidden = ApiError(403, b'{"reason": "Forbidden", "message": "no"}')
    assert (
        explain(forbidden, "patching")
        == "patching: 403 Forbidden: no; check your credentials and RBAC (kubectl auth can-i)"
    )
    assert (
        explain(ApiError(500, b'{"message": "kubelet unreachable"}'), "reading")
        == "reading: 500: kubelet unreachable"
    )
