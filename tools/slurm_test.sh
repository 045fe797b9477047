#!/usr/bin/env bash
# Testing on a slurm cluster, one task per GPU.
#   tools/slurm_test.sh PARTITION JOB_NAME CONFIG CHECKPOINT [tools/test.py args...]
# GPUS (default 8), GPUS_PER_NODE (8), CPUS_PER_TASK (4), SRUN_ARGS tune the job.
set -euo pipefail
if [ $# -lt 4 ]; then
    echo "usage: $0 PARTITION JOB_NAME CONFIG CHECKPOINT [test.py args...]" >&2
    exit 2
fi
PARTITION=$1
JOB_NAME=$2
CONFIG=$3
CHECKPOINT=$4
shift 4
GPUS=${GPUS:-8}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
CPUS_PER_TASK=${CPUS_PER_TASK:-4}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-"$ROOT/.venv/bin/python"}
# shellcheck disable=SC2086  # SRUN_ARGS is a list of options
srun -p "$PARTITION" \
    --job-name="$JOB_NAME" \
    --gres=gpu:"$GPUS_PER_NODE" \
    --ntasks="$GPUS" \
    --ntasks-per-node="$GPUS_PER_NODE" \
    --cpus-per-task="$CPUS_PER_TASK" \
    --kill-on-bad-exit=1 \
    ${SRUN_ARGS:-} \
    "$PYTHON" -u "$ROOT/tools/test.py" "$CONFIG" "$CHECKPOINT" --launcher slurm "$@"
