"""torchrun (``torch.distributed.run``) for tools/dist_train.sh, dist_test.sh and
dist_extract.sh: the same arguments and processes, but a process that fails ends the run with
one line naming each failed rank and its exit status (each rank has printed its own message
above) instead of torchrun's traceback of its launcher and failure table.

    python tools/dist_run.py --nproc_per_node=2 tools/train.py CONFIG --launcher pytorch
"""
import logging
import sys

from vpn_plugin.errors import tool_main


@tool_main
def main(argv=None) -> int:
    from torch.distributed import run
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    # torchrun logs each failed process as an ERROR line before raising; the line below says it
    logging.getLogger('torch.distributed.elastic').setLevel(logging.CRITICAL)
    try:
        run.run(run.parse_args(sys.argv[1:] if argv is None else argv))
    except ChildFailedError as error:
        failures = sorted(error.failures.items())
        failed = [f'rank {rank} (exit status {f.exitcode})' for rank, f in failures
                  if f.exitcode >= 0]
        stopped = [f'rank {rank} (signal {-f.exitcode})' for rank, f in failures
                   if f.exitcode < 0]
        print(f'{error.name}: {", ".join(failed) or "no process"} failed (each printed its message above)'
              + (f'; stopped by torchrun then: {", ".join(stopped)}' if stopped else ''),
              file=sys.stderr)
        return next((f.exitcode for _, f in failures if f.exitcode and f.exitcode > 0), 1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
