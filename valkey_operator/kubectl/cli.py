"""The `kubectl-valkey` entry point: flags as kubectl's, one subcommand per module, exit statuses a
script can act on (0 done, 1 failed or refused, 2 bad input or configuration, 3 timed out,
130 interrupted), errors as one line on stderr."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import TextIO

from valkey_operator.core.rest import ApiError, TransportError
from valkey_operator.kubectl import backup, logs, pause, restart, status, switchover
from valkey_operator.kubectl.common import explain
from valkey_operator.kubectl.kube import CommandFailed, Session, Target, TimedOut, UsageError

PROG = "kubectl valkey"
Runner = Callable[[argparse.Namespace, Session, TextIO], Awaitable[int]]
DESCRIPTION = """Day-2 commands for ValkeyClusters. Every command talks to the Kubernetes API only:
requests are annotations the operator carries out with its own safety checks.

Installed with the valkey-operator package as the executable kubectl-valkey; kubectl finds it on
PATH and runs it as `kubectl valkey`.

exit status: 0 done, 1 failed or refused, 2 bad input or configuration, 3 timed out waiting."""


def _common_flags() -> argparse.ArgumentParser:
    """kubectl's connection flags, accepted before or after the subcommand."""
    flags = argparse.ArgumentParser(add_help=False)
    group = flags.add_argument_group("connection (as kubectl's)")
    group.add_argument("--kubeconfig", default=argparse.SUPPRESS, help="path to the kubeconfig file")
    group.add_argument("--context", default=argparse.SUPPRESS, help="the kubeconfig context to use")
    group.add_argument(
        "-n",
        "--namespace",
        default=argparse.SUPPRESS,
        help="the cluster's namespace (default: the context's namespace, else default)",
    )
    return flags


COMMANDS: tuple[tuple[str, str, str, Callable[[argparse.ArgumentParser], None], Runner], ...] = (
    ("status", status.HELP, status.EXAMPLES, status.add_arguments, status.run),
    ("pause", pause.PAUSE_HELP, pause.PAUSE_EXAMPLES, pause.add_arguments, pause.run_pause),
    ("resume", pause.RESUME_HELP, pause.RESUME_EXAMPLES, pause.add_arguments, pause.run_resume),
    ("switchover", switchover.HELP, switchover.EXAMPLES, switchover.add_arguments, switchover.run),
    ("restart", restart.HELP, restart.EXAMPLES, restart.add_arguments, restart.run),
    ("logs", logs.HELP, logs.EXAMPLES, logs.add_arguments, logs.run),
    ("backup", backup.HELP, backup.EXAMPLES, backup.add_arguments, backup.run),
)


def parser() -> argparse.ArgumentParser:
    common = _common_flags()
    top = argparse.ArgumentParser(
        prog=PROG,
        description=DESCRIPTION,
        parents=[common],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = top.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, help_text, epilog, add_arguments, runner in COMMANDS:
        sub = commands.add_parser(
            name,
            help=help_text,
            description=help_text[0].upper() + help_text[1:] + ".",
            epilog=epilog,
            parents=[common],
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        add_arguments(sub)
        sub.set_defaults(runner=runner)
    return top


async def _run(args: argparse.Namespace, out: TextIO) -> int:
    target = Target(
        kubeconfig=getattr(args, "kubeconfig", None),
        context=getattr(args, "context", None),
        namespace=getattr(args, "namespace", None),
    )
    async with await Session.open(target) as session:
        code: int = await args.runner(args, session, out)
        return code


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run one command; the exit status (see DESCRIPTION)."""
    args = parser().parse_args(argv)
    stream = out or sys.stdout
    try:
        return asyncio.run(_run(args, stream))
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except CommandFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except TimedOut as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    except ApiError as exc:
        print(f"error: {explain(exc, args.command)}", file=sys.stderr)
        return 1
    except TransportError as exc:
        print(
            f"error: cannot reach the API server ({exc}); check --context and that the cluster is up",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `| head`: the reader left; nothing more to say
        return 0
