#!/usr/bin/env bash
# The main job on one machine: a simulated cluster (`vpa sim`) and `vpa run` following its virtual clock.
# Stops both (by PID) on Ctrl-C or when either exits. Extra arguments go to `vpa run`.
set -euo pipefail
cd "$(dirname "$0")/.."
VPA=${VPA:-.venv/bin/vpa}
RUN_DIR=${RUN_DIR:-.run}
TIME_SCALE=${TIME_SCALE:-60}
mkdir -p "$RUN_DIR"
rm -f "$RUN_DIR/kubeconfig"

"$VPA" sim --kubeconfig-out "$RUN_DIR/kubeconfig" --nodes 3 --time-scale "$TIME_SCALE" >"$RUN_DIR/sim.log" 2>&1 &
sim_pid=$!
run_pid=""
cleanup() {
  [ -n "$run_pid" ] && kill "$run_pid" 2>/dev/null || true
  kill "$sim_pid" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

for _ in $(seq 1 100); do
  [ -s "$RUN_DIR/kubeconfig" ] && break
  kill -0 "$sim_pid" 2>/dev/null || { echo "vpa sim failed to start:"; cat "$RUN_DIR/sim.log"; exit 1; }
  sleep 0.1
done
[ -s "$RUN_DIR/kubeconfig" ] || { echo "vpa sim did not write its kubeconfig"; exit 1; }
echo "simulated cluster up (virtual time x$TIME_SCALE); kubeconfig: $RUN_DIR/kubeconfig, log: $RUN_DIR/sim.log"
echo "try: .venv/bin/kubectl --kubeconfig $RUN_DIR/kubeconfig get nodes,pods,vpa -A"

"$VPA" run --kubeconfig "$RUN_DIR/kubeconfig" --clock=sim --address=127.0.0.1:8942 --log-format=console "$@" &
run_pid=$!
wait -n "$sim_pid" "$run_pid"
