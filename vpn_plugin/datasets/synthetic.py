"""Synthetic S3D-like features for the real annotations (a faithful proxy, not real video).

Model of a frame (one per second, ``frame_dim`` = 512) of video v of task k at second t::

    x_t = video_v + task_strength * task_k + segment(t) + noise_t

* inside an annotated step of action a (frames round(start)..round(end)), ``segment`` is
  ``action_strength * (sig_a + progress(t) * change_a / 2 + instance_{v,step})``: the
  action's unit signature, a state-change direction that moves from -1 at the step's start to
  +1 at its end, and a per-occurrence variation; overlapping steps average their segments;
* outside the steps ``segment = background_strength * background`` (task/background signal);
* ``video_v`` is a per-video offset, ``noise_t`` i.i.d. per frame and dimension.

A window's start/goal observation (3 frames around the first step's start / last step's end)
therefore carries the first/last action only partly (noise), and the middle actions not at
all, except where a short last step lets the goal frames reach the step before, as in real
features. ``difficulty`` in [0, 1] (default 0.5) sets the per-dimension spread
``s = (0.2 + 0.8 * difficulty) * 5 / sqrt(frame_dim)`` of the variation around the unit-norm
signatures (action_strength 1, task_strength 1.5): per-occurrence and per-video std ``s``,
per-frame noise std ``2 s``. On the full CrossTask (T=3, concat3) a ridge probe recovers
the first/last action from the start/goal observation about 96% of the time at difficulty
0, ~69% at 0.5 and ~38% at 1, and the middle action no better than the last action
predicts it (tests/test_synthetic.py). Every video is generated from its own seeded stream
(seed, feature file stem), so a subset is identical to the same videos of a full run.
"""
import hashlib
import json
import math
import pickle
import sys
import time
from pathlib import Path
from typing import Dict, List, Sequence

import numpy as np

from .annotations import (VideoAnnotation, chain_windows, crosstask_videos,
                          read_window_file, round_time)
from ..errors import OutputWriteError, replace_atomically
from .features import FEATURE_KEY
from .provenance import write_provenance
from .taxonomy import Taxonomy, load_taxonomy
from ..tool_choices import DATASET_CONFIGS, DEFAULT_DTYPES, DTYPES, FORMATS

CROSSTASK_TAXONOMY = 'taxonomy_133.json'


def difficulty_params(difficulty: float, frame_dim: int = 512) -> Dict[str, float]:
    """The generator's strengths for a difficulty in [0, 1] (module docstring)."""
    if not 0 <= difficulty <= 1:
        raise ValueError(f'difficulty={difficulty}; expected a value in [0, 1]')
    spread = (0.2 + 0.8 * difficulty) * 5 / math.sqrt(frame_dim)
    return dict(action_strength=1.0, instance_std=spread, video_std=spread,
                noise_std=2 * spread, task_strength=1.5, background_strength=1.0,
                tail_seconds=20)


