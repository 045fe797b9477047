#!/usr/bin/env bash
# Multi-process testing with torchrun, on GPUs or (gloo) on CPU.
#   tools/dist_test.sh CONFIG CHECKPOINT NPROC [tools/test.py args...]
# NNODES, NODE_RANK, MASTER_ADDR, PORT select a multi-node run (as tools/dist_train.sh).
set -euo pipefail
if [ $# -lt 3 ]; then
    echo "usage: $0 CONFIG CHECKPOINT NPROC [test.py args...]" >&2
    exit 2
fi
# dist_train.sh CONFIG NPROC, then test.py's CHECKPOINT and options
VPN_TOOL=test.py exec "$(dirname "$0")/dist_train.sh" "$1" "$3" "$2" "${@:4}"
