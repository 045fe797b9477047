#!/usr/bin/env bash
# Feature extraction over several processes with torchrun (GPUs, or gloo on CPU): each
# process takes its shard of the sorted video list (tools/extract_features.py).
#   tools/dist_extract.sh NPROC VIDEO_OR_DIR... --out DIR --weights s3d_howto100m.pth [args...]
# NNODES, NODE_RANK, MASTER_ADDR, PORT select a multi-node run (as tools/dist_train.sh).
set -euo pipefail
if [ $# -lt 2 ]; then
    echo "usage: $0 NPROC VIDEO_OR_DIR... --out DIR --weights PTH [extract_features.py args...]" >&2
    exit 2
fi
# dist_train.sh FIRST_VIDEO NPROC, then the other videos and options
VPN_TOOL=extract_features.py exec "$(dirname "$0")/dist_train.sh" "$2" "$1" "${@:3}"
