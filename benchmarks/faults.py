"""The fault-and-fuzz suite, long form: the scenarios of tests/integration/faults at the attack's scale.

`python -m benchmarks faults` (or `python -m benchmarks.faults --only hostile,slow`) runs, all on 127.0.0.1:
- hostile: 6,000 distinct pods of 200 KiB each plus 60,000 fuzzed AdmissionReviews with absurd quantities
  and junk fields; targets: no 5xx, no pod denied, no invalid patch value, RSS growth under 64 MiB;
- slow: 300 stalled TLS connections (headers with a Content-Length then silence, half headers, nothing)
  with the default limits (10 s), real reviews meanwhile; targets: every stalled connection closed within
  15 s, no real review failed;
- watch: 300 forced watch drops, every fifth with a compaction (410 Expired, re-LIST), under churn;
  target: the cache equals the server at the end, no event delivered twice;
- restart: `vpa run` killed with SIGKILL 6 h into the default 24 h memory window and restarted from its
  checkpoints (hourly loops); target: no CPU or memory target moved by more than 1%;
- leaders: two updater replicas, the leader stopped (SIGSTOP until the other leads, then SIGCONT) and the
  new one killed (SIGKILL), five times; target: every write but the Lease's comes from the replica whose
  Lease write is the latest before it (the simulator's audit log, one bearer token per replica);
- inplace: 300 updater loops over `InPlace` VPAs whose recommendations move between sizes that fit, that
  the kubelet defers and that are infeasible, with replicas scaling; target: zero evictions.
The short forms run in `make check` (pytest marker `faults`). Each line prints its numbers and PASS/MISS.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from benchmarks import quiet_logs
from tests.integration.faults.hostile_admissions import hostile_admissions_scenario
from tests.integration.faults.inplace import inplace_scenario
from tests.integration.faults.leaders import leader_failover_scenario
from tests.integration.faults.restarts import kill_restart_scenario
from tests.integration.faults.slow_clients import stalled_clients_scenario
from tests.integration.faults.watch_churn import watch_churn_scenario
from vpa.components.connections import ConnectionLimits

MIB = 1024 * 1024
Row = tuple[str, str, bool]


async def hostile(_tmp: Path) -> list[Row]:
    r = await hostile_admissions_scenario(large_pods=6000, pod_bytes=200 * 1024, fuzzed=60_000)
    return [
        ("reviews sent", f"{r.sent} in {r.seconds:.0f} s", r.sent == 66_000),
        ("HTTP statuses", str(dict(sorted(r.statuses.items()))), set(r.statuses) <= {200, 400}),
        ("pods denied", str(r.pods_denied), r.pods_denied == 0),
        ("invalid patch values", str(len(r.invalid_values)), not r.invalid_values),
        (
            "RSS growth (end / peak)",
            f"{r.rss_growth / MIB:.1f} / {r.rss_peak_growth / MIB:.1f} MiB",
            r.rss_peak_growth < 64 * MIB,
        ),
        ("patch memo", f"{r.memo_bytes / MIB:.2f} MiB", True),
    ]


async def slow(tmp: Path) -> list[Row]:
    r = await stalled_clients_scenario(tmp, stalled=300, limits=ConnectionLimits(), give_up_s=30.0)
    return [
        (
            "stalled connections closed",
            f"{r.stalled_closed_by_server}/{r.stalled_opened}",
            r.stalled_closed_by_server == r.stalled_opened,
        ),
        ("longest stall", f"{r.longest_stall_s:.1f} s", r.longest_stall_s < 15.0),
        (
            "real reviews answered",
            f"{r.reviews_answered} (slowest {r.slowest_review_s * 1000:.0f} ms)",
            r.reviews_answered > 0,
        ),
        ("real reviews failed", str(len(r.review_failures)), not r.review_failures),
        ("drops by reason", str(r.drops), True),
    ]


async def watch(_tmp: Path) -> list[Row]:
    r = await watch_churn_scenario(rounds=300, gone_every=5)
    return [
        (
            "watch drops / 410s / re-LISTs",
            f"{r.drops} / {r.gones} / {r.relists}",
            r.drops == 300 and r.gones >= 60,
        ),
        ("cache equals server", f"{r.cache_equals_server} ({r.objects} objects)", r.cache_equals_server),
        ("events delivered twice", str(r.duplicate_events), r.duplicate_events == 0),
    ]


async def restart(tmp: Path) -> list[Row]:
    r = await kill_restart_scenario(tmp, hours=6, step_s=3600)
    worst = r.worst_change()
    rows: list[Row] = [
        ("worst CPU target change", f"{worst['cpu'] * 100:.2f} %", worst["cpu"] <= 0.01),
        ("worst memory target change", f"{worst['memory'] * 100:.2f} %", worst["memory"] <= 0.01),
    ]
    for key, (cpu, memory) in sorted(r.before.items()):
        cpu2, memory2 = r.after.get(key, (0, 0))
        rows.append((f"  {key[0]}/{key[1]}", f"{cpu}m {memory // MIB}Mi -> {cpu2}m {memory2 // MIB}Mi", True))
    return rows


async def inplace(_tmp: Path) -> list[Row]:
    r = await inplace_scenario(loops=300)
    return [
        ("updater loops", str(r.loops), r.loops == 300),
        (
            "evictions (server / reported)",
            f"{r.evictions_seen_by_server} / {r.evictions_reported}",
            r.evictions_seen_by_server == 0 and r.evictions_reported == 0,
        ),
        ("resize PATCHes", str(r.resizes_seen_by_server), r.resizes_seen_by_server > 0),
        (
            "PodResizePending reasons seen",
            str(sorted(r.pending_reasons)),
            r.pending_reasons == {"Infeasible", "Deferred"},
        ),
    ]


async def leaders(tmp: Path) -> list[Row]:
    r = await leader_failover_scenario(tmp, rounds=5, busy_s=3.0)
    return [
        ("Lease holder changes", str(r.holder_changes), r.holder_changes == 10),
        ("actor changes (audit log)", str(r.writer_changes), r.writer_changes <= r.holder_changes),
        ("writes without the Lease", str(len(r.writes_without_lease)), not r.writes_without_lease),
        ("writes by replica", str(dict(sorted(r.actor_writes.items()))), len(r.actor_writes) == 2),
        ("failover (stop, kill alternating)", ", ".join(f"{s:.1f}" for s in r.failover_s) + " s", True),
    ]


SCENARIOS: dict[str, Callable[[Path], Coroutine[Any, Any, list[Row]]]] = {
    "hostile": hostile,
    "slow": slow,
    "watch": watch,
    "restart": restart,
    "inplace": inplace,
    "leaders": leaders,
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.faults", description=__doc__.splitlines()[0])
    p.add_argument("--only", default=",".join(SCENARIOS), help="comma-separated: " + ", ".join(SCENARIOS))
    args = p.parse_args(argv)
    quiet_logs(logging.ERROR)
    ok = True
    for name in args.only.split(","):
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="vpa-faults-") as tmp:
            rows: list[Row] = asyncio.run(SCENARIOS[name](Path(tmp)))
        passed = all(row[2] for row in rows)
        ok &= passed
        print(f"\nfaults/{name} ({'PASS' if passed else 'MISS'}, {time.monotonic() - started:.0f} s)")
        width = max(len(row[0]) for row in rows)
        for label, value, good in rows:
            print(f"  {label:<{width}}  {value}{'' if good else '   <-- MISS'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
