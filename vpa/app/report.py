"""`vpa report`: read a cluster once, compute every VPA's report, print it in the chosen format.

Owns: the composition of the report command — the API client from `--kubeconfig` / `$KUBECONFIG` /
`~/.kube/config` / in-cluster configuration and `--context`, `vpa.kube.reportreading` for the objects,
`vpa.logic.report.rows` for the rows and the per-namespace sums, `vpa.logic.report.output` for the text
(`.formatting` and `.page` beside it) — and its failures as one line on stderr:
exit status 2 for a kubeconfig that cannot be loaded, 1 when the cluster cannot be read.

Must not: compute rows or format them (the logic modules do), or keep running: one read, one report.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import TextIO

from vpa import __version__
from vpa.kube import kubeconfig as kubeconfigs
from vpa.kube.client import ApiError, ClientOptions, KubeClient
from vpa.kube.kubeconfig import KubeconfigError
from vpa.kube.reportreading import ReportInputs, read_report_inputs
from vpa.logic.report import output as report_output
from vpa.logic.report import rows as reporting
from vpa.model.clock import Clock, RealClock
from vpa.model.settings import ReportSettings

EXIT_UNREADABLE = 1
EXIT_CONFIG = 2


class ConfigProblem(Exception):
    """The kubeconfig (or in-cluster configuration) cannot be used; `str()` is one line."""


class Unreachable(Exception):
    """The API server did not answer, or answered with an error; `str()` names it."""

    def __init__(self, host: str, error: Exception) -> None:
        detail = " ".join(str(error).split()) or type(error).__name__
        super().__init__(f"cannot read the cluster at {host}: {detail}")


async def read(settings: ReportSettings, clock: Clock) -> ReportInputs:
    """The report's inputs from the cluster `settings` name."""
    # One try with a short connect timeout: an unreachable server is reported in seconds, not after the
    # backoff a long-running process needs.
    options = ClientOptions(user_agent=f"vpa-report/{__version__}", connect_timeout_s=5.0,
                            request_timeout_s=30.0, max_retries=1)
    try:
        client = await KubeClient.from_config(
            clock, options, kubeconfig=settings.kubeconfig or None,
            kubeconfig_env=settings.kubeconfig_env or None, context=settings.context or None,
            default_kubeconfig=settings.default_kubeconfig,
        )
    except KubeconfigError as err:
        raise ConfigProblem(str(err)) from None
    except Exception as err:  # in-cluster configuration failures: ConfigException and plain errors
        detail = " ".join(str(err).split()) or type(err).__name__
        raise ConfigProblem("no --kubeconfig, no $KUBECONFIG, no ~/.kube/config, and the in-cluster "
                            f"configuration failed: {detail}") from None
    async with client:
        try:
            return await read_report_inputs(client, clock, reporting.ACTION_REASONS,
                                            settings.namespace or None)
        except ApiError as err:
            raise Unreachable(client.host, err) from None
        except OSError as err:
            raise Unreachable(client.host, err) from None


def render(settings: ReportSettings, inputs: ReportInputs, generated_at: float) -> str:
    index = reporting.PodIndex(inputs.pods)
    reports = [
        reporting.vpa_report(
            item.vpa,
            [] if item.selector is None else index.matching(item.vpa.namespace, item.selector),
            inputs.events,
            target_problem=item.target_problem,
        )
        for item in inputs.vpas
    ]
    totals = reporting.namespace_totals(reports)
    return report_output.render(settings.output, reports, totals, generated_at)


def run(settings: ReportSettings, *, stdout: TextIO, stderr: TextIO) -> int:
    """Read, render, write; returns the exit status."""
    clock = RealClock()
    # The kubeconfig is checked before any connection is tried: a wrong file is reported at once.
    choice = kubeconfigs.choose(settings.kubeconfig, settings.kubeconfig_env, settings.default_kubeconfig)
    if not choice.in_cluster:
        try:
            kubeconfigs.load(choice, settings.context)
        except KubeconfigError as err:
            print(f"vpa report: {err}", file=stderr)
            return EXIT_CONFIG
    try:
        inputs = asyncio.run(read(settings, clock))
    except ConfigProblem as err:
        print(f"vpa report: {err}", file=stderr)
        return EXIT_CONFIG
    except Unreachable as err:
        print(f"vpa report: {err}", file=stderr)
        return EXIT_UNREADABLE
    except (ApiError, OSError) as err:
        print(f"vpa report: cannot read the cluster: {' '.join(str(err).split())}", file=stderr)
        return EXIT_UNREADABLE
    text = render(settings, inputs, clock.now())
    if inputs.skipped:
        print(f"vpa report: skipped {inputs.skipped} objects that do not convert", file=stderr)
    if not settings.output_file:
        stdout.write(text)
        return 0
    try:
        tmp = f"{settings.output_file}.tmp{os.getpid()}"
        Path(tmp).write_text(text, encoding="utf-8")
        os.replace(tmp, settings.output_file)
    except OSError as err:
        print(f"vpa report: --output-file {settings.output_file}: {err.strerror or err}", file=stderr)
        return EXIT_CONFIG
    return 0
