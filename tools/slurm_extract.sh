#!/usr/bin/env bash
# Feature extraction on a slurm cluster, one task per GPU, each on its shard of the videos.
#   tools/slurm_extract.sh PARTITION JOB_NAME VIDEO_OR_DIR... --out DIR --weights PTH [args...]
# GPUS (default 8), GPUS_PER_NODE (8), CPUS_PER_TASK (4: decoding workers), SRUN_ARGS as
# tools/slurm_train.sh.
set -euo pipefail
if [ $# -lt 3 ]; then
    echo "usage: $0 PARTITION JOB_NAME VIDEO_OR_DIR... --out DIR --weights PTH [args...]" >&2
    exit 2
fi
# slurm_train.sh PARTITION JOB_NAME FIRST_VIDEO, then the other videos and options
VPN_TOOL=extract_features.py exec "$(dirname "$0")/slurm_train.sh" "$@"
