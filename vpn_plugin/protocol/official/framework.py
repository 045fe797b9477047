"""Whole trainings by an official repository's script and by this plugin, on the same data.

One comparison (:func:`compare`) of a method (a plug-in, :class:`Method`) at given settings:

1. the synthetic features of the dataset's videos (:func:`prepare_data`, public layout: one
   ``<stem>.npy`` per video, as the real S3D files) are written once under ``<out>/data``;
2. the official checkout is copied to ``<out>/official_copy`` (never into this repository), the
   plug-in writes the same splits there in the official loader's format and the launcher
   (``launcher.py``); every change against the official run is a :class:`Change`, listed;
3. per seed, alternating the sides so both meet the same machine load: the official script,
   unchanged, in a subprocess (its lines recorded with their times), then ours through the
   protocol runner (:class:`~vpn_plugin.protocol.runner.ProtocolRunner`) on the same features
   and windows (both sides' window counts must agree, else the comparison stops);
4. :mod:`.summary` turns the per-seed :class:`SideRun` records into the tables and the figure.

A finished side of a seed is kept as ``<out>/{official,ours}/seed<s>.json`` and reused by a
rerun with the same settings (``<out>/run.json``; other settings are refused). The official
run's final weights (:meth:`Method.official_checkpoints`) are kept in
``<out>/official/seed<s>/checkpoints`` (the copy of the checkout is rebuilt by every call);
``rescore=True`` loads them into our model and scores them with our evaluator
(:func:`rescore_official_seed`), so that both sides' trainings meet one evaluator.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from vpn_plugin.protocol.progress import log
from .launcher import SHIMS, check_shims, write_launcher

SIDES = ('official', 'ours')


@dataclass
class Change:
    """One difference between the comparison's official run and the official defaults.
    ``kind``: 'data' (paths, files written for the loader), 'size' (model/batch sizes),
    'epochs', 'environment' (threads, launcher shims), 'patch' (a line of code changed),
    'variant' (an extra official run, ``--official-variant``)."""
    kind: str
    text: str

    def line(self) -> str:
        return f'[{self.kind}] {self.text}'


@dataclass
class Stage:
    """One official command: ``argv`` after the python (the script relative to the copy, which
    is the working directory), extra environment ``env``, and ``stdin`` (text typed into a
    script that asks, e.g. a mode prompt)."""
    name: str
    argv: list
    env: dict = field(default_factory=dict)
    stdin: str | None = None


@dataclass
class Settings:
    """What one comparison runs (its identity: ``<out>/run.json``)."""
    method: str
    dataset: str
    horizon: int
    epochs: int
    seeds: list
    threads: int = 1
    difficulty: float = 0.5
    feature_seed: int = 0
    sizes: dict = field(default_factory=dict)   # plug-in sizes (Method.sizes), both sides
    frame_dim: int = 512  # dims of a synthetic frame (S3D: 512); observations are 3 frames

    def identity(self) -> dict:
        """Everything that changes a side's result; ``seeds`` left out (a rerun may add seeds),
        ``frame_dim`` too when it is the default 512 (comparisons made before it existed)."""
        return {k: v for k, v in dataclasses.asdict(self).items()
                if k != 'seeds' and not (k == 'frame_dim' and v == 512)}


@dataclass
class SideRun:
    """One training of one side and seed, as the comparison reads it.

    ``losses``: per-epoch mean training losses ``{name: [epochs]}`` under the plug-in's common
    names (``total`` always); ``train_seconds``: wall seconds of each epoch's training;
    ``eval_seconds``: of the test pass the official loop runs after each epoch (empty when it
    runs none); ``metrics``: the test metrics of the last epoch (our metric names, percent);
    ``selected``: the metrics of the checkpoint the official script itself selects, with
    ``selected_epoch`` (1-based) and how (``selection``), when that differs from the last epoch;
    ``windows``: ``{'train': n, 'test': n}`` training / test windows the side saw."""
    side: str
    seed: int
    losses: dict
    train_seconds: list
    metrics: dict
    windows: dict
    eval_seconds: list = field(default_factory=list)
    selected: dict | None = None
    selected_epoch: int | None = None
    selection: str = ''
    # pre-stage name -> {'losses': [per epoch], 'seconds': [per epoch], 'accuracy': test %,
    # 'selected_accuracy': % of the official selection, 'selected_epoch': n}
    stages: dict = field(default_factory=dict)

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix('.tmp')
        tmp.write_text(json.dumps(dataclasses.asdict(self), indent=1))
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> 'SideRun':
        return cls(**json.loads(Path(path).read_text()))


@dataclass
class ComparisonData:
    """The data both sides read: ``feature_dir`` (public layout), the shared annotations
    ``data_root`` (as ../shared/data), the taxonomy and the videos of each split, and
    ``official_dir``, where a plug-in writes its loader's files."""
    dataset: str
    horizon: int
    data_root: Path
    feature_dir: Path
    official_dir: Path
    cache_dir: Path
    taxonomy: object
    videos: dict       # split -> [VideoAnnotation] (steps in annotation order)
    windows: dict      # split -> [Window] of the unified protocol at the horizon


