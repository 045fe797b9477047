"""Seconds per training epoch of a config, the share spent loading data, and where an epoch goes.

    OMP_NUM_THREADS=1 .venv/bin/python tools/benchmark_epoch.py \
        configs/vpn_crosstask_t3.py --epochs 3 [--threads 1] [--test] [--cfg-options ...]

Prints the device, torch and CUDA versions, then trains ``--epochs`` epochs with the config's
Runner, built as ``tools/train.py`` builds it (no validation, no checkpoints; the environment
dump and the config go to the temporary work dir, not the console), and prints one row per
epoch: wall seconds, iterations, seconds per iteration and the data-loading share (mmengine's
``data_time`` over the iteration ``time``, both from IterTimerHook), and the time before the
first epoch (hooks: PDPP's task-classifier stage). Then one more, instrumented epoch gives the
split of an epoch: ``data`` (the loader's batches and the data preprocessor's copy to the
device), ``forward`` (model and losses), ``backward``, ``optimiser`` (step and zero_grad),
``hooks`` (every hook call) and ``other`` (the loop itself). On a GPU the instrumented epoch
synchronises the device at each phase boundary, so that each phase is charged its own device
time; its total is therefore above the plain epochs'. The one-off feature extraction that fills
the observation cache happens when the dataset is built, before the first epoch, and is
reported separately. ``--test`` then times one pass over the test split (PDPP: 10-step DDIM
sampling of every window).

``--retrieval`` (KEPP configs) trains nothing: it builds KEPP's graph from the training split and
times the path retrieval of every test window's (first, last) pair with a cold cache, as the
test pass does after the step model (CrossTask T=3: 4,531 windows)::

    nice -n 10 .venv/bin/python tools/benchmark_epoch.py configs/baselines/kepp_crosstask_t3.py \
        --retrieval

``--versus OTHER_CONFIG`` trains nothing through the Runner either: it times one training step
(loss, backward, the config's optimiser) of each config's model in turn, in one process, on the
same random batch (``--batch`` windows of the configs' horizon and feature dim), ``--repeats``
rounds, and prints the fastest and the median step of each and their ratio (alternating rounds
cancel most of the drift of a shared machine). A KEPP training step against PDPP's (its step
model is a one-off stage before the first epoch: its plan paths come from the ground truth
here, as from a cached lookup of the step model's predictions in training)::

    nice -n 10 .venv/bin/python tools/benchmark_epoch.py configs/baselines/kepp_crosstask_t3.py \
        --versus configs/baselines/pdpp_crosstask_t3.py --batch 32 --repeats 10

The same through the Runner (whole epochs, the hooks included)::

    nice -n 10 .venv/bin/python tools/benchmark_epoch.py configs/baselines/pdpp_crosstask_t3.py \
        --epochs 1 --cfg-options train_dataloader.batch_size=32 \
        train_dataloader.batch_sampler.steps_per_epoch=5
    nice -n 10 .venv/bin/python tools/benchmark_epoch.py configs/baselines/kepp_crosstask_t3.py \
        --epochs 1 --cfg-options train_dataloader.batch_size=32 \
        train_dataloader.batch_sampler.steps_per_epoch=5 model.train_paths=truth
"""
import argparse
import functools
import tempfile
import time
from collections import Counter

import torch

import vpn_plugin.mm  # noqa: F401  (compat + registration)
from mmengine.device import get_device
from mmengine.hooks import Hook
from vpn_plugin.benchmark import environment_line
from vpn_plugin.data_paths import add_cfg_options, load_config
from vpn_plugin.errors import POSITIVE_INT, close_log_files, parse_once, path_argument, tool_main
from vpn_plugin.runner import build_runner as build_planning_runner

PHASES = ('data', 'forward', 'backward', 'optimiser', 'hooks', 'other')


