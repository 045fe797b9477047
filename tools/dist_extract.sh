#!/usr/bin/env bash
# Feature extraction over several processes with torchrun (GPUs, or gloo on CPU): each
# process takes its shard of the sorted video list (tools/extract_features.py).
#   tools/dist_extract.sh NPROC VIDEO_OR_DIR... --out DIR --weights s3d_howto100m.pth [args...]
# NNODES, NODE_RANK, MASTER_ADDR, PORT select a multi-node run.
set -euo pipefail
if [ $# -lt 2 ]; then
    echo "usage: $0 NPROC VIDEO_OR_DIR... --out DIR --weights PTH [extract_features.py args...]" >&2
    exit 2
fi
NPROC=$1
shift 1
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-"$ROOT/.venv/bin/python"}
exec "$PYTHON" -m torch.distributed.run \
    --nnodes="${NNODES:-1}" \
    --node_rank="${NODE_RANK:-0}" \
    --master_addr="${MASTER_ADDR:-127.0.0.1}" \
    --master_port="${PORT:-29500}" \
    --nproc_per_node="$NPROC" \
    "$ROOT/tools/extract_features.py" "$@" --launcher pytorch