class Method:
    """A method's plug-in (one module per method in this package, ``METHOD = Subclass()``).

    Class attributes: ``name`` (``--method``), ``label`` (table rows), ``repository``, ``entry``
    (the official training script, relative to the checkout), ``required`` (files a checkout
    must hold), ``datasets`` (supported), ``sizes`` (``{name: (default, help)}``: sizes that
    both sides set, ``--size name=value``), ``shims`` (launcher shims, launcher.SHIMS),
    ``metrics`` (our metric names the official loop reports, compared in the table),
    ``loss_names`` (common loss names, ``total`` first), ``patched_sizes`` (sizes the official
    code hard-codes: a listed patch of the copy sets them, not a flag), ``variants``
    (``{name: what it changes}``: official reruns with a setting of the official defaults
    switched, e.g. an official defect on, compared with the main official run).
    """
    name = ''
    label = ''
    repository = ''
    entry = ''
    required: tuple = ()
    datasets: tuple = ()
    sizes: dict = {}
    shims: tuple = ()
    metrics: tuple = ('success_rate', 'mean_accuracy', 'miou_legacy')
    loss_names: tuple = ('total',)
    patched_sizes: tuple = ()  # sizes set by a patch of the official code, not by a flag
    any_frame_dim = False  # True: the plug-in sets both sides' observation dims (--frame-dim)
    variants: dict = {}  # --official-variant name -> what it changes in the official run
    rescorable = False  # True: official_checkpoints / official_into_ours (--rescore-with-ours)

    def official_changes(self, settings: Settings) -> list[Change]:
        """Changes that follow from the settings alone (epochs, sizes, seeds)."""
        raise NotImplementedError

    def prepare_official(self, copy_dir: Path, data: ComparisonData,
                         settings: Settings) -> list[Change]:
        """Write the official loader's files (in ``data.official_dir`` or the copy)."""
        raise NotImplementedError

    def official_commands(self, copy_dir: Path, data: ComparisonData, settings: Settings,
                          seed: int, run_dir: Path):
        """The official stages of one seed, in order, as :class:`Stage` (a pre-stage such as a
        task classifier first, the main training last). A generator: a stage is made when the
        previous one has finished (it may read its files)."""
        raise NotImplementedError

    def main_stage(self) -> str:
        """The stage whose epochs the progress lines count."""
        return 'train'

    def official_epochs_done(self, records: list, run_dir: Path) -> int:
        """Training epochs the main stage has finished, from its lines so far (progress)."""
        return sum(self.epoch_finished(line) for _, line in records)

    def read_official(self, records: dict, copy_dir: Path, run_dir: Path,
                      settings: Settings, seed: int, data: ComparisonData) -> SideRun:
        """A :class:`SideRun` from the recorded lines ``{stage: [(time, line)]}``."""
        raise NotImplementedError

    def epoch_finished(self, line: str) -> bool:
        """Whether an official output line marks the end of a training epoch (progress)."""
        return False

    def variant_stages(self, variant: str, copy_dir: Path, data: ComparisonData,
                       settings: Settings, seed: int, run_dir: Path):
        """The official stages of ``variant`` (:attr:`variants`), run after the seed's main
        official run in its ``run_dir`` (they may read its files)."""
        raise NotImplementedError

    def read_variant(self, variant: str, records: dict, run_dir: Path, settings: Settings,
                     seed: int, main: SideRun) -> SideRun:
        """The variant's :class:`SideRun` (side ``official (<variant>)``) from its records;
        ``main``: the seed's main official run."""
        raise NotImplementedError

    def official_checkpoints(self, copy_dir: Path, settings: Settings, seed: int) -> dict:
        """``{name: path in the copy}`` of the official run's final weights, kept after the
        run as ``<run dir>/checkpoints/<name>.pth.tar`` (none by default)."""
        return {}

    def official_into_ours(self, checkpoint: dict, kept: dict, source: str) -> dict:
        """Our trained checkpoint ``checkpoint`` (same settings and seed; read with
        ``engine.checkpoint.read_checkpoint``) with every learned tensor replaced by the
        official run's (``kept``: ``{name: path}`` of :meth:`official_checkpoints`), so that
        our evaluator scores the official training (``--rescore-with-ours``)."""
        raise NotImplementedError

    def our_run(self, data: ComparisonData, settings: Settings) -> dict:
        """Our side as a protocol run entry: ``dict(config=..., cfg_options=...)``."""
        raise NotImplementedError

    def our_losses(self, logged: dict) -> dict:
        """Common-name losses ``{name: value}`` of one logged training iteration of ours."""
        raise NotImplementedError

    def our_stages(self, work_dir: Path) -> dict:
        """Our pre-stages as :attr:`SideRun.stages` reads them (none by default)."""
        return {}

    # ------------------------------------------------------------------ shared checks
    def check_official_dir(self, path: Path) -> None:
        """Refuse a folder that is not a checkout of the official repository."""
        path = Path(path)
        if not path.is_dir():
            raise FileNotFoundError(f'--official-dir {path}: no such folder; expected a '
                                    f'checkout of https://github.com/{self.repository}')
        missing = [name for name in self.required if not (path / name).exists()]
        if missing:
            raise FileNotFoundError(f'--official-dir {path} lacks {missing}; expected a '
                                    f'checkout of https://github.com/{self.repository} '
                                    f'(git clone it and pass its folder)')

    def check_settings(self, settings: Settings) -> None:
        if settings.dataset not in self.datasets:
            raise ValueError(f'--dataset {settings.dataset}: the {self.label} comparison '
                             f'supports {list(self.datasets)}')
        if settings.frame_dim != 512 and not self.any_frame_dim:
            raise ValueError(f'--frame-dim {settings.frame_dim}: the {self.label} comparison '
                             'runs with 512-d frames only (its official dims are fixed here)')
        unknown = sorted(set(settings.sizes) - set(self.sizes))
        if unknown:
            raise ValueError(f'--size {unknown}: not a size of the {self.label} comparison; '
                             f'expected names of {sorted(self.sizes)}')
        for name, value in sorted(settings.sizes.items()):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f'--size {name}={value!r}: expected an integer >= 1 '
                                 f'(the official default: {self.sizes[name][0]})')
        check_shims(self.shims)

    def size(self, settings: Settings, name: str):
        """A size's value: the ``--size`` given, else the official default."""
        return settings.sizes.get(name, self.sizes[name][0])

    def size_changes(self, settings: Settings, source: str) -> list:
        """One 'size' change ``--name value (source: default)`` per ``--size`` given."""
        return [Change('size', f'--{name} {settings.sizes[name]} ({source}: '
                               f'{self.sizes[name][0]})') for name in sorted(settings.sizes)
                if name not in self.patched_sizes]

    def environment_changes(self, settings: Settings) -> list[Change]:
        changes = [Change('environment', f'torch.set_num_threads({settings.threads}) and '
                          f'OMP_NUM_THREADS={settings.threads}, as our side; run under the '
                          'launcher, which records each output line with its time')]
        return changes + [Change('environment', SHIMS[name]) for name in self.shims]


