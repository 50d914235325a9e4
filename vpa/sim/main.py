"""`vpa sim`: run the simulated cluster as a process until SIGTERM/SIGINT.

Owns: the command's flags (argparse), starting `SimCluster` (or, with `--control-plane=kubernetes`,
`RealCluster`) on uvloop, `vpa sim agent` (the kubelet stand-in against an existing API server), printing
the API URL and the kubeconfig path (one `key: value` line each, flushed, so scripts can read them; log
lines go to stderr), and a clean exit 0 on SIGTERM/SIGINT. `python -m vpa.sim.main` works too; the project
CLI dispatches `vpa sim ...` here.

The process holds CPython's automatic full collections back as `vpa run` does (`vpa.aio.heap`).

Must not: implement API or cluster semantics (`vpa.sim.apiserver` / `vpa.sim.cluster` do).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from datetime import datetime
from pathlib import Path

import structlog
import uvloop

from vpa.aio.cancelling import cancel_and_wait
from vpa.aio.heap import HeapKeeper
from vpa.model.clock import VirtualClock
from vpa.sim.apiserver.harness import SUPPORTED_VERSIONS, SimCluster
from vpa.sim.contracts import ApiError
from vpa.sim.kubernetes.cluster import KUBELETS, RealCluster
from vpa.sim.kubernetes.controlplane import ControlPlaneError
from vpa.sim.kubernetes.faults import FaultControl
from vpa.sim.kubernetes.releases import RELEASES, ReleaseError, locate

SIM_DEFAULT_VERSION = "1.37"


def _webhook_service(text: str) -> tuple[tuple[str, str], tuple[str, int]]:
    try:
        svc, addr = text.split("=", 1)
        namespace, name = svc.split("/", 1)
        host, port = addr.rsplit(":", 1)
        if not (namespace and name and host):
            raise ValueError(text)
        return (namespace, name), (host, int(port))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected NAMESPACE/NAME=HOST:PORT, got {text!r}") from None


def _port(text: str) -> int:
    """A TCP port: 0 (any free one) to 65535; anything else is refused rather than replaced."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port (0 for any free port, else 1-65535)")
    return value


def _output_file(text: str) -> Path:
    """A file to write: its folder must exist (nothing is created on the user's behalf)."""
    path = Path(text)
    folder = path.parent
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a directory")
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: no such directory {str(folder)!r} (create it first)")
    return path


def _start_time(text: str) -> str | float:
    """`now` (resolved when the cluster starts) or an RFC 3339 time as POSIX seconds."""
    if text == "now":
        return text
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise argparse.ArgumentTypeError(
            f"expected 'now' or an RFC 3339 time with a zone (2026-01-01T00:00:00Z), got {text!r}"
        )
    return parsed.timestamp()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vpa sim",
        description="Run a simulated Kubernetes cluster (API server, controllers, nodes, metrics) over HTTPS "
        "on 127.0.0.1 until SIGTERM/SIGINT.",
    )
    p.add_argument("--port", type=_port, default=0, help="port to listen on (0: any free port)")
    p.add_argument(
        "--kubeconfig-out",
        type=_output_file,
        default=None,
        help="write the kubeconfig here (default: a temporary file, removed on exit)",
    )
    p.add_argument("--nodes", type=int, default=3, help="number of nodes")
    p.add_argument("--node-cpu", default="4", help="allocatable CPU per node (quantity)")
    p.add_argument("--node-memory", default="16Gi", help="allocatable memory per node (quantity)")
    p.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="virtual seconds per real second (0 freezes time; advance it via /sim/v1/clock/advance)",
    )
    p.add_argument(
        "--start-time",
        type=_start_time,
        default=None,
        metavar="now|RFC3339",
        help="where the virtual clock starts: 'now' (wall time; with --time-scale 1 it stays on wall time, "
        "as clients with their own clock expect) or an RFC 3339 time (default 2026-01-01T00:00:00Z)",
    )
    p.add_argument(
        "--kubernetes-version",
        default=None,
        metavar="VERSION",
        help=f"with --control-plane=sim: the minor version to emulate ({', '.join(SUPPORTED_VERSIONS)}; "
        f"default {SIM_DEFAULT_VERSION}); with --control-plane=kubernetes: the release to run "
        f"({', '.join(RELEASES)}; default: the newest stable one built, a pre-release only when named)",
    )
    p.add_argument(
        "--crd",
        action="append",
        default=[],
        type=Path,
        metavar="FILE",
        help="install the CustomResourceDefinitions in FILE at start (repeatable)",
    )
    p.add_argument("--no-vpa-crds", action="store_true", help="do not install the VPA CRDs at start")
    p.add_argument(
        "--webhook-service",
        action="append",
        default=[],
        type=_webhook_service,
        metavar="NAMESPACE/NAME=HOST:PORT",
        help="send webhooks registered with this service reference to HOST:PORT (repeatable)",
    )
    p.add_argument(
        "--no-behaviour",
        action="store_true",
        help="serve the bare API server: no controllers, node agent or metrics",
    )
    p.add_argument(
        "--metrics-resolution",
        type=float,
        default=15.0,
        metavar="SECONDS",
        help="metrics.k8s.io sampling interval, as metrics-server's --metric-resolution (default 15)",
    )
    p.add_argument(
        "--control-plane",
        choices=("sim", "kubernetes"),
        default="sim",
        help="sim: our own API server, controllers and scheduler on a virtual clock (default); kubernetes: "
        "real kube-apiserver, kube-controller-manager, kube-scheduler and etcd (`make control-plane`) "
        "with the same nodes, kubelets, usage profiles and metrics.k8s.io, on real time",
    )
    p.add_argument(
        "--control-plane-bin",
        type=Path,
        default=None,
        metavar="DIR",
        help="folder holding etcd, kube-apiserver, kube-controller-manager, kube-scheduler (and hollow-node) "
        "(default: $VPA_CONTROL_PLANE_BIN, else .tools/cluster/<release>/bin of this checkout)",
    )
    p.add_argument(
        "--kubelet",
        choices=KUBELETS,
        default="sim",
        help="with --control-plane=kubernetes: sim: the simulator's kubelet stand-in (default); hollow: one "
        "hollow kubelet process per node, Kubernetes' own kubelet code of the same release "
        "(`make control-plane` builds it)",
    )
    p.add_argument(
        "--fault-control",
        action="store_true",
        help="with --control-plane=kubernetes: serve, on a loopback URL with a secret printed as "
        "`fault control: URL`, POST URL/kube-apiserver/kill (SIGKILL), URL/kube-apiserver/start (same "
        "flags and port) and URL/etcd/compact (at the current revision), for fault tests",
    )
    p.add_argument(
        "--history-size",
        type=int,
        default=50_000,
        help="watch events kept per resource; older resourceVersions get 410 Expired",
    )
    p.add_argument(
        "--bookmark-interval",
        type=float,
        default=5.0,
        help="seconds between BOOKMARK events on watches that allow them",
    )
    return p


