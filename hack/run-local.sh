#!/usr/bin/env bash
# The main job on one machine: a simulated cluster (`vpa sim`) and `vpa run` following its virtual clock,
# with the admission webhook wired: the simulator sends the webhook registered for the Service
# kube-system/vpa-webhook to 127.0.0.1:$WEBHOOK_PORT, where `vpa run` serves it (so `Initial` mode and VPA
# validation work as in a cluster). Extra arguments go to `vpa run` (`make run RUN_ARGS=...`).
#
# Ctrl-C stops `vpa run` gracefully, then the simulator, and the script (and make) exit 0 without a word of
# noise: with job control on (`set -m`), each process gets its own process group and `vpa run` is the
# terminal's foreground job, so Ctrl-C reaches `vpa run` alone (not make, not this script, not the
# simulator, which would otherwise stop under `vpa run` and make it log connection errors). Without a
# terminal, SIGTERM to this script does the same. If the simulator exits by itself, `vpa run` is stopped and the status is non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
VPA=${VPA:-.venv/bin/vpa}
RUN_DIR=${RUN_DIR:-.run}
TIME_SCALE=${TIME_SCALE:-60}
ADDRESS=${ADDRESS:-127.0.0.1:8942}
WEBHOOK_PORT=${WEBHOOK_PORT:-8944}
mkdir -p "$RUN_DIR"
rm -f "$RUN_DIR/kubeconfig"

set -m

sim_pid=""
run_pid=""
stop() {  # stop PID: SIGTERM, then wait for it (both exit 0 on SIGTERM)
  if [ -n "$1" ] && kill -0 "$1" 2>/dev/null; then
    kill -TERM "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
  fi
}
trap 'stop "$run_pid"; stop "$sim_pid"; exit 0' TERM
trap 'stop "$run_pid"; stop "$sim_pid"' EXIT

"$VPA" sim --kubeconfig-out "$RUN_DIR/kubeconfig" --nodes 3 --time-scale "$TIME_SCALE" \
  --webhook-service "kube-system/vpa-webhook=127.0.0.1:$WEBHOOK_PORT" >"$RUN_DIR/sim.log" 2>&1 &
sim_pid=$!

for _ in $(seq 1 100); do
  [ -s "$RUN_DIR/kubeconfig" ] && break
  kill -0 "$sim_pid" 2>/dev/null || { echo "vpa sim failed to start:"; cat "$RUN_DIR/sim.log"; exit 1; }
  sleep 0.1
done
[ -s "$RUN_DIR/kubeconfig" ] || { echo "vpa sim did not write its kubeconfig"; exit 1; }
echo "simulated cluster up (virtual time x$TIME_SCALE); kubeconfig: $RUN_DIR/kubeconfig, log: $RUN_DIR/sim.log"
echo "admission webhook: Service kube-system/vpa-webhook -> 127.0.0.1:$WEBHOOK_PORT"
echo "try: .venv/bin/kubectl --kubeconfig $RUN_DIR/kubeconfig get nodes,pods,vpa -A   (Ctrl-C stops both)"

NAMESPACE=kube-system "$VPA" run --kubeconfig "$RUN_DIR/kubeconfig" --clock=sim \
  --address="$ADDRESS" --port="$WEBHOOK_PORT" --log-format=console "$@" &
run_pid=$!
# The simulator ending by itself ends vpa run too.
( while kill -0 "$sim_pid" 2>/dev/null; do sleep 1; done; kill -TERM "$run_pid" 2>/dev/null ) &
watchdog_pid=$!

status=0
if [ -t 0 ]; then
  fg %2 >/dev/null || status=$?   # vpa run in the foreground: Ctrl-C is its SIGINT (graceful stop, exit 0)
else
  wait "$run_pid" || status=$?    # no terminal (CI, a supervisor): SIGTERM to this script stops both
fi
kill "$watchdog_pid" 2>/dev/null || true
if ! kill -0 "$sim_pid" 2>/dev/null; then
  echo "vpa sim exited (log: $RUN_DIR/sim.log)" >&2
  [ "$status" -eq 0 ] && status=1
fi
stop "$sim_pid"
exit "$status"
