#!/usr/bin/env bash
# Testing on a slurm cluster, one task per GPU.
#   tools/slurm_test.sh PARTITION JOB_NAME CONFIG CHECKPOINT [tools/test.py args...]
# GPUS (default 8), GPUS_PER_NODE (8), CPUS_PER_TASK (4), SRUN_ARGS as tools/slurm_train.sh.
set -euo pipefail
if [ $# -lt 4 ]; then
    echo "usage: $0 PARTITION JOB_NAME CONFIG CHECKPOINT [test.py args...]" >&2
    exit 2
fi
# slurm_train.sh PARTITION JOB_NAME CONFIG, then test.py's CHECKPOINT and options
VPN_TOOL=test.py exec "$(dirname "$0")/slurm_train.sh" "$@"