class EpochClock(Hook):
    """Wall time of each training epoch and its iterations' data/total time."""

    def __init__(self, epochs: int):
        self.rows, self.epochs = [], epochs

    def before_run(self, runner):
        self.run_began = time.perf_counter()

    def before_train_epoch(self, runner):
        self.began, self.data_time, self.iter_time, self.iters = time.perf_counter(), 0.0, 0.0, 0

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        hub = runner.message_hub
        self.data_time += hub.get_scalar('train/data_time').current()
        self.iter_time += hub.get_scalar('train/time').current()
        self.iters += 1

    def after_train_epoch(self, runner):
        if not self.rows:
            self.before_first_epoch = self.began - self.run_began
        if runner.epoch < self.epochs:  # the instrumented epoch is reported by PhaseClock
            self.rows.append(dict(epoch=runner.epoch + 1,
                                  seconds=time.perf_counter() - self.began, iters=self.iters,
                                  data_share=self.data_time / self.iter_time))


class PhaseClock:
    """Seconds per phase (``PHASES``) of one epoch, from timers around the Runner's calls."""

    def __init__(self, synchronise: bool):
        self.seconds, self.enabled, self.synchronise = Counter(), False, synchronise

    def _sync(self):
        if self.synchronise:
            torch.cuda.synchronize()

    def timed(self, phase, function):
        @functools.wraps(function)  # keeps marks such as the schedulers' step counter
        def wrapper(*args, **kwargs):
            if not self.enabled:
                return function(*args, **kwargs)
            self._sync()
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self._sync()
                self.seconds[phase] += time.perf_counter() - start
        return wrapper

    def instrument(self, runner, epoch: int) -> None:
        """Time the phases of epoch ``epoch`` (0-based) of ``runner``'s training."""
        model, optim = runner.model, runner.optim_wrapper
        model._run_forward = self.timed('forward', model._run_forward)
        model.parse_losses = self.timed('forward', model.parse_losses)
        model.data_preprocessor.forward = self.timed('data', model.data_preprocessor.forward)
        optim.backward = self.timed('backward', optim.backward)
        optim.step = self.timed('optimiser', optim.step)
        optim.zero_grad = self.timed('optimiser', optim.zero_grad)
        runner.call_hook = self.timed('hooks', runner.call_hook)
        loop = runner.train_loop
        loop.dataloader = TimedLoader(loop.dataloader, self)
        run_epoch = loop.run_epoch

        def timed_epoch():
            self.enabled = runner.epoch == epoch
            self._sync()
            start = time.perf_counter()
            run_epoch()
            self._sync()
            if self.enabled:
                self.seconds['total'] = time.perf_counter() - start
                self.seconds['other'] = self.seconds['total'] - sum(
                    self.seconds[p] for p in PHASES if p != 'other')
            self.enabled = False
        loop.run_epoch = timed_epoch


class TimedLoader:
    """The train loop's DataLoader with each batch's fetch charged to 'data'."""

    def __init__(self, loader, clock: PhaseClock):
        self._loader, self._clock = loader, clock

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def __len__(self):
        return len(self._loader)

    def __iter__(self):
        iterator = self._clock.timed('data', iter)(self._loader)
        fetch = self._clock.timed('data', next)
        while True:
            try:
                yield fetch(iterator)
            except StopIteration:
                return


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('config', type=path_argument)
    parser.add_argument('--epochs', type=POSITIVE_INT, default=3,
                        help='plain epochs timed; one instrumented epoch follows')
    parser.add_argument('--threads', type=POSITIVE_INT, default=1, help='torch intra-op threads')
    parser.add_argument('--test', action='store_true',
                        help='also time one pass over the test split after training')
    parser.add_argument('--versus', type=path_argument, metavar='OTHER_CONFIG',
                        help='time a training step of this config\'s model against OTHER_CONFIG\'s')
    parser.add_argument('--batch', type=POSITIVE_INT, default=32,
                        help='windows per step (--versus)')
    parser.add_argument('--repeats', type=POSITIVE_INT, default=10, help='rounds (--versus)')
    parser.add_argument('--retrieval', action='store_true',
                        help='KEPP: time the PKG path retrieval of the test windows instead')
    add_cfg_options(parser, 'override config keys')
    return parse_once(parser, argv)