async def _serve(args: argparse.Namespace) -> int:
    for path in args.crd:
        if not path.is_file():
            print(f"vpa sim: --crd {path}: no such file", file=sys.stderr)
            return 2
    cluster: SimCluster | RealCluster
    if args.control_plane == "kubernetes":
        problem = _real_only_conflicts(args)
        if problem:
            print(f"vpa sim: {problem}", file=sys.stderr)
            return 2
        try:
            locate(args.kubernetes_version, args.control_plane_bin, hollow=args.kubelet == "hollow")
        except ReleaseError as err:
            print(f"vpa sim: {err}", file=sys.stderr)
            return 2
        cluster = RealCluster(
            nodes=args.nodes,
            node_cpu=args.node_cpu,
            node_memory=args.node_memory,
            vpa_crds=not args.no_vpa_crds,
            behaviour=not args.no_behaviour,
            webhook_services=dict(args.webhook_service),
            kubeconfig_out=args.kubeconfig_out,
            crd_files=args.crd,
            bin_dir=args.control_plane_bin,
            metrics_resolution_s=args.metrics_resolution,
            kubernetes_version=args.kubernetes_version,
            kubelet=args.kubelet,
        )
        return await _run(cluster, fault_control=args.fault_control)
    problem = _sim_only_conflicts(args)
    if problem:
        print(f"vpa sim: {problem}", file=sys.stderr)
        return 2
    start = time.time() if args.start_time == "now" else args.start_time
    clock = VirtualClock(time_scale=args.time_scale)
    if start is not None:
        clock = VirtualClock(start, args.time_scale)
    cluster = SimCluster(
        nodes=args.nodes,
        node_cpu=args.node_cpu,
        node_memory=args.node_memory,
        clock=clock,
        kubernetes_version=args.kubernetes_version or SIM_DEFAULT_VERSION,
        vpa_crds=not args.no_vpa_crds,
        behaviour=not args.no_behaviour,
        webhook_services=dict(args.webhook_service),
        port=args.port,
        kubeconfig_out=args.kubeconfig_out,
        crd_files=args.crd,
        history_size=args.history_size,
        bookmark_interval_s=args.bookmark_interval,
        metrics_resolution_s=args.metrics_resolution,
    )
    return await _run(cluster)


def _real_only_conflicts(args: argparse.Namespace) -> str:
    """Options a real control plane cannot honour: it runs on real time, at its own version and port."""
    if args.port != 0:
        return "--port: the real kube-apiserver picks a free loopback port (use --kubeconfig-out to find it)"
    if args.time_scale != 1.0:
        return "--time-scale: a real control plane runs on real time (1)"
    if args.start_time not in (None, "now"):
        return "--start-time: a real control plane runs on wall time (now)"
    return ""


