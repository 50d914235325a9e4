"""The `vpa` command: argv and the environment in, an exit status out.

Owns: the subcommands `run` (start components), `sim` (the simulated cluster), `replay` (the recommender
over a usage trace), `report` (every VPA against its pods' requests, from a cluster), `version`, and the
hidden `flags-doc` / `gates-doc` that print docs/flags.md and docs/feature-gates.md; usage errors as one
line on stderr with exit status 2; `--help` screens.
This is the only module that reads `sys.argv` and `os.environ`, and only in `main()`'s defaults.

Must not: contain behaviour beyond dispatch. Settings are built by `vpa.flags`; the application, the
simulator and the replay tool are imported lazily so each subcommand loads only what it runs.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TextIO, cast

import vpa
from vpa.flags import commands, docs
from vpa.model import settings

USAGE = """\
Usage: vpa <command> [arguments]

Commands:
  run       Run the VPA components (recommender, updater, admission controller) in one process.
  sim       Run a simulated Kubernetes cluster (API server, controllers, nodes, metrics).
  replay    Run the recommender over a usage trace and print its recommendations.
  report    List every VPA with its pods' requests, its recommendation and the savings (table/json/csv/html).
  demo      Start a simulated cluster and vpa run, deploy sample workloads, and watch them resized in place.
  version   Print the version and the upstream VPA version this is compatible with.

Run `vpa <command> --help` for a command's flags.
"""

EXIT_USAGE = 2


def _fail(command: str, message: str, stderr: TextIO) -> int:
    one_line = " ".join(message.split("\n"))
    print(f"vpa {command}: {one_line}", file=stderr)
    return EXIT_USAGE


def _load(module_name: str, attribute: str) -> Callable[..., object]:
    """Import `module_name` when the subcommand runs, so `vpa version` never loads aiohttp."""
    module = importlib.import_module(module_name)
    return cast("Callable[..., object]", getattr(module, attribute))


def _exit_status(result: object) -> int:
    return result if isinstance(result, int) else 0


def _run(args: Sequence[str], env: Mapping[str, str], stdout: TextIO, stderr: TextIO) -> int:
    try:
        run_settings = commands.parse_run_args(args, env)
    except commands.HelpRequested:
        stdout.write(docs.render_run_help())
        return 0
    except commands.UsageError as error:
        return _fail("run", str(error), stderr)
    return _exit_status(_load("vpa.app", "run")(run_settings))


def _replay(args: Sequence[str], env: Mapping[str, str], stdout: TextIO, stderr: TextIO) -> int:
    try:
        replay_settings = commands.parse_replay_args(args, env)
    except commands.HelpRequested:
        stdout.write(docs.render_replay_help())
        return 0
    except commands.UsageError as error:
        return _fail("replay", str(error), stderr)
    return _exit_status(_load("vpa.replay.replaying", "run")(replay_settings))


def _report(args: Sequence[str], env: Mapping[str, str], stdout: TextIO, stderr: TextIO) -> int:
    try:
        report_settings = commands.parse_report_args(args, env)
    except commands.HelpRequested:
        stdout.write(docs.render_report_help())
        return 0
    except commands.UsageError as error:
        return _fail("report", str(error), stderr)
    return _exit_status(_load("vpa.app.report", "run")(report_settings, stdout=stdout, stderr=stderr))


def _sim(args: Sequence[str]) -> int:
    return _exit_status(_load("vpa.sim.main", "main")(list(args)))


def version_text() -> str:
    upstream = settings.UPSTREAM_VPA_VERSION
    return f"vpa {vpa.__version__} (compatible with upstream Vertical Pod Autoscaler {upstream})"


def main(
    argv: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Entry point of the `vpa` console script; returns the exit status.

    `argv` excludes the program name (default `sys.argv[1:]`); `env` defaults to `os.environ`.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    environment = os.environ if env is None else env
    out = sys.stdout if stdout is None else stdout
    err = sys.stderr if stderr is None else stderr
    if not args:
        err.write(USAGE)
        return EXIT_USAGE
    command, rest = args[0], args[1:]
    if command == "run":
        return _run(rest, environment, out, err)
    if command == "replay":
        return _replay(rest, environment, out, err)
    if command == "report":
        return _report(rest, environment, out, err)
    if command == "sim":
        return _sim(rest)
    if command == "demo":
        return _exit_status(_load("vpa.demo", "main")(list(rest)))
    if command in ("version", "--version"):
        print(version_text(), file=out)
        return 0
    if command == "flags-doc":
        out.write(docs.render_flags_markdown())
        return 0
    if command == "gates-doc":
        out.write(docs.render_feature_gates_markdown())
        return 0
    if command in ("help", "-h", "-help", "--help"):
        out.write(USAGE)
        return 0
    err.write(f'vpa: unknown command "{command}"\n\n{USAGE}')
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