def step_timer(config: str, cfg_options, batch: int):
    """A function running one training step of ``config``'s model on a fixed random batch
    (KEPP: ``train_paths='truth'`` and a PKG of the batch's plans)."""
    import numpy as np
    from mmaction.registry import MODELS
    from mmengine.optim import build_optim_wrapper
    from vpn_plugin.core import kepp_paths
    from vpn_plugin.models.kepp import KEPP
    cfg = load_config(config, cfg_options)
    if cfg.model.type == 'KEPP':
        cfg.model.train_paths = 'truth'
    model = MODELS.build(cfg.model).train()
    generator = torch.Generator().manual_seed(0)
    size = (batch, model.horizon)
    plan = torch.randint(0, model.num_actions, size, generator=generator)
    inputs = {k: torch.randn(batch, cfg.model.feature_dim, generator=generator)
              for k in ('start', 'goal')}
    samples = dict(plan=plan, index=torch.arange(batch),
                   task=torch.randint(0, cfg.model.get('num_tasks', 1), (batch,)))
    if isinstance(model, KEPP):
        model.set_graph(kepp_paths.build_graph(enumerate(np.asarray(plan).tolist())))
    optimiser = build_optim_wrapper(model, cfg.optim_wrapper)

    def step() -> float:
        began = time.perf_counter()
        optimiser.update_params(sum(model(inputs, samples, mode='loss').values()))
        return time.perf_counter() - began
    step()  # warm-up
    return step


def time_versus(args) -> dict:
    """One training step of each config's model, alternating (module docstring)."""
    import statistics
    timers = {args.config: step_timer(args.config, args.cfg_options, args.batch),
              args.versus: step_timer(args.versus, args.cfg_options, args.batch)}
    times = {name: [] for name in timers}
    for _ in range(args.repeats):
        for name, step in timers.items():
            times[name].append(step())
    print(f'\n{environment_line("cpu")}')
    for name, values in times.items():
        print(f'{name}: training step (batch {args.batch}) fastest {min(values):.3f} s, median '
              f'{statistics.median(values):.3f} s over {args.repeats}')
    mine, other = (times[args.config], times[args.versus])
    print(f'ratio {args.config} / {args.versus}: fastest {min(mine) / min(other):.2f}, median '
          f'{statistics.median(mine) / statistics.median(other):.2f}')
    return times


def time_kepp_retrieval(args) -> dict:
    """KEPP's graph from the training split, then the retrieval of every test window's
    (first, last) pair with a cold cache (module docstring)."""
    from mmaction.registry import DATASETS, MODELS
    from vpn_plugin.models.kepp import KEPP
    cfg = load_config(args.config, args.cfg_options)
    with torch.device('meta'):  # the U-Nets are not needed
        model = MODELS.build(cfg.model)
    if not isinstance(model, KEPP):
        raise ValueError(f'{args.config}: --retrieval times KEPP\'s path retrieval; the model '
                         f'is {type(model).__name__}')
    model.to_empty(device='cpu')
    model.build_pkg(DATASETS.build(cfg.train_dataloader.dataset))
    windows = DATASETS.build(cfg.test_dataloader.dataset).pkg_sequences('window')
    first, last = [w[0] for w in windows], [w[-1] for w in windows]
    retriever = model.retriever()
    began = time.perf_counter()
    paths, fallback = retriever.batch(first, last)
    seconds = time.perf_counter() - began
    print(f'\n{environment_line("cpu")}')
    print(f'{args.config}: KEPP retrieval of {len(windows)} test windows (T={model.horizon}, '
          f'{len(retriever.cache)} distinct (first, last) pairs, cold cache): {seconds:.3f} s; '
          f'fallback for {int(fallback.sum())} windows ({len(retriever.fallback_pairs)} pairs)')
    return dict(windows=len(windows), seconds=seconds, pairs=len(retriever.cache),
                fallback_windows=int(fallback.sum()))