def _unit_rows(rng, rows: int, dim: int) -> np.ndarray:
    vectors = rng.standard_normal((rows, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


class SyntheticFeatureGenerator:
    """Frames (L, D) for annotated videos; deterministic from ``seed``."""

    def __init__(self, taxonomy: Taxonomy, frame_dim: int = 512, difficulty: float = 0.5,
                 seed: int = 0):
        self.taxonomy, self.frame_dim, self.seed = taxonomy, frame_dim, seed
        self.params = difficulty_params(difficulty, frame_dim)
        rng = np.random.default_rng(seed)
        self.signatures = _unit_rows(rng, taxonomy.num_actions, frame_dim)
        self.changes = _unit_rows(rng, taxonomy.num_actions, frame_dim)
        self.task_signal = _unit_rows(rng, taxonomy.num_tasks, frame_dim)
        self.background = _unit_rows(rng, 1, frame_dim)[0]

    def _rng(self, stem: str) -> np.random.Generator:
        digest = hashlib.sha1(f'{self.seed}:{stem}'.encode()).digest()
        return np.random.default_rng(int.from_bytes(digest[:8], 'big'))

    def video_length(self, video: VideoAnnotation, rng) -> int:
        last = max((round_time(e) for _, e, _ in video.steps), default=0)
        return last + 1 + int(rng.integers(1, self.params['tail_seconds'] + 1))

    def video_frames(self, video: VideoAnnotation) -> np.ndarray:
        """All frames (L, D) float32 of one video."""
        p, dim = self.params, self.frame_dim
        rng = self._rng(video.feature)
        length = self.video_length(video, rng)
        base = (p['task_strength'] * self.task_signal[video.task]
                + p['video_std'] * rng.standard_normal(dim).astype(np.float32))
        frames = rng.standard_normal((length, dim), dtype=np.float32)
        frames *= p['noise_std']
        frames += base
        segment = np.zeros((length, dim), np.float32)
        cover = np.zeros(length, np.float32)
        for start, end, action in video.steps:
            self._add_step(segment, cover, rng, round_time(start), round_time(end), action)
        covered = cover > 0
        segment[covered] /= cover[covered, None]
        segment[~covered] = p['background_strength'] * self.background
        frames += segment
        return frames

    def _add_step(self, segment, cover, rng, start: int, end: int, action: int) -> None:
        p = self.params
        frames = np.arange(start, end + 1)
        progress = np.linspace(-1.0, 1.0, len(frames), dtype=np.float32)[:, None]
        instance = rng.standard_normal(self.frame_dim).astype(np.float32)
        instance *= p['instance_std']
        pattern = self.signatures[action] + instance + progress * self.changes[action] / 2
        segment[frames] += p['action_strength'] * pattern
        cover[frames] += 1


# float16 storage: |x16 - x32| <= FLOAT16_TOLERANCE * |x32| (round to nearest, 11-bit
# significand) for the generator's values (|x| < 65504; below 6.1e-5 the absolute error is
# at most 3e-8)
FLOAT16_TOLERANCE = 2.0 ** -11


def public_record(frames: np.ndarray, video: VideoAnnotation, dataset: str) -> dict:
    """The dict of a public feature file: CrossTask ``frames_features, steps_ids, cls, start,
    end``; NIV ``frames_features, num_steps, steps_ids, steps_starts, steps_ends``
    (steps_ids = global action ids, times in seconds); COIN ``frames_features`` (its
    annotations are in the per-video JSON)."""
    if dataset == 'coin':
        return {FEATURE_KEY: frames}
    steps = np.array([a for _, _, a in video.steps], np.int64)
    starts = np.array([s for s, _, _ in video.steps], np.float64)
    ends = np.array([e for _, e, _ in video.steps], np.float64)
    if dataset == 'niv':
        return {FEATURE_KEY: frames, 'num_steps': len(steps), 'steps_ids': steps,
                'steps_starts': starts, 'steps_ends': ends}
    return {FEATURE_KEY: frames, 'steps_ids': steps, 'cls': int(video.task), 'start': starts,
            'end': ends}


def save_video_features(path: Path, frames: np.ndarray, video: VideoAnnotation, fmt: str,
                        dataset: str = 'crosstask', dtype: str = 'float32') -> None:
    """Write one video in our safe ``npz`` layout or the ``public`` one: a raw pickle of the
    dict named ``.npy``, exactly what ``np.load(p, allow_pickle=True)["frames_features"]``
    of the public loaders reads. ``dtype='float16'`` stores the frames rounded to half
    precision (``FLOAT16_TOLERANCE``); the loader reads them back as float32."""
    if dtype not in DTYPES:
        raise ValueError(f'dtype {dtype!r}; expected one of {DTYPES}')
    if fmt not in FORMATS:
        raise ValueError(f'format {fmt!r}; expected one of {tuple(FORMATS)}')
    record = public_record(frames.astype(dtype, copy=False), video, dataset)

    def write(temporary):  # a file object: np.savez would add '.npz' to the partial name
        with open(temporary, 'wb') as f:
            if fmt == 'npz':
                np.savez(f, **{k: v for k, v in record.items() if k != 'cls'})
            else:
                pickle.dump(record, f, protocol=4)

    # a full disk leaves no truncated file among the complete ones
    replace_atomically(path, write, lambda path, cause: OutputWriteError(
        f'cannot write the synthetic features {path}: {cause}; nothing was written there '
        '(the files written before are complete; no synthetic_manifest.json yet). Free disk '
        'space or choose another --out, then run the same command with --overwrite'))


def dataset_videos(dataset: str, data_root) -> tuple:
    """(taxonomy, videos) of every annotated video of a dataset in ``data_root`` (../shared/data).

    CrossTask: all videos of both split lists with their CSV steps; NIV: the videos of its
    window files, steps collected from all windows.
    """
    root = Path(data_root) / dataset
    if dataset == 'crosstask':
        taxonomy = load_taxonomy(root / CROSSTASK_TAXONOMY)
        videos = []
        for split in ('train', 'test'):
            found, bad = crosstask_videos(root / f'splits/{split}_videos.json',
                                          root / 'crosstask_release/annotations', taxonomy,
                                          root / 'crosstask_release/tasks_primary.txt')
            if bad:
                raise bad[0]
            videos += found
        return taxonomy, videos
    if dataset == 'niv':
        taxonomy = load_taxonomy(root / 'taxonomy.json')
        return taxonomy, _videos_from_windows(root, taxonomy)
    if dataset == 'coin':
        return _videos_of_config(dataset, data_root)
    raise ValueError(f'dataset {dataset!r}: synthetic features need annotations; expected '
                     '"crosstask", "niv" or "coin"')


def _videos_of_config(dataset: str, data_root) -> tuple:
    """(taxonomy, videos) of both splits of a dataset whose config reads per-video
    annotations (COIN), through the dataset's own source loader."""
    from ..data_paths import REPO_ROOT, load_config
    config = REPO_ROOT / 'configs/_base_/datasets' / DATASET_CONFIGS[dataset]
    taxonomy, videos, _ = config_videos(load_config(config, data_root=data_root, horizon=1))
    return taxonomy, videos


def config_videos(cfg) -> tuple:
    """(taxonomy, videos, frame_dim) of the train and test datasets of a resolved config (e.g.
    a dataset of your own, configs/_base_/datasets/custom_json.py), read by the datasets' own
    source loader (``sources.source_windows``); each feature file stem once."""
    from .sources import source_windows
    videos, stems = [], set()
    for split in ('train', 'test'):
        dataset = cfg[f'{split}_dataloader']['dataset'].to_dict()
        taxonomy, windows, found = source_windows(dataset)
        found = chain_windows(windows) if found is None else found
        videos += [v for v in found if v.feature not in stems]
        stems.update(v.feature for v in found)
    return taxonomy, videos, int(cfg.train_dataloader.dataset.get('frame_dim', 512))


def _videos_from_windows(root: Path, taxonomy: Taxonomy) -> List[VideoAnnotation]:
    """Every video of the T=3 window files with its steps chained from its windows."""
    windows = []
    for split in ('train', 'test'):
        found, bad = read_window_file(root / f'splits/{split}_T3.json', taxonomy, 3)
        if bad:
            raise bad[0]
        windows += found
    return chain_windows(windows)


def write_synthetic_features(videos: Sequence[VideoAnnotation], generator, out_dir,
                             fmt: str = 'npz', progress: bool = True,
                             dataset: str = 'crosstask', dtype: str = 'float32') -> dict:
    """Write ``<out_dir>/<stem>.npz`` (fmt 'npz') or ``.npy`` ('public') for every video,
    frames stored as ``dtype``; returns counts, bytes and seconds."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    began, total_bytes, seconds = time.time(), 0, 0
    for i, video in enumerate(videos):
        frames = generator.video_frames(video)
        path = out_dir / f'{video.feature}{FORMATS[fmt]}'
        save_video_features(path, frames, video, fmt, dataset, dtype)
        total_bytes += path.stat().st_size
        seconds += len(frames)
        if progress and (i + 1) % 50 == 0 or progress and i + 1 == len(videos):
            rate = (i + 1) / max(time.time() - began, 1e-9)
            eta = (len(videos) - i - 1) / rate
            print(f'\r  {i + 1}/{len(videos)} videos, {total_bytes / 2**20:.0f} MiB, '
                  f'ETA {eta:.0f} s', end='', file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)
    return dict(videos=len(videos), frames=seconds, bytes=total_bytes,
                seconds=round(time.time() - began, 1))


def write_manifest(out: Path, info: dict) -> None:
    """Record the generator's settings next to the features (``out``: the folder above them;
    tools/make_synthetic_features.py recognises its earlier output by it, vpn_plugin/outputs.py)."""
    (Path(out) / 'synthetic_manifest.json').write_text(json.dumps(info, indent=2))


def synthetic_record(settings: dict, info: dict) -> dict:
    """The provenance record (``datasets/provenance.py``, kind ``synthetic``) of a folder made
    by ``tools/make_synthetic_features.py`` with ``settings`` (its arguments); ``info``: the
    counts :func:`write_synthetic_features` returns."""
    chosen = ('dataset', 'config', 'seed', 'difficulty', 'frame_dim', 'format', 'dtype')
    return dict({k: settings.get(k) for k in chosen if settings.get(k) is not None},
                kind='synthetic', generator='make_synthetic_features.py', **info,
                params=difficulty_params(settings['difficulty'], settings['frame_dim']))


def make_tiny_crosstask(shared_data, out_dir, num_tasks: int = 3, train_per_task: int = 20,
                        test_per_task: int = 8, seed: int = 0, difficulty: float = 0.5) -> dict:
    """Synthetic features + video lists for a small subset of the real CrossTask videos.

    The first ``num_tasks`` tasks of the 133-action taxonomy, the first ``train_per_task`` /
    ``test_per_task`` videos of each in the official split lists. Writes ``<out_dir>/features``
    (``.npz``) and ``<out_dir>/{train,test}_videos.json``; returns the paths and ready
    PlanningDataset configs (see tests/conftest.py ``tiny_crosstask``).
    """
    root, out_dir = Path(shared_data).resolve() / 'crosstask', Path(out_dir).resolve()
    taxonomy = load_taxonomy(root / CROSSTASK_TAXONOMY)
    keys = set(taxonomy.task_keys[:num_tasks])
    lists = {}
    for split, per_task in (('train', train_per_task), ('test', test_per_task)):
        entries = json.loads((root / f'splits/{split}_videos.json').read_text())
        counts, chosen = {}, []
        for entry in entries:
            if entry['task'] in keys and counts.get(entry['task'], 0) < per_task:
                counts[entry['task']] = counts.get(entry['task'], 0) + 1
                chosen.append(entry)
        lists[split] = out_dir / f'{split}_videos.json'
        out_dir.mkdir(parents=True, exist_ok=True)
        lists[split].write_text(json.dumps(chosen))
    videos = []
    for split in ('train', 'test'):
        videos += crosstask_videos(lists[split], root / 'crosstask_release/annotations',
                                   taxonomy)[0]
    generator = SyntheticFeatureGenerator(taxonomy, difficulty=difficulty, seed=seed)
    info = write_synthetic_features(videos, generator, out_dir / 'features', 'npz',
                                    progress=False)
    write_provenance(out_dir / 'features', synthetic_record(
        dict(dataset='crosstask (tiny subset)', seed=seed, difficulty=difficulty,
             frame_dim=512, format='npz', dtype='float32'), info))
    return _tiny_config(root, out_dir, lists, num_tasks)


def _tiny_config(root: Path, out_dir: Path, lists: dict, num_tasks: int) -> dict:
    common = dict(type='PlanningDataset', data_root=str(root), horizon=3,
                  taxonomy=str(root / CROSSTASK_TAXONOMY), feature_dir=str(out_dir / 'features'),
                  annotation_dir=str(root / 'crosstask_release/annotations'),
                  observation='concat3', cache_dir=str(out_dir / 'cache'))
    return dict(
        data_root=str(root), feature_dir=common['feature_dir'], cache_dir=common['cache_dir'],
        taxonomy=common['taxonomy'], annotation_dir=common['annotation_dir'],
        train_video_list=str(lists['train']), test_video_list=str(lists['test']),
        num_tasks=num_tasks, num_actions=133, frame_dim=512,
        train_dataset=dict(common, split='train', video_list=str(lists['train'])),
        val_dataset=dict(common, split='val', video_list=str(lists['train'])),
        test_dataset=dict(common, split='test', video_list=str(lists['test'])))
