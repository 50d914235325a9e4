"""`vpa report`: read a cluster once, compute every VPA's report, print it in the chosen format.

Owns: the composition of the report command — the API client from `--kubeconfig` / `$KUBECONFIG` /
in-cluster configuration, `vpa.kube.reportreading` for the objects, `vpa.logic.report.rows` for the rows and
the per-namespace sums, `vpa.logic.report.output` for the text — and its failures as one line on stderr:
exit status 2 for a kubeconfig that cannot be loaded, 1 when the cluster cannot be read.

Must not: compute rows or format them (the logic modules do), or keep running: one read, one report.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import TextIO

from vpa import __version__
from vpa.kube.client import ApiError, ClientOptions, KubeClient
from vpa.kube.reportreading import ReportInputs, read_report_inputs
from vpa.logic.report import output as report_output
from vpa.logic.report import rows as reporting
from vpa.model.clock import Clock, RealClock
from vpa.model.settings import ReportSettings

EXIT_UNREADABLE = 1
EXIT_CONFIG = 2


class ConfigProblem(Exception):
    """The kubeconfig (or in-cluster configuration) cannot be used; `str()` is one line."""


async def read(settings: ReportSettings, clock: Clock) -> ReportInputs:
    """The report's inputs from the cluster `settings` name."""
    options = ClientOptions(user_agent=f"vpa-report/{__version__}")
    try:
        client = await KubeClient.from_config(clock, options, kubeconfig=settings.kubeconfig or None)
    except Exception as err:  # kubernetes_asyncio raises ConfigException and plain errors for bad configs
        where = (f"--kubeconfig {settings.kubeconfig}" if settings.kubeconfig
                 else "no --kubeconfig and no $KUBECONFIG, and the in-cluster configuration failed")
        detail = " ".join(str(err).split()) or type(err).__name__
        raise ConfigProblem(f"{where}: {detail}") from None
    async with client:
        return await read_report_inputs(client, clock, reporting.ACTION_REASONS, settings.namespace or None)


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
    if settings.kubeconfig and not os.path.isfile(settings.kubeconfig):
        print(f"vpa report: --kubeconfig: {settings.kubeconfig}: no such file", file=stderr)
        return EXIT_CONFIG
    try:
        inputs = asyncio.run(read(settings, clock))
    except ConfigProblem as err:
        print(f"vpa report: {err}", file=stderr)
        return EXIT_CONFIG
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