def benchmark_runner(args, work_dir):
    cfg = load_config(args.config, args.cfg_options)
    cfg.work_dir = work_dir
    total = args.epochs + 1
    cfg.train_cfg.max_epochs = total
    cfg.train_cfg.val_interval = total + 1  # no validation inside the measurement
    for key in ('val_dataloader', 'val_evaluator', 'val_cfg'):
        cfg[key] = None  # the loop would validate after its last epoch
    cfg.default_hooks.checkpoint = None  # a measurement keeps no checkpoint
    cfg.default_hooks.logger = dict(type='LoggerHook', interval=10 ** 6)
    return build_planning_runner(cfg)


def print_split(clock: PhaseClock, epoch: int) -> None:
    seconds = clock.seconds
    synchronised = ', the device synchronised at each phase' if clock.synchronise else ''
    print(f'split of epoch {epoch} (instrumented{synchronised}): {seconds["total"]:.2f} s')
    print('  ' + ' | '.join(f'{phase} {seconds[phase]:.3f} s '
                            f'({100 * seconds[phase] / seconds["total"]:.0f}%)'
                            for phase in PHASES))


@tool_main
def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.retrieval:
        return time_kepp_retrieval(args)
    if args.versus:
        return time_versus(args)
    with tempfile.TemporaryDirectory() as work_dir:
        runner = benchmark_runner(args, work_dir)
        try:
            began = time.perf_counter()
            # Built here so that the one-off dataset build is timed apart; train() reuses it.
            runner._train_dataloader = runner.build_dataloader(runner._train_dataloader)
            build_seconds = time.perf_counter() - began
            dataset = runner._train_dataloader.dataset
            clock, phases = EpochClock(args.epochs), PhaseClock(get_device() == 'cuda')
            runner.register_hook(clock, priority='LOWEST')
            runner.register_hook(_Instrument(phases, args.epochs), priority='HIGHEST')
            runner.train()
            tested = time_test_pass(runner) if args.test else None
        finally:  # the folder goes: the runner's logger (mmengine's current one, which
            # later messages of this process reach) keeps no log file inside it
            close_log_files(runner.logger, work_dir)
    loader = runner.train_dataloader
    batch = loader.batch_size or loader.batch_sampler.batch_size  # PDPP: a batch sampler
    print(f'\n{environment_line(get_device())}')
    print(f'{args.config}: {len(dataset)} training windows, feature dim '
          f'{dataset.feature_dim}, batch {batch}, '
          f'{args.threads} thread(s), device-resident batches: '
          f'{getattr(dataset, "device_resident", False)}')
    print(f'dataset build (feature extraction or cache read): {build_seconds:.1f} s')
    print(f'before the first epoch (weights, hooks: e.g. PDPP\'s task classifier): '
          f'{clock.before_first_epoch:.1f} s')
    print(f'{"epoch":>5} {"seconds":>8} {"iters":>6} {"s/iter":>7} {"data share":>11}')
    for row in clock.rows:
        print(f'{row["epoch"]:>5} {row["seconds"]:>8.2f} {row["iters"]:>6} '
              f'{row["seconds"] / row["iters"]:>7.3f} {100 * row["data_share"]:>10.1f}%')
    print_split(phases, args.epochs + 1)
    if tested is not None:
        print(f'test pass: {tested[0]} windows in {tested[1]:.1f} s (dataset build not included)')
    return clock.rows, dict(phases.seconds)


def time_test_pass(runner) -> tuple:
    """(windows, seconds) of one ``runner.test()`` pass, the test dataset built beforehand."""
    runner._test_dataloader = runner.build_dataloader(runner._test_dataloader)
    began = time.perf_counter()
    runner.test()
    return len(runner._test_dataloader.dataset), time.perf_counter() - began


class _Instrument(Hook):
    """Installs the phase timers once the train loop exists (before training starts)."""

    def __init__(self, clock: PhaseClock, epoch: int):
        self.clock, self.epoch = clock, epoch

    def before_train(self, runner):
        self.clock.instrument(runner, self.epoch)


if __name__ == '__main__':
    main()