def _sim_only_conflicts(args: argparse.Namespace) -> str:
    """Options only a real control plane honours, and the versions the simulated API server emulates."""
    if args.fault_control:
        return "--fault-control: needs --control-plane=kubernetes (the simulator has /sim/v1/faults)"
    if args.kubelet != "sim":
        return (
            f"--kubelet={args.kubelet}: needs --control-plane=kubernetes (hollow nodes run real kubelet code)"
        )
    if args.kubernetes_version is not None and args.kubernetes_version.lstrip("v") not in SUPPORTED_VERSIONS:
        return (
            f"--kubernetes-version={args.kubernetes_version}: the simulated API server emulates "
            f"{', '.join(SUPPORTED_VERSIONS)} (releases run with --control-plane=kubernetes)"
        )
    return ""


async def _run(cluster: SimCluster | RealCluster, *, fault_control: bool = False) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await cluster.start()
    except (ControlPlaneError, OSError) as err:
        print(f"vpa sim: {err}", file=sys.stderr)
        return 2
    # The GC policy `vpa run` follows too: full collections over the store are held back to once an hour.
    heap = asyncio.create_task(HeapKeeper().run(), name="heap")
    faults: FaultControl | None = None
    try:
        if fault_control and isinstance(cluster, RealCluster):
            faults = FaultControl(cluster.control_plane)
            await faults.start()
        print(f"API server: {cluster.url}", flush=True)
        print(f"kubeconfig: {cluster.kubeconfig_path}", flush=True)
        print(f"Kubernetes version: v{cluster.version[0]}.{cluster.version[1]}", flush=True)
        if faults is not None:
            print(f"fault control: {faults.url}", flush=True)
        await stop.wait()
    finally:
        await cancel_and_wait([heap])
        if faults is not None:
            await faults.stop()
        await cluster.stop()
    return 0


def build_agent_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vpa sim agent",
        description="Run the simulator's nodes, kubelets, usage profiles and metrics.k8s.io against an "
        "existing API server (its scheduler binds the pods; this agent runs them) until SIGTERM/SIGINT.",
    )
    p.add_argument(
        "--kubeconfig", type=Path, required=True, help="kubeconfig of the API server (admin rights)"
    )
    p.add_argument("--context", default=None, help="kubeconfig context (default: current-context)")
    p.add_argument("--nodes", type=int, default=3, help="number of nodes to register")
    p.add_argument("--node-cpu", default="4", help="allocatable CPU per node (quantity)")
    p.add_argument("--node-memory", default="16Gi", help="allocatable memory per node (quantity)")
    p.add_argument("--node-name-prefix", default="vpa-sim-node-", help="nodes are named PREFIX1..PREFIXN")
    p.add_argument("--metrics-resolution", type=float, default=15.0, metavar="SECONDS",
                   help="metrics.k8s.io sampling interval (default 15)")  # fmt: skip
    return p


async def _agent(args: argparse.Namespace) -> int:
    from vpa.model.quantity import cpu_millicores, memory_bytes
    from vpa.sim.kubernetes.cluster import KubeletStandIn, stand_in_options
    from vpa.sim.kubernetes.kubeconfig import load
    from vpa.sim.kubernetes.remotestore import RemoteStore

    creds = load(args.kubeconfig, args.context)
    store = RemoteStore(creds.server, creds.ca_pem, creds.token, client_cert=creds.client_cert)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    stand_in: KubeletStandIn | None = None
    try:
        await store.start(["pods", "nodes", "leases.coordination.k8s.io"])
        info = await store.call("GET", "/version")
        version = (int(info["major"]), int(str(info["minor"]).rstrip("+")))
        options = stand_in_options(
            version,
            nodes=args.nodes,
            node_cpu_millicores=cpu_millicores(args.node_cpu),
            node_memory_bytes=memory_bytes(args.node_memory),
            node_name_prefix=args.node_name_prefix,
            metrics_resolution_s=args.metrics_resolution,
        )
        stand_in = KubeletStandIn(store, options)
        await stand_in.start()
        print(f"nodes: {args.nodes} ({args.node_name_prefix}1..{args.nodes}) on {creds.server}", flush=True)
        await stop.wait()
    except ApiError as err:
        print(f"vpa sim agent: {creds.server}: {err.code} {err.message}", file=sys.stderr)
        return 2
    except ControlPlaneError as err:
        print(f"vpa sim agent: {err}", file=sys.stderr)
        return 2
    finally:
        if stand_in is not None:
            await stand_in.stop()
        await store.close()
    return 0


def _log_to_stderr() -> None:
    """Log lines (the hourly full collection's, `vpa.aio.heap`) to stderr: stdout holds only the `key: value`
    lines scripts read."""
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=sys.stderr))


def main(argv: list[str]) -> int:
    _log_to_stderr()
    if argv[:1] == ["agent"]:
        agent_args = build_agent_parser().parse_args(argv[1:])
        try:
            return uvloop.run(_agent(agent_args))
        except (ValueError, OSError) as exc:
            print(f"vpa sim agent: {exc}", file=sys.stderr)
            return 2
    args = build_parser().parse_args(argv)
    try:
        return uvloop.run(_serve(args))
    except ValueError as exc:
        print(f"vpa sim: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
