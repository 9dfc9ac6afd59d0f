#!/usr/bin/env bash
# A whole training cluster on this machine (127.0.0.1): ps tasks, workers and the chief
# (worker 0), each a train_image_classifier.py process with its log in LOG_DIR.
# Everything is torn down on Ctrl-C, or as soon as one task fails.
#
#   scripts/run_local_cluster.sh [--ps N] [--workers M] [--log_dir DIR] [--port P] \
#       -- <train_image_classifier.py flags: dataset, model, train_dir, ...>
#
# --ps 0 trains the workers with synchronous all-reduce (MultiWorkerMirroredStrategy);
# --ps N > 0 trains asynchronously on N parameter servers. The exit status is the
# chief's (or the first failing task's).
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
NUM_PS=1
NUM_WORKERS=2
LOG_DIR=cluster_logs
BASE_PORT=${BASE_PORT:-22220}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --ps) NUM_PS=$2; shift 2 ;;
    --workers) NUM_WORKERS=$2; shift 2 ;;
    --log_dir) LOG_DIR=$2; shift 2 ;;
    --port) BASE_PORT=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "ERROR: unknown option $1; usage: $0 [--ps N] [--workers M] [--log_dir DIR]" \
            "[--port P] -- <training flags>" >&2; exit 2 ;;
  esac
done
if (( NUM_WORKERS < 1 )); then echo "ERROR: --workers must be at least 1." >&2; exit 2; fi
mkdir -p "$LOG_DIR"

hosts() {  # hosts FIRST_PORT COUNT -> 127.0.0.1:p,127.0.0.1:p+1,...
  local list=() i
  for ((i = 0; i < $2; i++)); do list+=("127.0.0.1:$(($1 + i))"); done
  (IFS=,; echo "${list[*]}")
}
CLUSTER=(--worker_hosts="$(hosts $((BASE_PORT + NUM_PS)) "$NUM_WORKERS")")
if (( NUM_PS > 0 )); then CLUSTER+=(--ps_hosts="$(hosts "$BASE_PORT" "$NUM_PS")"); fi

declare -A PIDS=()
teardown() {
  trap - INT TERM EXIT
  for name in "${!PIDS[@]}"; do kill -TERM "${PIDS[$name]}" 2>/dev/null; done
  sleep 2
  for name in "${!PIDS[@]}"; do kill -KILL "${PIDS[$name]}" 2>/dev/null; done
  wait 2>/dev/null
}
trap 'echo "Interrupted: stopping every task." >&2; teardown; exit 130' INT TERM
trap teardown EXIT

start() {  # start NAME ARGS...: a task in the background, its output in LOG_DIR/NAME.log
  local name=$1; shift
  "$PYTHON" train_image_classifier.py "${CLUSTER[@]}" "$@" >"$LOG_DIR/$name.log" 2>&1 &
  PIDS[$name]=$!
  echo "started $name (pid ${PIDS[$name]}), log $LOG_DIR/$name.log"
}

for ((t = 0; t < NUM_PS; t++)); do start "ps$t" --job_name=ps --task=$t "$@"; done
for ((t = NUM_WORKERS - 1; t >= 0; t--)); do
  start "worker$t" --job_name=worker --task=$t "$@"
done

# Wait for the chief; stop everything as soon as any task fails.
while true; do
  for name in "${!PIDS[@]}"; do
    pid=${PIDS[$name]}
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid"; status=$?
      unset "PIDS[$name]"
      if (( status != 0 )); then
        echo "ERROR: $name exited with status $status; stopping the cluster (see" \
             "$LOG_DIR/$name.log)." >&2
        tail -n 5 "$LOG_DIR/$name.log" >&2
        exit "$status"
      fi
      if [[ $name == worker0 ]]; then
        if (( NUM_PS > 0 )); then  # the others only serve the chief: stop them now
          echo "The chief finished; stopping the ps tasks and workers."
          teardown
        else  # multi-worker: every worker trains to the same last step
          echo "The chief finished; waiting for the other workers."
          for other in "${!PIDS[@]}"; do wait "${PIDS[$other]}"; done
          PIDS=()
        fi
        exit 0
      fi
    fi
  done
  sleep 1
done
