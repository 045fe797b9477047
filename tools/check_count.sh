# Sourced by tools/dist_train.sh and tools/slurm_train.sh: the one check of a count given to
# torchrun or srun (their own answer to "abc", 0 or 1_6 is a traceback, or a job asking for it).
check_count() {  # NAME VALUE LOWEST
    if ! [[ "$2" =~ ^[0-9]+$ ]] || [ "$((10#$2))" -lt "$3" ]; then
        echo "error: $1=$2: expected an integer >= $3" >&2
        exit 2
    fi
}