# ---------------------------------------------------------------------- the data
def prepare_data(settings: Settings, shared_root: Path, out: Path) -> ComparisonData:
    """Synthetic features (public layout) of every video of the dataset, once per settings
    (a manifest records what was written), and the splits of the unified protocol."""
    from vpn_plugin.datasets.synthetic import (SyntheticFeatureGenerator, dataset_videos,
                                               write_synthetic_features)
    taxonomy, videos = dataset_videos(settings.dataset, shared_root)
    feature_dir = out / 'features'
    manifest = out / 'features_manifest.json'
    wanted = dict(dataset=settings.dataset, difficulty=settings.difficulty,
                  seed=settings.feature_seed, videos=len(videos), layout='public',
                  **({} if settings.frame_dim == 512 else dict(frame_dim=settings.frame_dim)))
    if not manifest.is_file() or json.loads(manifest.read_text()) != wanted:
        shutil.rmtree(feature_dir, ignore_errors=True)
        generator = SyntheticFeatureGenerator(taxonomy, frame_dim=settings.frame_dim,
                                              difficulty=settings.difficulty,
                                              seed=settings.feature_seed)
        log(f'writing synthetic features of {len(videos)} videos -> {feature_dir}')
        write_synthetic_features(videos, generator, feature_dir, 'public', progress=False,
                                 dataset=settings.dataset)
        manifest.write_text(json.dumps(wanted))
    split_windows, split_videos = unified_splits(settings.dataset, shared_root, taxonomy,
                                                 settings.horizon)
    official_dir = out / 'official_data'
    official_dir.mkdir(parents=True, exist_ok=True)
    return ComparisonData(settings.dataset, settings.horizon, Path(shared_root).resolve(),
                          feature_dir.resolve(), official_dir.resolve(),
                          (out / 'cache').resolve(), taxonomy, split_videos, split_windows)


