#!/usr/bin/env bash
# Multi-process training with torchrun, on GPUs or (gloo) on CPU.
#   tools/dist_train.sh CONFIG NPROC [tools/train.py args...]
# NNODES, NODE_RANK, MASTER_ADDR, PORT select a multi-node run.
# VPN_TOOL=test.py runs tools/test.py instead (tools/dist_test.sh); VPN_TOOL=extract_features.py
# runs the feature extractor (tools/dist_extract.sh).
set -euo pipefail
if [ $# -lt 2 ]; then
    echo "usage: $0 CONFIG NPROC [train.py args...]" >&2
    exit 2
fi
CONFIG=$1
NPROC=$2
shift 2
# the counts, checked before torchrun starts (its own answer to "abc" or 0 is a traceback)
# shellcheck source=tools/check_count.sh
source "$(dirname "$0")/check_count.sh"
check_count NPROC "$NPROC" 1
check_count NNODES "${NNODES:-1}" 1
check_count NODE_RANK "${NODE_RANK:-0}" 0
check_count PORT "${PORT:-29500}" 1
# decimal, as torchrun reads them: bash arithmetic took NNODES=08 for octal (a raw "value too
# great for base" error, then torchrun waited for 8 nodes) and NNODES=010 for 8
NNODES=$((10#${NNODES:-1})) NODE_RANK=$((10#${NODE_RANK:-0})) PORT=$((10#${PORT:-29500}))
if [ "${NODE_RANK:-0}" -ge "${NNODES:-1}" ]; then  # torchrun would wait for ever
    echo "error: NODE_RANK=${NODE_RANK:-0}: expected 0..$(( ${NNODES:-1} - 1 )) (NNODES=${NNODES:-1})" >&2
    exit 2
fi
if [ "${PORT:-29500}" -gt 65535 ]; then
    echo "error: PORT=${PORT}: expected a port number <= 65535" >&2
    exit 2
fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-"$ROOT/.venv/bin/python"}
# one thread per process unless set: what torchrun and mmengine set anyway, without their
# warning per rank (set OMP_NUM_THREADS / MKL_NUM_THREADS to give each process more)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
export MKL_NUM_THREADS=${MKL_NUM_THREADS:-1}
# tools/dist_run.py: torchrun, ending a failed process with one line instead of a traceback
exec "$PYTHON" "$ROOT/tools/dist_run.py" \
    --nnodes="${NNODES:-1}" \
    --node_rank="${NODE_RANK:-0}" \
    --master_addr="${MASTER_ADDR:-127.0.0.1}" \
    --master_port="${PORT:-29500}" \
    --nproc_per_node="$NPROC" \
    "$ROOT/tools/${VPN_TOOL:-train.py}" "$CONFIG" "$@" --launcher pytorch
