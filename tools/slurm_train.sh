#!/usr/bin/env bash
# Training on a slurm cluster, one task per GPU.
#   tools/slurm_train.sh PARTITION JOB_NAME CONFIG [tools/train.py args...]
# GPUS (default 8), GPUS_PER_NODE (8), CPUS_PER_TASK (4), SRUN_ARGS tune the job.
# VPN_TOOL=test.py runs tools/test.py instead (tools/slurm_test.sh); VPN_TOOL=extract_features.py
# runs the feature extractor (tools/slurm_extract.sh).
set -euo pipefail
if [ $# -lt 3 ]; then
    echo "usage: $0 PARTITION JOB_NAME CONFIG [train.py args...]" >&2
    exit 2
fi
PARTITION=$1
JOB_NAME=$2
CONFIG=$3
shift 3
GPUS=${GPUS:-8}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
CPUS_PER_TASK=${CPUS_PER_TASK:-4}
# the counts srun is given, checked as tools/dist_train.sh checks torchrun's (GPUS=0 or 1_6
# reached srun); decimal, as srun reads them (GPUS=08 is 8)
# shellcheck source=tools/check_count.sh
source "$(dirname "$0")/check_count.sh"
check_count GPUS "$GPUS" 1
check_count CPUS_PER_TASK "$CPUS_PER_TASK" 1
GPUS=$((10#$GPUS)) CPUS_PER_TASK=$((10#$CPUS_PER_TASK))
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-"$ROOT/.venv/bin/python"}
# a partition the cluster does not have: srun says only "Invalid generic resource (gres)
# specification" (it checks --gres first), naming neither
if command -v sinfo >/dev/null 2>&1; then
    PARTITIONS=$(sinfo -h -o %R 2>/dev/null | sort -u | tr '\n' ' ' || true)
    if [ -n "$PARTITIONS" ] && ! printf ' %s ' "$PARTITIONS" | grep -q " $PARTITION "; then
        echo "error: PARTITION=$PARTITION is no partition of this cluster (sinfo lists: ${PARTITIONS% }); expected one of them" >&2
        exit 2
    fi
fi
# one task per GPU: a partition without GPUs (or fewer per node than GPUS_PER_NODE) ends with
# srun's bare "Invalid generic resource (gres) specification", naming neither
case "$GPUS_PER_NODE" in
    ''|*[!0-9]*|0)
        echo "error: GPUS_PER_NODE=$GPUS_PER_NODE; expected a whole number >= 1 (one task per GPU;" \
             "on CPUs, run tools/${VPN_TOOL:-train.py} on one host, or several through the dist_*.sh" \
             "scripts' torchrun)" >&2
        exit 2 ;;
esac
if command -v sinfo >/dev/null 2>&1; then
    # %G: the gres of the partition's nodes, e.g. gpu:8, gpu:a100:4(S:0-1), (null)
    GRES=$(sinfo -h -p "$PARTITION" -o %G 2>/dev/null | sort -u | tr '\n' ' ' || true)
    GRES=${GRES% }
    MOST=$(printf '%s\n' "$GRES" | tr ' ,' '\n\n' | sed -n 's/^gpu\(:[^:(]*\)\{0,1\}:\([0-9][0-9]*\).*/\2/p' \
        | sort -n | tail -1)
    # only sinfo's gres syntax is judged ((null), name[:type]:count[(...)]); other output
    # (an older sinfo's, a wrapper's) leaves the choice to srun
    UNKNOWN=$(printf '%s\n' "$GRES" | tr ' ,' '\n\n' | grep -cvE '^(\(null\)|[A-Za-z_]+(:[^:( ]+)?:[0-9]+.*)?$' || true)
    if [ -n "$GRES" ] && [ "$UNKNOWN" = 0 ] && [ "${MOST:-0}" -lt "$GPUS_PER_NODE" ]; then
        if [ -n "$MOST" ]; then
            FIX="or GPUS_PER_NODE=$MOST (and GPUS a multiple of it)"
        else
            FIX="(this one has none: one task per GPU; on CPUs run tools/${VPN_TOOL:-train.py} without Slurm)"
        fi
        echo "error: PARTITION=$PARTITION has ${MOST:-no} GPU(s) per node (sinfo gres: $GRES), but" \
             "GPUS_PER_NODE=$GPUS_PER_NODE asks for $GPUS_PER_NODE (srun --gres=gpu:$GPUS_PER_NODE);" \
             "expected a partition with GPUs (sinfo -o '%P %G' lists them) $FIX" >&2
        exit 2
    fi
fi
# shellcheck disable=SC2086  # SRUN_ARGS is a list of options
srun -p "$PARTITION" \
    --job-name="$JOB_NAME" \
    --gres=gpu:"$GPUS_PER_NODE" \
    --ntasks="$GPUS" \
    --ntasks-per-node="$GPUS_PER_NODE" \
    --cpus-per-task="$CPUS_PER_TASK" \
    --kill-on-bad-exit=1 \
    ${SRUN_ARGS:-} \
    "$PYTHON" -u "$ROOT/tools/${VPN_TOOL:-train.py}" "$CONFIG" "$@" --launcher slurm
