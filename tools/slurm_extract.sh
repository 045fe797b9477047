#!/usr/bin/env bash
# Feature extraction on a slurm cluster, one task per GPU, each on its shard of the videos.
#   tools/slurm_extract.sh PARTITION JOB_NAME VIDEO_OR_DIR... --out DIR --weights PTH [args...]
# GPUS (default 8), GPUS_PER_NODE (8), CPUS_PER_TASK (4: decoding workers), SRUN_ARGS tune it.
set -euo pipefail
if [ $# -lt 3 ]; then
    echo "usage: $0 PARTITION JOB_NAME VIDEO_OR_DIR... --out DIR --weights PTH [args...]" >&2
    exit 2
fi
PARTITION=$1
JOB_NAME=$2
shift 2
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
    "$PYTHON" -u "$ROOT/tools/extract_features.py" "$@" --launcher slurm
