"""torchrun (``torch.distributed.run``) for tools/dist_train.sh, dist_test.sh and
dist_extract.sh: the same arguments and processes, but a process that fails ends the run with
one line naming each failed rank and its exit status (each rank has printed its own message
above) instead of torchrun's traceback of its launcher and failure table.

    python tools/dist_run.py --nproc_per_node=2 tools/train.py CONFIG --launcher pytorch
"""
import logging
import os
import signal
import sys
import tempfile
from pathlib import Path

from vpn_plugin.errors import DIST_ERRORS_VARIABLE, tool_main


def failure_summary(failures) -> str:
    """One line for torchrun's ``{rank: ProcessFailure}``: the ranks that failed with an exit
    status (each printed its own message), the ranks that crashed on a signal (a signal other
    than torchrun's SIGTERM: nothing of theirs may say why), then those torchrun stopped (all
    of them SIGTERM: one was stopped from outside the run first)."""
    failed, crashed, stopped = [], [], []
    for rank, failure in sorted(failures.items()):
        if failure.exitcode >= 0:
            failed.append(f'rank {rank} (exit status {failure.exitcode})')
            continue
        name = signal_name(-failure.exitcode)
        (stopped if name == 'SIGTERM' else crashed).append(f'rank {rank} ({name})')
    parts = []
    if failed:
        parts.append(f'{", ".join(failed)} failed (each printed its message above)')
    if crashed:
        parts.append(f'{", ".join(crashed)} crashed on a signal')
    if stopped and not parts:  # torchrun stops the others only after one failed
        parts.append('no rank failed on its own: a SIGTERM from outside the run (a kill, the '
                     'job scheduler) stopped one, then torchrun the others: '
                     f'{", ".join(stopped)}')
    elif stopped:
        parts.append(f'stopped by torchrun then: {", ".join(stopped)}')
    return '; '.join(parts)


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f'signal {number}'


def print_rank_messages(folder: str) -> None:
    """The messages the ranks other than 0 left in ``folder`` (``errors.leave_to_rank_zero``;
    rank 0 printed its own), each distinct one once, naming its ranks."""
    messages = {}
    for path in sorted(Path(folder).glob('rank*.txt'), key=lambda p: int(p.stem[4:])):
        messages.setdefault(path.read_text(encoding='utf-8'), []).append(int(path.stem[4:]))
    for text, ranks in messages.items():
        if 0 not in ranks:
            print(f'rank {", ".join(map(str, ranks))}: {text}', file=sys.stderr)


def check_port_free(address: str, port: int) -> None:
    """The first node's rendezvous port must be free: another distributed run on it would
    end this one with torch's 40-line DistNetworkError traceback of each rank."""
    import errno
    import socket
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # as torch's TCPStore: a port left in TIME_WAIT by a finished run is free
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((address, port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise ValueError(f'PORT={port}: the rendezvous port is in use on {address} '
                                 '(another distributed run?); set PORT to a free port, e.g. '
                                 f'PORT={port + 1} tools/dist_train.sh ...') from None


@tool_main
def main(argv=None) -> int:
    from torch.distributed import run
    # torchrun logs each failed process as an ERROR line before raising; the line below says it
    logging.getLogger('torch.distributed.elastic').setLevel(logging.CRITICAL)
    args = run.parse_args(sys.argv[1:] if argv is None else argv)
    if args.node_rank == 0:
        check_port_free(args.master_addr, args.master_port)
    with tempfile.TemporaryDirectory(prefix='vpn_dist_errors_') as folder:
        os.environ[DIST_ERRORS_VARIABLE] = folder  # the ranks' messages (errors.py)
        return run_torchrun(run, args, folder)


def run_torchrun(run, args, folder: str) -> int:
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    try:
        run.run(args)
    except ChildFailedError as error:
        print_rank_messages(folder)
        print(f'{error.name}: {failure_summary(error.failures)}', file=sys.stderr)
        return next((f.exitcode for _, f in sorted(error.failures.items())
                     if f.exitcode and f.exitcode > 0), 1)
    except SignalException as error:  # torchrun itself stopped (Ctrl-C, kill, the scheduler)
        name = signal_name(error.sigval)
        print(f'{args.training_script}: torchrun was stopped by {name}, and with it every '
              'process of the run', file=sys.stderr)
        return 128 + error.sigval
    return 0


if __name__ == '__main__':
    sys.exit(main())