def unified_splits(dataset: str, shared_root: Path, taxonomy, horizon: int) -> tuple:
    """``({split: windows}, {split: videos})`` of the unified protocol at ``horizon``: the
    window files' windows and, per video, its steps in annotation order (NIV: chained from
    its windows)."""
    from vpn_plugin.datasets.annotations import chain_windows, read_window_file
    if dataset != 'niv':
        raise ValueError(f'dataset {dataset!r}: the comparison reads NIV so far')
    root = Path(shared_root) / dataset
    windows, videos = {}, {}
    for split in ('train', 'test'):
        found, bad = read_window_file(root / f'splits/{split}_T{horizon}.json', taxonomy,
                                      horizon)
        if bad:
            raise bad[0]
        windows[split], videos[split] = found, chain_windows(found)
    return windows, videos


# ---------------------------------------------------------------------- the official side
def copy_official(method: Method, official_dir: Path, copy_dir: Path) -> None:
    """A fresh copy of the checkout (without ``.git``) with the launcher written into it."""
    shutil.rmtree(copy_dir, ignore_errors=True)
    shutil.copytree(official_dir, copy_dir, ignore=shutil.ignore_patterns('.git'),
                    symlinks=True)
    write_launcher(copy_dir)


def run_official_seed(method: Method, copy_dir: Path, data: ComparisonData, settings: Settings,
                      seed: int, run_dir: Path, python: str, progress) -> SideRun:
    """Run the official stages of one seed (subprocesses, cwd = the copy) and read them."""
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    records = {}
    for stage in method.official_commands(copy_dir, data, settings, seed, run_dir):
        began = time.monotonic()
        records[stage.name] = _run_stage(method, copy_dir, settings, run_dir, stage, python,
                                         progress)
        if stage.name != method.main_stage():
            log(f'  official {stage.name}: {time.monotonic() - began:.0f} s')
    keep_official_checkpoints(method, copy_dir, settings, seed, run_dir)
    return method.read_official(records, copy_dir, run_dir, settings, seed, data)


def keep_official_checkpoints(method: Method, copy_dir: Path, settings: Settings, seed: int,
                              run_dir: Path) -> None:
    """Copy the official run's final weights into ``<run_dir>/checkpoints``."""
    for name, path in method.official_checkpoints(copy_dir, settings, seed).items():
        if not Path(path).is_file():
            raise FileNotFoundError(f'the official run of seed {seed} wrote no {path} (its '
                                    f'final {name} weights)')
        (run_dir / 'checkpoints').mkdir(exist_ok=True)
        shutil.copyfile(path, run_dir / 'checkpoints' / f'{name}.pth.tar')


