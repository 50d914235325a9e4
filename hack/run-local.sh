#!/usr/bin/env bash
# The main job on one machine: a simulated cluster (`vpa sim`) and `vpa run` following its virtual clock,
# with the admission webhook wired: the simulator sends the webhook registered for the Service
# kube-system/vpa-webhook to 127.0.0.1:$WEBHOOK_PORT, where `vpa run` serves it (so `Initial` mode and VPA
# validation work as in a cluster). Extra arguments go to `vpa run` (`make run RUN_ARGS=...`).
#
# Start-up checks come first and touch nothing: another `make run` holding $RUN_DIR (a lock), the metrics
# address and the webhook port. Only then are $RUN_DIR/kubeconfig and $RUN_DIR/sim.log rewritten, so a
# second `make run` never cuts the first one off from its cluster.
#
# Stopping: Ctrl-C stops `vpa run` gracefully, then the simulator, and the script (and make) exit 0 without
# a word of noise: with job control on (`set -m`), each process gets its own process group and `vpa run` is
# the terminal's foreground job, so Ctrl-C reaches `vpa run` alone (not make, not this script, not the
# simulator, which would otherwise stop under `vpa run` and make it log connection errors). Without a
# terminal, SIGTERM to make (which passes it on), or SIGINT/SIGTERM to this script or to make's process
# group, does the same. make does not pass SIGINT on to its recipes: SIGINT to make's PID alone waits.
# If the simulator exits by itself, `vpa run` is stopped and the status is non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
VPA=${VPA:-.venv/bin/vpa}
PY=${PY:-.venv/bin/python}
RUN_DIR=${RUN_DIR:-.run}
TIME_SCALE=${TIME_SCALE:-60}
ADDRESS=${ADDRESS:-127.0.0.1:8942}
WEBHOOK_PORT=${WEBHOOK_PORT:-8944}
KUBECTL=.venv/bin/kubectl
[ -x "$KUBECTL" ] || KUBECTL=kubectl

# --- start-up checks: nothing is written before they pass -----------------------------------------------
mkdir -p "$RUN_DIR"
if command -v flock >/dev/null; then  # held by this script and inherited by vpa sim and vpa run
  exec 9>>"$RUN_DIR/lock"
  if ! flock -n 9; then
    echo "make run: another make run is using $RUN_DIR (its cluster: $KUBECTL --kubeconfig $RUN_DIR/kubeconfig" \
         "get nodes); stop it first, or give this one RUN_DIR=<dir> ADDRESS=<host:port> WEBHOOK_PORT=<port>" >&2
    exit 2
  fi
fi
"$PY" - "$ADDRESS" "$WEBHOOK_PORT" <<'PYEOF' || exit 2
import socket, sys
address, webhook_port = sys.argv[1], sys.argv[2]
host, _, port = address.rpartition(":")
for what, bind_host, number in (("ADDRESS", host, port), ("WEBHOOK_PORT", host, webhook_port)):
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((bind_host or "0.0.0.0", int(number)))
        except (OSError, ValueError) as err:
            print(f"make run: {what}={number if what == 'WEBHOOK_PORT' else address}: cannot listen: "
                  f"{getattr(err, 'strerror', None) or err} (another make run? give {what}=...)", file=sys.stderr)
            sys.exit(1)
PYEOF

rm -f "$RUN_DIR/kubeconfig"
set -m

sim_pid=""
run_pid=""
watchdog_pid=""
stop() {  # stop PID: SIGTERM, then wait for it (both exit 0 on SIGTERM)
  if [ -n "$1" ] && kill -0 "$1" 2>/dev/null; then
    kill -TERM "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
  fi
}
stop_all() {
  [ -z "$watchdog_pid" ] || kill "$watchdog_pid" 2>/dev/null || true
  stop "$run_pid"
  stop "$sim_pid"
}
trap 'stop_all; exit 0' TERM INT
trap 'stop_all' EXIT

"$VPA" sim --kubeconfig-out "$RUN_DIR/kubeconfig" --nodes 3 --time-scale "$TIME_SCALE" \
  --webhook-service "kube-system/vpa-webhook=127.0.0.1:$WEBHOOK_PORT" >"$RUN_DIR/sim.log" 2>&1 &
sim_pid=$!

for _ in $(seq 1 100); do
  [ -s "$RUN_DIR/kubeconfig" ] && break
  kill -0 "$sim_pid" 2>/dev/null || { echo "vpa sim failed to start:"; cat "$RUN_DIR/sim.log"; exit 1; }
  sleep 0.1
done
[ -s "$RUN_DIR/kubeconfig" ] || { echo "vpa sim did not write its kubeconfig"; exit 1; }
cat <<INTRO
simulated cluster up (virtual time x$TIME_SCALE); log: $RUN_DIR/sim.log
  reach it:  $KUBECTL --kubeconfig $RUN_DIR/kubeconfig get nodes,pods,vpa -A
  stop:      Ctrl-C here (without a terminal: kill -TERM $$, or SIGTERM to make)
  usage:     a pod uses what its annotation sim.vpa.dev/usage says (else a fraction of its requests), e.g.
             $KUBECTL --kubeconfig $RUN_DIR/kubeconfig annotate pods -l app=web 'sim.vpa.dev/usage={"web": {"cpu": "500m", "memory": "200Mi"}}'
             (on a Deployment, put it under spec.template.metadata.annotations so new pods keep it)
  webhook:   Service kube-system/vpa-webhook -> 127.0.0.1:$WEBHOOK_PORT; metrics: http://$ADDRESS/metrics
INTRO

NAMESPACE=kube-system "$VPA" run --kubeconfig "$RUN_DIR/kubeconfig" --clock=sim \
  --address="$ADDRESS" --port="$WEBHOOK_PORT" --log-format=console "$@" &
run_pid=$!
# The simulator ending by itself ends vpa run too. Disowned: its end is never reported as a job
# ("[3]+ Terminated ...").
( while kill -0 "$sim_pid" 2>/dev/null; do sleep 1; done; kill -TERM "$run_pid" 2>/dev/null ) &
watchdog_pid=$!
disown "$watchdog_pid"

status=0
if [ -t 0 ]; then
  fg %2 >/dev/null || status=$?   # vpa run in the foreground: Ctrl-C is its SIGINT (graceful stop, exit 0)
else
  wait "$run_pid" || status=$?    # no terminal (CI, a supervisor): SIGTERM to this script stops both
fi
kill "$watchdog_pid" 2>/dev/null || true
watchdog_pid=""
if ! kill -0 "$sim_pid" 2>/dev/null; then
  echo "vpa sim exited (log: $RUN_DIR/sim.log)" >&2
  [ "$status" -eq 0 ] && status=1
fi
stop "$sim_pid"
exit "$status"