def rescore_official_seed(method: Method, data: ComparisonData, settings: Settings,
                          official: SideRun, out: Path) -> SideRun:
    """The official run of ``official.seed`` scored by our evaluator: its kept weights
    (``<out>/official/seed<s>/checkpoints``) put into our trained checkpoint of the same seed
    (:meth:`Method.official_into_ours`), tested as our side is (the protocol runner's test,
    our sampler and metrics). Returns ``official`` with those metrics, side
    ``official (our evaluator)``."""
    from vpn_plugin.engine.checkpoint import read_checkpoint, save_atomically
    from vpn_plugin.engine.pre_stage import save_torch_file
    from vpn_plugin.protocol.runner import expand_units, finished_training
    seed, run_dir = official.seed, out / 'official' / f'seed{official.seed}'
    names = method.official_checkpoints(out / 'official_copy', settings, seed)
    kept = {name: run_dir / 'checkpoints' / f'{name}.pth.tar' for name in names}
    missing = [str(path) for path in kept.values() if not path.is_file()]
    if missing:
        raise FileNotFoundError(f'--rescore-with-ours: the official weights {missing} were not '
                                f'kept (runs made before they were); delete {run_dir}.json and '
                                'rerun the official side of that seed')
    runner = our_runner(method, data, settings, out / 'ours')
    unit, = expand_units(runner.cfg, seeds=[seed])
    work_dir = runner.work_dir(unit)
    ours = finished_training(work_dir)
    if ours is None:
        raise FileNotFoundError(f'{work_dir}: our training of seed {seed} is not finished')
    converted = method.official_into_ours(read_checkpoint(ours.checkpoint), kept, str(run_dir))
    folder = run_dir / 'ours_evaluator'
    folder.mkdir(exist_ok=True)
    weights = folder / 'official_weights.pth'
    save_atomically(lambda temporary: save_torch_file(converted, temporary), weights,
                    then=lambda: 'Free disk space, then run --rescore-with-ours again')
    spec, = unit.tests
    tested = runner.test(unit, spec, str(weights), folder)
    return dataclasses.replace(
        official, side='official (our evaluator)', selected=None, selected_epoch=None,
        metrics={name: tested.metrics[name] for name in method.metrics},
        selection='the last epoch\'s weights in our model, scored by our evaluator')


def run_official_variant(method: Method, variant: str, copy_dir: Path, data: ComparisonData,
                         settings: Settings, seed: int, run_dir: Path, python: str,
                         main: SideRun) -> SideRun:
    """Run a variant's official stages of one seed after its main run (in ``run_dir``)."""
    if not run_dir.is_dir():
        raise FileNotFoundError(f'{run_dir}: the official run of seed {seed} is needed by '
                                f'--official-variant {variant}; delete {run_dir}.json and rerun')
    records = {}
    for stage in method.variant_stages(variant, copy_dir, data, settings, seed, run_dir):
        began = time.monotonic()
        records[stage.name] = _run_stage(method, copy_dir, settings, run_dir, stage, python,
                                         None)
        log(f'  official {stage.name}: {time.monotonic() - began:.0f} s')
    return method.read_variant(variant, records, run_dir, settings, seed, main)


def _run_stage(method, copy_dir, settings, run_dir, stage: Stage, python, progress) -> list:
    from .launcher import LAUNCHER_NAME
    name = stage.name
    record_file, output = run_dir / f'{name}.records.jsonl', run_dir / f'{name}.log'
    env = dict(os.environ, VPN_OFFICIAL_RECORDS=str(record_file),
               VPN_OFFICIAL_THREADS=str(settings.threads),
               OMP_NUM_THREADS=str(settings.threads), MKL_NUM_THREADS=str(settings.threads),
               VPN_OFFICIAL_SHIMS=','.join(method.shims), PYTHONUNBUFFERED='1',
               **{k: str(v) for k, v in stage.env.items()})
    command = [python, LAUNCHER_NAME, *map(str, stage.argv)]
    (run_dir / f'{name}.command.txt').write_text(
        ''.join(f'{k}={v} ' for k, v in stage.env.items()) + ' '.join(command)
        + (f' <<< {stage.stdin!r}' if stage.stdin is not None else '') + '\n')
    counted = progress is not None and name == method.main_stage()
    with open(output, 'w') as out_file:
        process = subprocess.Popen(command, cwd=copy_dir, env=env, stdout=out_file,
                                   stderr=subprocess.STDOUT, text=True,
                                   stdin=subprocess.DEVNULL if stage.stdin is None
                                   else subprocess.PIPE)
        if stage.stdin is not None:
            process.stdin.write(stage.stdin)
            process.stdin.close()
        done = 0
        while True:
            try:
                process.wait(timeout=5)
                break
            except subprocess.TimeoutExpired:
                if counted:
                    done = _report_epochs(method, record_file, run_dir, done, progress)
        if counted:
            _report_epochs(method, record_file, run_dir, done, progress)
    if process.returncode:
        tail = ''.join(output.read_text(errors='replace').splitlines(True)[-15:])
        raise ChildProcessError(f'the official {name} ({" ".join(command)}, in {copy_dir}) exited '
                           f'with status {process.returncode}; its output is {output}; last '
                           f'lines:\n{tail}')
    return read_records(record_file)


def _report_epochs(method, record_file: Path, run_dir: Path, done: int, progress) -> int:
    lines = read_records(record_file) if record_file.is_file() else []
    now = method.official_epochs_done(lines, run_dir)
    if now > done:
        progress.epoch('official', now - done)
    return max(now, done)


def flag_list(flags: dict) -> list:
    """``{name: value}`` -> ``['--name', 'value', ...]`` (``True``: the bare flag)."""
    argv = []
    for name, value in flags.items():
        argv += [f'--{name}'] if value is True else [f'--{name}', str(value)]
    return argv


def read_event_scalars(folder: Path) -> dict:
    """``{tag: [(wall time, step, value)]}`` of the TensorBoard event files in ``folder``
    (what an official script logged with a SummaryWriter)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    events = EventAccumulator(str(folder), size_guidance={'scalars': 0})
    events.Reload()
    return {tag: [(e.wall_time, e.step, e.value) for e in events.Scalars(tag)]
            for tag in events.Tags()['scalars']}


def seconds_between(events: dict, tag: str, start: float) -> list:
    """Seconds of each logged step of ``tag``: from the latest event of any tag before it
    (the first: from ``start``) to it (a training epoch between its neighbours' logs)."""
    times = sorted(wall for rows in events.values() for wall, _, _ in rows)
    seconds = []
    for wall, _, _ in sorted(events[tag]):
        before = [t for t in times if t < wall]
        seconds.append(wall - max(before[-1] if before else start, start))
    return seconds


def read_records(path: Path) -> list:
    """``[(time, line)]`` of a launcher's records file (a last partial line is ignored)."""
    rows = []
    for text in Path(path).read_text(errors='replace').splitlines():
        try:
            moment, line = json.loads(text)
        except (ValueError, TypeError):
            continue
        rows.append((float(moment), str(line)))
    return rows


# ---------------------------------------------------------------------- our side
def our_protocol(method: Method, data: ComparisonData, settings: Settings):
    """The protocol config (mmengine ``Config``) that trains and tests our side."""
    from mmengine.config import Config
    run = method.our_run(data, settings)
    options = dict(run.get('cfg_options', {}), cache_dir=str(data.cache_dir))
    # every iteration's losses and time in vis_data/scalars.json (per-epoch curves, seconds)
    options.update({'default_hooks.logger.interval': 1, 'log_processor.window_size': 1})
    return Config(dict(protocol=f'official_{method.name}_{settings.dataset}',
                       dataset=settings.dataset, seeds=list(settings.seeds),
                       runs=[dict(method=f'{method.label} (ours)', config=run['config'],
                                  horizons=[settings.horizon], cfg_options=options)]))


def our_runner(method: Method, data: ComparisonData, settings: Settings, out: Path):
    """The protocol runner of our side (work dirs and results under ``out``)."""
    from vpn_plugin.protocol.runner import ProtocolRunner
    return ProtocolRunner(our_protocol(method, data, settings), out, max_epochs=settings.epochs,
                          data_paths=dict(data_root=str(data.data_root),
                                          feature_dir=str(data.feature_dir)))


def run_our_seed(method: Method, data: ComparisonData, settings: Settings, seed: int,
                 out: Path, windows: dict) -> SideRun:
    """Train and test our side for one seed through the protocol runner; read its logs."""
    from vpn_plugin.protocol.results import read_results
    from vpn_plugin.protocol.runner import expand_units
    runner = our_runner(method, data, settings, out)
    unit, = expand_units(runner.cfg, seeds=[seed])
    runner.run_unit(unit, runner.done_keys())
    rows = [r for r in read_results(runner.results_file) if r.seed == seed]
    losses, seconds = read_our_scalars(method, runner.work_dir(unit), settings.epochs)
    return SideRun('ours', seed, losses, seconds, {k: rows[-1].metrics[k] for k in
                                                   method.metrics}, windows,
                   stages=method.our_stages(runner.work_dir(unit)))


def our_window_counts(method: Method, data: ComparisonData, settings: Settings,
                      out: Path) -> dict:
    """``{'train': n, 'test': n}`` windows of our datasets (built as the training builds
    them; their observations are cached for it)."""
    import copy
    from mmaction.registry import DATASETS
    from vpn_plugin.protocol.runner import expand_units
    runner = our_runner(method, data, settings, out)
    unit = expand_units(runner.cfg, seeds=settings.seeds[:1])[0]
    cfg = runner.build_cfg(unit.config, unit.cfg_options, unit.seed, out / 'count',
                           unit.horizon)
    return {split: len(DATASETS.build(copy.deepcopy(cfg[f'{split}_dataloader'].dataset)))
            for split in ('train', 'test')}


def read_our_scalars(method: Method, work_dir: Path, epochs: int) -> tuple:
    """``({name: [per-epoch mean]}, [seconds per epoch])`` from the training's mmengine
    ``vis_data/scalars.json`` files (one entry per iteration: logger interval 1): losses
    averaged over the epoch's iterations (unweighted, as the official loops), seconds = the
    sum of the iterations' ``time``."""
    per_epoch: dict = {}
    for path in sorted(Path(work_dir).glob('*/vis_data/scalars.json')):
        for text in path.read_text().splitlines():
            entry = json.loads(text)
            if 'loss' not in entry or 'epoch' not in entry:
                continue  # validation or test entries
            per_epoch.setdefault(int(entry['epoch']), {})[int(entry['iter'])] = entry
    if sorted(per_epoch) != list(range(1, epochs + 1)):
        raise ValueError(f'{work_dir}: the training logs hold epochs {sorted(per_epoch)}; '
                         f'expected 1..{epochs} (delete the folder and rerun)')
    losses: dict = {}
    seconds = []
    for epoch in sorted(per_epoch):
        iterations = list(per_epoch[epoch].values())
        named = [method.our_losses(entry) for entry in iterations]
        for name in named[0]:
            losses.setdefault(name, []).append(sum(n[name] for n in named) / len(named))
        seconds.append(sum(float(entry['time']) for entry in iterations))
    return losses, seconds


# ---------------------------------------------------------------------- progress
class EpochProgress:
    """Progress lines with a true ETA: the epochs left of each side x that side's measured
    seconds per epoch (wall time of its finished epochs)."""

    def __init__(self, epochs_per_side: int, clock=time.monotonic):
        self.total = {side: epochs_per_side for side in SIDES}
        self.done = {side: 0 for side in SIDES}
        self.spent = {side: 0.0 for side in SIDES}
        self.clock, self.mark = clock, None

    def start(self, side: str) -> None:
        self.mark = (side, self.clock())

    def epoch(self, side: str, count: int = 1) -> None:
        now = self.clock()
        if self.mark and self.mark[0] == side:
            self.spent[side] += now - self.mark[1]
        self.mark = (side, now)
        self.done[side] += count
        log(f'  {side}: {self.done[side]}/{self.total[side]} epochs' + self.eta_text())

    def skip(self, side: str, epochs: int) -> None:
        """Epochs of a side that were finished by an earlier call (not timed)."""
        self.total[side] -= epochs

    def eta_text(self) -> str:
        left = 0.0
        for side in SIDES:
            if self.done[side] == 0:
                return ''
            left += self.spent[side] / self.done[side] * (self.total[side] - self.done[side])
        return f' (eta {left / 60:.0f} min)'


# ---------------------------------------------------------------------- one comparison
def compare(method: Method, official_dir, out, settings: Settings, *, python: str,
            shared_root, variants=(), rescore: bool = False) -> dict:
    """Run (or reuse) both sides for every seed; returns ``{'official': [SideRun],
    'ours': [SideRun], 'changes': [Change], 'variants': {name: [SideRun]}, 'rescored':
    [SideRun]}`` (module docstring); each of ``variants`` (:attr:`Method.variants`) reruns the
    official side of every seed with that change, kept as
    ``<out>/official/seed<s>.<variant>.json``; ``rescore``: the official weights of every seed
    scored by our evaluator (:func:`rescore_official_seed`), kept as
    ``<out>/official/seed<s>.rescored.json``."""
    from vpn_plugin.protocol.runner import claim_work_dir
    method.check_settings(settings)
    if rescore and not method.rescorable:
        raise ValueError(f'--rescore-with-ours: the {method.label} comparison cannot load the '
                         'official weights into our model yet (methods that can: kepp)')
    unknown = sorted(set(variants) - set(method.variants))
    if unknown:
        raise ValueError(f'--official-variant {unknown}: not a variant of the {method.label} '
                         f'comparison; expected one of {sorted(method.variants) or "none"}')
    method.check_official_dir(official_dir)
    out = Path(out).resolve()
    source = Path(official_dir).resolve()
    if out == source or source in out.parents:
        raise ValueError(f'--out {out} is inside --official-dir {source}: the checkout is never '
                         'modified, and its copy (<out>/official_copy) would copy itself '
                         'again and again; give an --out outside it')
    claim_work_dir(out, settings.identity())
    data = prepare_data(settings, Path(shared_root), out / 'data')
    copy_dir = out / 'official_copy'
    copy_official(method, Path(official_dir), copy_dir)
    changes = (method.official_changes(settings) + method.environment_changes(settings)
               + method.prepare_official(copy_dir, data, settings))
    windows = our_window_counts(method, data, settings, out / 'ours')
    runs = {side: [] for side in SIDES}
    progress = EpochProgress(settings.epochs * len(settings.seeds))
    for seed in settings.seeds:
        for side in SIDES:
            record = out / side / f'seed{seed}.json'
            if record.is_file():
                progress.skip(side, settings.epochs)
            else:
                log(f'{method.label} {side}, seed {seed}' + progress.eta_text())
                progress.start(side)
                if side == 'official':
                    run = run_official_seed(method, copy_dir, data, settings, seed,
                                            out / 'official' / f'seed{seed}', python, progress)
                    check_same_windows(run, windows)
                else:
                    run = run_our_seed(method, data, settings, seed, out / 'ours', windows)
                    progress.epoch('ours', settings.epochs)
                run.save(record)
            runs[side].append(SideRun.load(record))
        for variant in variants:
            record = out / 'official' / f'seed{seed}.{variant}.json'
            if not record.is_file():
                log(f'{method.label} official ({variant}), seed {seed}')
                run_official_variant(method, variant, copy_dir, data, settings, seed,
                                     out / 'official' / f'seed{seed}', python,
                                     runs['official'][-1]).save(record)
            runs.setdefault('variants', {}).setdefault(variant, []).append(
                SideRun.load(record))
        if rescore:
            record = out / 'official' / f'seed{seed}.rescored.json'
            if not record.is_file():
                log(f'{method.label} official, seed {seed}: scored by our evaluator')
                rescore_official_seed(method, data, settings, runs['official'][-1],
                                      out).save(record)
            runs.setdefault('rescored', []).append(SideRun.load(record))
    return dict(runs, changes=changes + [Change('variant', f'{v}: {method.variants[v]}')
                                         for v in variants])


def check_same_windows(official: SideRun, ours: dict) -> None:
    """Stop when the official run trained or tested on other numbers of windows than ours."""
    if official.windows != ours:
        raise ValueError(f'seed {official.seed}: the official run saw {official.windows} '
                         f'windows, ours {ours}; the two sides must read the same data (check '
                         'the files written for the official loader)')


def python_of(path: str | None) -> str:
    """The interpreter of the official runs (``--official-python``; default this one): an
    executable file, else ``FileNotFoundError`` before anything is written (the synthetic
    features of a comparison took ~45 s and 50 MB before a missing python was found)."""
    if path is None:
        return sys.executable
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        found = ('does not exist' if not os.path.exists(path) else 'is a folder'
                 if os.path.isdir(path) else 'is not executable')
        raise FileNotFoundError(f'--official-python {path}: {found}; expected the python '
                                'executable of a venv with the official dependencies (e.g. '
                                '/tmp/official_venv/bin/python)')
    return path
