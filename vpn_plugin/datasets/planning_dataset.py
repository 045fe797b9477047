"""PlanningDataset: planning windows with start/goal observations (docs/design.md, Data)."""
import functools
import hashlib
import json
import logging
import os
from collections import Counter
from pathlib import Path
from typing import List, Literal, Optional, Union

from vpn_plugin.config_types import (Count, NonNegativeInt, Probability, Fraction, Text,
                                     checked_arguments)
import numpy as np
import torch
from mmaction.registry import DATASETS
from mmengine.dataset import default_collate
from mmengine.logging import print_log
from mmengine.registry import FUNCTIONS
from torch.utils.data import Dataset

from .annotations import BadVideoError, Window, chain_windows, read_video_list, window_key
from .features import check_disjoint_files, feature_fix_hint, find_feature_file, load_features
from ..core.stats import SAMPLE_DRAW, stratified_sample
from .file_digests import file_digests
from ..errors import check_folder_target
from ..secret_keys import read_or_make_secret
from .observations import (RECIPES, WINDOW_POLICIES, observation_dim,
                           outside_video, step_map, window_observations)
from .sources import ANNOTATION_FORMATS, SOURCE_KEYS, read_source, source_path, source_windows
from .taxonomy import load_taxonomy
from ..data_paths import check_resolved
from .validation import AnnotationWarnings, check_disjoint, check_disjoint_ids

SPLITS = ('train', 'val', 'test')
CACHE_VERSION = 7  # bump when the cached arrays or their meaning change (6: built by a reader
# that checks the time step an npz records: caches of 5 served features of 2 s per row; 7: the
# files' damage notes, 'damaged')
DIGEST_MEMO = 'feature_digests.json'  # in cache_dir: the feature files' remembered digests
FRAMES_MEMO = 'frames_digests_v2.json'  # in cache_dir: their frames arrays' remembered digests
#   (v2: features.frames_digest as read, float32, with the stored dtype)
CACHE_KEY = '.cache_key'  # in cache_dir: the secret of the cache's keyed checksums
_PROCESS_SECRET = os.urandom(32)  # the key of a cache_dir that cannot be written
CACHE_ARRAYS = {'readable', 'outside', 'maps', 'start', 'goal', 'observed', 'messages',
                'damaged'}
DAMAGED_LISTED = 3  # damaged feature files the warning line names (the rest counted)


def payload_digest(arrays: dict, key: str, secret: bytes) -> str:
    """HMAC-SHA-256 with the cache's secret key of the cached arrays (names, dtypes, shapes,
    bytes) and their key: a cache file edited with the same shapes (start and goal rows
    swapped) no longer matches it, even with this digest recomputed by whoever lacks the key."""
    import hmac
    digest = hmac.new(secret, key.encode(), hashlib.sha256)
    for name in sorted(CACHE_ARRAYS):
        array = np.ascontiguousarray(arrays[name])
        digest.update(f'{name}:{array.dtype.str}:{array.shape}'.encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


@FUNCTIONS.register_module()
def planning_collate(batch):
    """The loaders' ``collate_fn``: a batch ``PlanningDataset.__getitems__`` gathered
    (``device_resident``: one dict) as it is; a list of items stacked by ``default_collate``."""
    return batch if isinstance(batch, dict) else default_collate(batch)


@DATASETS.register_module()
class PlanningDataset(Dataset):
    """Windows of ``horizon`` steps with observations, from ONE annotation source.

    Sources (``sources.py``; paths relative to ``data_root`` unless absolute; ``{horizon}`` is
    formatted): ``window_file`` (unified-protocol windows), or ``video_list`` +
    ``annotation_dir`` (CrossTask CSVs; ``tasks_primary`` optional check), or
    ``annotation_file`` in ``annotation_format`` 'json' (our per-video JSON) or 'coin' (COIN's
    per-video JSON), with ``other_split`` (the other split's file: a video in both is bad);
    ``annotation_taxonomy``: annotations written in another taxonomy, relabelled by action
    name (CrossTask 133 -> 105). ``feature_dir`` and ``cache_dir`` are relative to the working
    directory.
    Feature files in any public layout load as they are (``features.py``, no code runs).

    Observations: ``observation`` recipe and ``window_policy`` (``observations.py``): the
    default ``'authors'`` recipe is the authors' frames; ``window_policy='keep'`` scores every
    window with its annotated labels, ``'authors'`` relabels / drops windows with a step at or
    past the video's end as the authors' loader does. ``self.window_counts`` counts the
    windows ``'clamped'`` / ``'relabelled'`` / ``'dropped'``; they are logged. ``self.plans``
    are the labels the policy scores; ``self.windows[i].steps`` the annotated ones.

    Splits: ``'test'`` = every window of the source; ``'val'`` = windows of the held-out videos
    of the source (use it with the TRAINING source): each video is held out with probability
    ``val_fraction`` by a hash of ``split_seed`` and its feature file stem, so the same videos
    for every horizon; ``'train'`` = the other videos, optionally a seeded
    ``subset_fraction`` of their windows (``subset_seed``; drawn as ``limit`` draws, stratified
    over tasks by the windows' identity: the sample-efficiency study's subsets, whatever the
    lists' order; rows and training records say ``subset_draw``). ``limit=N`` keeps N
    windows of the split (after the features are read), stratified over tasks and drawn by
    the windows' identity (``core.stats.stratified_sample`` with ``limit_seed``,
    :data:`~..core.stats.SAMPLE_DRAW`:
    the windows ``llm_eval.py --limit N`` plans, whatever the lists' order): a shortened run
    (``tools/test.py --limit``, smoke runs), logged; ``self.limited`` is ``(N, all)``.
    ``observed_steps=k`` adds the goal observations of steps 1..k (``inputs['observed']``).
    Bad videos raise a ValueError naming file and field, or with ``skip_bad_videos=True`` are
    skipped, counted by reason in ``self.skipped`` and logged.

    Batches: with ``device_resident=True`` (the configs' default) the observations, plans,
    tasks and indices live as one tensor per field on the model's device (mmengine's
    ``get_device()``; the CPU inside a loader worker) and ``__getitems__`` returns a whole
    batch as one index gather, which ``planning_collate`` passes on as it is; otherwise
    ``__getitems__`` returns the items (torch's default). Same batches, same values.
    """

    @checked_arguments(prefix='PlanningDataset: ')
    def __init__(self, data_root: Union[Text, os.PathLike], horizon: Count,
                 taxonomy: Union[Text, os.PathLike], feature_dir: Union[Text, os.PathLike],
                 split: Literal[SPLITS] = 'train', window_file: Optional[Text] = None,
                 video_list: Optional[Text] = None, annotation_dir: Optional[Text] = None,
                 tasks_primary: Optional[Text] = None, annotation_file: Optional[Text] = None,
                 annotation_format: Literal[tuple(ANNOTATION_FORMATS)] = 'json',
                 other_split: Optional[Text] = None, annotation_taxonomy: Optional[Text] = None,
                 frame_dim: Count = 512, observation: Literal[RECIPES] = 'authors',
                 window_policy: Literal[WINDOW_POLICIES] = 'keep', val_fraction: Probability = 0.1,
                 split_seed: NonNegativeInt = 0, subset_fraction: Optional[Fraction] = None,
                 subset_seed: NonNegativeInt = 0, observed_steps: NonNegativeInt = 0,
                 skip_bad_videos: bool = False,
                 cache_dir: Optional[Union[Text, os.PathLike]] = None,
                 device_resident: bool = False, limit: Optional[Count] = None,
                 limit_seed: NonNegativeInt = 0):
        # each option's kind is its annotation's (checked_arguments); here what one option
        # says of another, and the files
        if not observed_steps < horizon:
            raise ValueError(f'observed_steps={observed_steps}; expected 0 <= k < '
                             f'horizon={horizon}')
        check_resolved(data_root=data_root, feature_dir=feature_dir, cache_dir=cache_dir)
        for name, value in (('data_root', data_root), ('feature_dir', feature_dir)):
            if not isinstance(value, (str, os.PathLike)) or not str(value):  # None: a TypeError
                raise ValueError(f'{where}{name}={value!r}; expected a folder path')
        if cache_dir and os.path.lexists(cache_dir):  # a file: makedirs' bare "File exists"
            check_folder_target(cache_dir, 'cache_dir', 'the observation cache',
                                '--cfg-options cache_dir=DIR', writable=False)
        self.data_root, self.horizon, self.split = Path(data_root), int(horizon), split
        self.taxonomy = load_taxonomy(self._path(taxonomy))
        self.feature_dir, self.frame_dim, self.recipe = Path(feature_dir), frame_dim, observation
        self.window_policy, self.observed_steps = window_policy, observed_steps
        self.window_counts: Counter = Counter()  # 'clamped' / 'relabelled' / 'dropped' windows
        self.other_labels = 0  # relabelled windows whose labels then differ (_count_windows)
        self.skip_bad_videos, self.cache_dir = skip_bad_videos, cache_dir
        self.device_resident, self._fields = device_resident, None  # (device, {field: tensor})
        self.feature_dim = observation_dim(observation, frame_dim)
        self.skipped: Counter = Counter()  # reason -> number of videos skipped
        self._skip_messages: List[str] = []
        self.warnings = AnnotationWarnings()  # suspicious annotations, counted and logged
        windows, videos = self._load_source(dict(
            window_file=window_file, video_list=video_list, annotation_dir=annotation_dir,
            tasks_primary=tasks_primary, annotation_file=annotation_file,
            annotation_format=annotation_format, other_split=other_split,
            annotation_taxonomy=annotation_taxonomy))
        held_out = dict(val_fraction=val_fraction, split_seed=split_seed)
        if split == 'test' and any(held_out[k] != HELD_OUT_KEYS[k] for k in HELD_OUT_KEYS):
            given = ', '.join(f'{k}={v!r}' for k, v in held_out.items() if v != HELD_OUT_KEYS[k])
            raise ValueError(f'PlanningDataset (test): {given}; these draw the validation videos '
                             'out of the training split and would be ignored here (the test '
                             'split is always read whole): set them on train_dataloader.dataset '
                             'and val_dataloader.dataset')
        windows, self._videos = self._select_split(windows, videos, val_fraction, split_seed)
        windows = self._subset(windows, subset_fraction, subset_seed)
        if subset_fraction is not None and split == 'train':
            self._videos = None  # only the kept windows may feed the PKG
        self._extract(windows)
        self.limited = self._limit(limit, limit_seed)
        self._log_size()
        self._log_skips()
        self._log_window_counts()
        self._log_warnings()
        self._log_damage()
        if not self.windows:
            raise ValueError(f'PlanningDataset: split {split!r} (horizon {horizon}) has no windows '
                             f'from {window_file or video_list or annotation_file} (val_fraction='
                             f'{val_fraction}, skipped: {dict(self.skipped) or "none"})')

    # ------------------------------------------------------------------ sources
    def _path(self, path) -> Path:
        return source_path(self.data_root, path, getattr(self, 'horizon', ''))

    def _load_source(self, sources: dict):
        """(windows, per-video steps or None) of the source (``sources.read_source``)."""
        windows, videos, bad = read_source(self.data_root, self.taxonomy, self.horizon,
                                           warnings=self.warnings, **sources)
        bad_vids = self._record_bad(bad)
        if videos is not None:
            return windows, videos
        windows = [w for w in windows if w.vid not in bad_vids]
        return windows, self._chained(windows)

    def _chained(self, windows):
        """Per-video steps of a window file for pkg_sequences('video'), None if not chainable."""
        try:
            return chain_windows(windows)
        except ValueError as err:
            print_log(f'PlanningDataset: pkg_sequences("video") falls back to windows: {err}',
                      'current')
            return None

    def _record_bad(self, errors: List[BadVideoError]) -> set:
        """Count bad videos once per (reason, video); returns their vids."""
        if errors and not self.skip_bad_videos:
            raise errors[0]
        seen = set()
        for err in errors:
            if (err.reason, err.vid) not in seen:
                seen.add((err.reason, err.vid))
                self.skipped[err.reason] += 1
                self._skip_messages.append(str(err))
        return {vid for _, vid in seen}

    # ------------------------------------------------------------------ splits
    @staticmethod
    def held_out(stem: str, val_fraction: float, seed: int) -> bool:
        """Seeded, order-independent choice of validation videos (same for every horizon)."""
        digest = hashlib.sha1(f'{seed}:{stem}'.encode()).digest()
        return int.from_bytes(digest[:8], 'big') / 2 ** 64 < val_fraction

    def _select_split(self, windows, videos, val_fraction, seed):
        if self.split == 'test':
            return windows, videos
        want_val = self.split == 'val'
        keep = [w for w in windows if self.held_out(w.feature, val_fraction, seed) == want_val]
        if videos is not None:
            videos = [v for v in videos if self.held_out(v.feature, val_fraction, seed) == want_val]
        return keep, videos

    def _subset(self, windows, fraction, seed):
        if fraction is None:
            return windows
        if self.split != 'train' and fraction == 1 and not isinstance(fraction, bool):
            return windows  # the whole split, which is read anyway (a config's common dataset)
        if self.split != 'train':  # would be ignored: the whole split is read
            raise ValueError(f'PlanningDataset ({self.split}): subset_fraction={fraction!r}; '
                             'a subset is drawn of the training split only (the '
                             f'{self.split} split is always read whole): set '
                             'train_dataloader.dataset.subset_fraction')
        if not 0 < fraction <= 1:
            raise ValueError(f'subset_fraction={fraction}; expected 0 < fraction <= 1')
        count = max(1, int(round(fraction * len(windows))))
        # drawn as limit= draws (SAMPLE_DRAW): stratified over tasks, by the windows' identity
        pick = stratified_sample(np.array([w.task for w in windows], np.int64), count, seed,
                                 keys=np.array([window_key(w) for w in windows], np.int64))
        self.subset = (fraction, len(pick), len(windows), seed)  # the log line says so
        return [windows[i] for i in pick]

    def _limit(self, limit, seed):
        """Keep ``limit`` windows stratified over tasks (class docstring); (kept, all) or
        None when every window is kept."""
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:  # also unused
            raise ValueError(f'PlanningDataset: limit_seed={seed!r}; expected an integer >= 0 '
                             '(the seed of the stratified draw of the limit windows)')
        if limit is None:
            return None
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f'PlanningDataset: limit={limit!r}; expected an integer >= 1 '
                             '(windows kept, stratified over tasks)')
        total = len(self.windows)
        if limit >= total:  # said: --limit 106 over 105 test windows scored all, unsaid
            print_log(f'PlanningDataset ({self.split}, T={self.horizon}): limit={limit} and the '
                      f'split has {total} windows: all are kept (not shortened by the limit)',
                      'current')
            return None
        picked = stratified_sample(self.tasks, limit, seed, keys=self.window_keys())
        self.windows = [self.windows[i] for i in picked]
        self._pkg_windows = list(self.windows)  # a limited training split: its own PKG
        self._videos = None
        for name in ('start', 'goal', 'observed', 'plans', 'tasks'):
            setattr(self, name, getattr(self, name)[picked])
        return (len(picked), total)

    # ------------------------------------------------------------------ features
    def _extract(self, windows: List[Window]) -> None:
        """Observations of every window, from the cache file when the inputs are unchanged."""
        path, key = self._cache_file(windows)
        arrays = self._read_cache(path, key, len(windows))
        if arrays is None:
            arrays = self._extract_from_files(windows)
            self._write_cache(path, key, arrays)
        for message in arrays['messages']:
            reason, text = str(message).split('\t', 1)
            self.skipped[reason] += 1
            self._skip_messages.append(text)
        # video stem -> (file name, note) of each file read that records a damaged video
        self._damage = {stem: (name, note) for stem, name, note in
                        (str(line).split('\t', 2) for line in arrays['damaged'])}
        readable = arrays['readable']
        bad_features = {w.feature for w, k in zip(windows, readable) if not k}
        if self._videos is not None and bad_features:
            self._videos = [v for v in self._videos if v.feature not in bad_features]
        self._pkg_windows = [w for w, k in zip(windows, readable) if k]
        maps, outside = arrays['maps'][readable], arrays['outside'][readable]
        self._count_windows(maps, outside, self._pkg_windows)
        kept = maps[:, 0] >= 0
        self.windows = [w for w, k in zip(self._pkg_windows, kept) if k]
        self.start, self.goal, self.observed = arrays['start'], arrays['goal'], arrays['observed']
        self.plans = np.array([[w.steps[j] for j in m] for w, m in zip(self.windows, maps[kept])],
                              np.int64).reshape(-1, self.horizon)
        self.tasks = np.array([w.task for w in self.windows], np.int64)

    def _extract_from_files(self, windows) -> dict:
        """Per window (M): ``readable`` (its feature file), ``maps`` (M, T) step maps (-1: dropped
        by the window policy), ``outside`` (a step at/past the video's end); per kept window:
        ``start``, ``goal`` (M', D'), ``observed`` (M', k, D'); ``messages`` of skipped videos."""
        by_video = {}
        for i, w in enumerate(windows):
            by_video.setdefault(w.feature, []).append(i)
        dim, count = self.feature_dim, len(windows)
        try:
            arrays = dict(readable=np.ones(count, bool), outside=np.zeros(count, bool),
                          maps=np.full((count, self.horizon), -1, np.int64),
                          start=np.zeros((count, dim), np.float32),
                          goal=np.zeros((count, dim), np.float32),
                          observed=np.zeros((count, self.observed_steps, dim), np.float32))
        except MemoryError:
            size = count * dim * 4 * (2 + self.observed_steps) / 2 ** 30
            raise ValueError(f'PlanningDataset: frame_dim={self.frame_dim} (observation '
                             f'{self.recipe!r}: {dim}-d) for {count} windows needs {size:.3g} '
                             'GiB of observations, more than this machine can allocate; '
                             'expected frame_dim = the width of the feature files (e.g. 512 '
                             'for S3D)') from None
        messages, damaged = [], []
        self._check_feature_dir()
        for n, (stem, idx) in enumerate(by_video.items()):
            self._progress(n, len(by_video))
            damage = {}
            try:
                self._extract_video(stem, [windows[i] for i in idx], idx, arrays, damage)
            except BadVideoError as err:
                if not self.skip_bad_videos:
                    raise
                arrays['readable'][idx] = False
                messages.append(f'{err.reason}\t{err}')
                continue
            damaged += [f'{stem}\t{name}\t{" ".join(note.split())}'
                        for name, note in damage.items()]
        kept = arrays['readable'] & (arrays['maps'][:, 0] >= 0)
        for key in ('start', 'goal', 'observed'):
            arrays[key] = arrays[key][kept]
        arrays['messages'] = np.array(messages, dtype=str)
        arrays['damaged'] = np.array(damaged, dtype=str)
        return arrays

    def _check_feature_dir(self) -> None:
        if self.feature_dir.exists() and not self.feature_dir.is_dir():
            raise NotADirectoryError(f'PlanningDataset: feature_dir {self.feature_dir} is a file, '
                                     'not a folder; expected the folder of per-video feature '
                                     'files')
        if not self.feature_dir.is_dir():
            raise FileNotFoundError(f'PlanningDataset: feature_dir {self.feature_dir} does not '
                                    f'exist. {feature_fix_hint(self.feature_dir, self.data_root)}')

    def _extract_video(self, stem, video_windows, idx, arrays, damage: dict) -> None:
        path = find_feature_file(self.feature_dir, stem)
        frames = load_features(path, self.frame_dim, video_windows[0].vid,
                               feature_fix_hint(self.feature_dir, self.data_root), damage)
        length = len(frames)
        for i, w in zip(idx, video_windows):
            if self.window_policy == 'keep':
                self._check_starts(path, w, length)
            arrays['outside'][i] = any(outside_video(s, e, length) for s, e in w.times)
            steps = step_map(w.times, length, self.window_policy)
            if steps is None:
                continue
            arrays['maps'][i] = steps
            observations = window_observations(frames, w.times, self.recipe,
                                               self.observed_steps, steps)
            arrays['start'][i], arrays['goal'][i], arrays['observed'][i] = observations

    @staticmethod
    def _check_starts(path, window: Window, length: int) -> None:
        """Policy 'keep' reads an end past the video at its last frame, but a step that starts
        past the video has no frame at all: a wrong feature file or annotation."""
        for start, end in window.times:
            if start > length - 1:
                raise BadVideoError(window.vid, 'step time outside the video',
                                    f'{path}: step times start={start}, end={end} s: the start '
                                    f'is past the video of {length} frames (field '
                                    f'"frames_features")')

    def _count_windows(self, maps, outside, windows) -> None:
        """Count the 'clamped' ('keep') or 'relabelled' / 'dropped' ('authors') windows, and
        ``other_labels``: the relabelled windows whose actions then differ from the annotated
        ones (a step copied from a previous step of the same action keeps its labels)."""
        identity = np.arange(self.horizon)
        dropped = maps[:, 0] < 0
        relabelled = ~dropped & (maps != identity).any(1)
        self.window_counts['dropped'] = int(dropped.sum())
        self.window_counts['relabelled'] = int(relabelled.sum())
        self.other_labels = sum(
            [window.steps[j] for j in step_map] != list(window.steps)
            for window, step_map, changed in zip(windows, maps, relabelled) if changed)
        self.window_counts['clamped'] = int(outside.sum()) if self.window_policy == 'keep' else 0
        self.window_counts = Counter({k: n for k, n in self.window_counts.items() if n})

    @staticmethod
    def _progress(done, total):
        if total >= 500 and done % 500 == 0:
            print_log(f'PlanningDataset: reading features, video {done}/{total}', 'current')

    def _cache_file(self, windows) -> tuple:
        """(cache file, key) of these windows' observations, or (None, None) without a
        ``cache_dir``. The key holds the CONTENT digests of the feature files
        (``file_digests``: remembered while a file's stat record, ctime included, is unchanged),
        the recipe and the windows: a feature file rewritten with its size and mtime kept
        misses the cache."""
        if not self.cache_dir:
            return None, None
        paths = self.feature_files_read(windows)
        digests = self.feature_digests(paths)
        key = json.dumps([CACHE_VERSION, self.recipe, self.window_policy, self.frame_dim,
                          self.observed_steps, self.skip_bad_videos,
                          [[str(p), d] for p, d in zip(paths, digests)],
                          [(w.feature, w.times) for w in windows]])
        name = f'obs_{hashlib.sha256(key.encode()).hexdigest()[:20]}.npz'
        return Path(self.cache_dir) / name, key

    def feature_files_read(self, windows=None) -> list:
        """The feature files ``windows`` (default: the dataset's) read, one per video, sorted
        by video (what a test compares with its checkpoint's training files,
        ``engine.checkpoint.features_folder_note``)."""
        stems = sorted({w.feature for w in (self.windows if windows is None else windows)})
        return [find_feature_file(self.feature_dir, stem) for stem in stems]

    def feature_digests(self, paths, frames: bool = False) -> list:
        """``file_digests`` of ``paths`` (with ``frames``, the digests of their frames arrays,
        ``features.frames_digest``), remembered in the observation cache's memo (keyed with
        its secret) where there is a ``cache_dir``: a folder already hashed costs nothing."""
        from .features import frames_digest
        digest_of = dict(digest_of=frames_digest) if frames else {}
        if not self.cache_dir:
            return file_digests(paths, **digest_of)
        return file_digests(paths, Path(self.cache_dir) / (FRAMES_MEMO if frames else DIGEST_MEMO),
                            self._cache_secret, **digest_of)

    @functools.cached_property
    def _cache_secret(self) -> bytes:
        """The secret key of ``cache_dir`` (made on first use, 0600): the cache's checksums
        are keyed with it (``vpn_plugin.secret_keys``). A folder that cannot be
        written gets a key of this process only: writing the cache then fails, named
        (:meth:`_write_cache`)."""
        try:
            return read_or_make_secret(Path(self.cache_dir) / CACHE_KEY, 'the observation '
                                       'cache key', 'observation cache files', 'the '
                                       'observations are then read again from the feature files')
        except OSError as error:  # also a read-only file system or a full disk (EROFS, ENOSPC)
            if isinstance(error, PermissionError) and Path(self.cache_dir, CACHE_KEY).exists():
                raise  # a key of another user or readable by others: named
            return _PROCESS_SECRET

    def _read_cache(self, path: Optional[Path], key: str, count: int) -> Optional[dict]:
        """The cached arrays, or ``None``: absent, or corrupt, edited or another key's (then
        named in a warning, deleted and rebuilt: a damaged file never stops a run, an edited
        one is never used)."""
        if path is None or not path.exists():
            return None
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {name: data[name] for name in data.files}
            self._check_cache(arrays, count, key)
            return {name: arrays[name] for name in CACHE_ARRAYS}
        except Exception as err:  # zip, npy format, OS errors, missing, ragged or edited arrays
            print_log(f'PlanningDataset: the observation cache {path} is corrupt ({err}); '
                      'discarded, rebuilt from the feature files', 'current', logging.WARNING)
            path.unlink(missing_ok=True)
            return None

    def _check_cache(self, arrays: dict, count: int, key: str) -> None:
        """The arrays ``_extract_from_files`` writes, with one entry per window, for ``key``,
        unchanged since they were written (their digest)."""
        missing = sorted((CACHE_ARRAYS | {'key', 'digest'}) - set(arrays))
        if missing:
            raise ValueError(f'arrays {missing} missing')
        if str(arrays['key']) != key:
            raise ValueError('written for other feature files or windows (its key differs)')
        if str(arrays['digest']) != payload_digest(arrays, key, self._cache_secret):
            raise ValueError('its arrays do not match their digest: edited or damaged')
        kept = int((arrays['readable'] & (arrays['maps'][:, 0] >= 0)).sum())
        if (len(arrays['readable']) != count or arrays['maps'].shape != (count, self.horizon)
                or any(len(arrays[k]) != kept for k in ('start', 'goal', 'observed'))):
            raise ValueError(f'arrays of another length than its {count} windows')

    def _write_cache(self, path: Optional[Path], key: str, arrays: dict) -> None:
        if path is None:
            return
        tmp = path.with_suffix(f'.{os.getpid()}.tmp.npz')  # atomic for concurrent runs
        try:
            Path(os.path.realpath(path.parent)).mkdir(parents=True, exist_ok=True)
            np.savez(tmp, **arrays, key=np.str_(key),
                     digest=np.str_(payload_digest(arrays, key, self._cache_secret)))
            tmp.replace(path)
        except OSError as error:
            try:
                tmp.unlink()
            except OSError:
                pass
            raise OSError(error.errno, f'cannot write the observation cache {path}: '
                          f'{error.strerror or error}; the cache can move: set cache_dir to a '
                          'writable folder (--cfg-options cache_dir=DIR)') from None

    def _log_size(self) -> None:
        """One line per split in the run's log: how many windows of how many videos."""
        videos = len({w.feature for w in self.windows})
        fraction, kept, total, seed = getattr(self, 'subset', None) or (None,) * 4
        limited = (f'; subset_fraction={fraction}: {kept} of {total} windows, subset_seed='
                   f'{seed}, stratified over tasks, drawn by window identity ({SAMPLE_DRAW})'
                   if fraction is not None else '')
        limited += (f'; limit: {self.limited[0]} of {self.limited[1]} windows, stratified over '
                    f'tasks, drawn by window identity ({SAMPLE_DRAW})' if self.limited else '')
        print_log(f'PlanningDataset ({self.split}, T={self.horizon}): {len(self.windows)} '
                  f'windows of {videos} videos ({self.data_root.name}{limited})', 'current')

    def window_count_summary(self) -> str:
        """'window_policy=...: 267 dropped, 3 relabelled of 270 windows; why' ('' when the
        policy changed no window): what the log says and a test's metrics JSON names."""
        if not self.window_counts:
            return ''
        summary = ', '.join(f'{n} {what}' + (f' ({self.other_labels} of them with other action '
                                             'labels than annotated)' * (what == 'relabelled'))
                            for what, n in sorted(self.window_counts.items()))
        why = ('a step ends at or past the video\'s last frame: clamped windows are observed '
               'at its last frames with their annotated labels' if self.window_policy == 'keep'
               else 'a step ends at or past the video\'s last frame: it takes the previous '
               'step\'s observations and action (relabelled), or the window has no step inside '
               'the video (dropped, not scored), as in the authors\' loader')
        return (f'window_policy={self.window_policy!r}: {summary} of {len(self._pkg_windows)} '
                f'windows; {why}')

    def _log_window_counts(self) -> None:
        if self.window_counts:
            print_log(f'PlanningDataset ({self.split}, T={self.horizon}, '
                      f'{self.window_count_summary()}', 'current')

    def _log_warnings(self) -> None:
        """Suspicious annotations (``validation.AnnotationWarnings``): one WARNING line."""
        if self.warnings:
            count = sum(self.warnings.counts.values())
            print_log(f'PlanningDataset ({self.split}, T={self.horizon}): {count} '
                      f'warning{"s" * (count > 1)} about the annotations (kept): '
                      f'{self.warnings.summary()}', 'current', logging.WARNING)

    def damaged_files(self, indices=None) -> list:
        """'<file>: <note>' of each feature file this dataset's windows (those of ``indices``
        when given) read that records a damaged video (extract_features' ``damage`` note:
        ffmpeg decoded it with errors, its frames there concealed or repeated), sorted by
        video."""
        windows = self.windows if indices is None else [self.windows[i] for i in indices]
        stems = sorted({w.feature for w in windows} & set(self._damage))
        return [f'{self._damage[stem][0]}: {self._damage[stem][1]}' for stem in stems]

    def _log_damage(self) -> None:
        """One WARNING line: how many feature files read record a damaged video, the first
        named (kept: they are the features the extraction gave)."""
        damaged = self.damaged_files()
        if damaged:
            more = f'; and {len(damaged) - DAMAGED_LISTED} more' * (len(damaged) > DAMAGED_LISTED)
            print_log(f'PlanningDataset ({self.split}, T={self.horizon}): {len(damaged)} feature '
                      f'file(s) read record a damaged video (extract_features\' "damage" note: '
                      'ffmpeg decoded it with errors, frames there concealed or repeated; kept): '
                      f'{"; ".join(damaged[:DAMAGED_LISTED])}{more}', 'current', logging.WARNING)

    def _log_skips(self) -> None:
        if not self.skipped:
            return
        summary = ', '.join(f'{n} {reason}' for reason, n in sorted(self.skipped.items()))
        print_log(f'PlanningDataset ({self.split}, T={self.horizon}): skipped bad videos: '
                  f'{summary}; first: {self._skip_messages[0]}', 'current')

    # ------------------------------------------------------------------ API
    def __len__(self) -> int:
        return len(self.windows)

    def __getitem__(self, i: int) -> dict:
        inputs = {'start': torch.from_numpy(self.start[i]), 'goal': torch.from_numpy(self.goal[i])}
        if self.observed_steps:
            inputs['observed'] = torch.from_numpy(self.observed[i])
        samples = {'plan': torch.from_numpy(self.plans[i]),
                   'task': torch.tensor(self.tasks[i], dtype=torch.long),
                   'index': torch.tensor(i, dtype=torch.long),
                   'window_key': torch.tensor(window_key(self.windows[i]), dtype=torch.long)}
        return {'inputs': inputs, 'data_samples': samples}

    def __getitems__(self, indices: List[int]):
        """The batch of ``indices`` (B): with ``device_resident``, ONE dict as ``planning_collate``
        gives, ``inputs`` ``start``, ``goal`` (B, D) [``observed`` (B, k, D)], ``data_samples``
        ``plan`` (B, T), ``task``, ``index``, ``window_key`` (B,), gathered on the device; else the B
        items."""
        if not self.device_resident:
            return [self[i] for i in indices]
        fields = self.device_fields()
        index = torch.as_tensor(indices, dtype=torch.long)
        index = index.to(fields['index'].device, non_blocking=True)  # no wait for the device
        batch = {name: values.index_select(0, index) for name, values in fields.items()}
        inputs = {name: batch.pop(name) for name in ('start', 'goal', 'observed') if name in batch}
        return {'inputs': inputs, 'data_samples': batch}

    def window_keys(self) -> np.ndarray:
        """(M,) int64 :func:`~.annotations.window_key` of each window: what identifies it
        whatever the order of the video lists (the prompting baselines draw examples by it)."""
        return np.array([window_key(w) for w in self.windows], np.int64).reshape(-1)

    def device_fields(self) -> dict:
        """{field: tensor (M, ...)} of every window on the batch device, built once:
        ``start``, ``goal`` (M, D), [``observed`` (M, k, D)], ``plan`` (M, T), ``task``,
        ``index``, ``window_key`` (M,) int64. CPU tensors share the dataset's arrays."""
        from mmengine.device import get_device
        device = torch.device('cpu' if torch.utils.data.get_worker_info() else get_device())
        if self._fields is None or self._fields[0] != device:
            fields = dict(start=self.start, goal=self.goal, plan=self.plans, task=self.tasks,
                          index=np.arange(len(self), dtype=np.int64),
                          window_key=self.window_keys())
            if self.observed_steps:
                fields['observed'] = self.observed
            self._fields = (device, {name: torch.from_numpy(values).to(device)
                                     for name, values in fields.items()})
        return self._fields[1]

    def pkg_sequences(self, count_mode: str = 'window') -> List[List[int]]:
        """Action sequences to count the PKG on: per-video steps ('video'; from the annotations
        or chained from a window file) or the window plans ('window', and 'video' when the
        windows are a ``subset_fraction`` or do not chain). Videos skipped for bad features
        are left out; videos with fewer than ``horizon`` steps count in 'video'. Like the
        authors' transition matrix, 'window' counts the ANNOTATED steps of every window,
        including those the window policy relabels or drops."""
        if count_mode not in ('window', 'video'):
            raise ValueError(f"count_mode={count_mode!r}; expected 'window' or 'video'")
        if count_mode == 'video' and self._videos is not None:
            return [[a for _, _, a in v.steps] for v in self._videos]
        return [list(w.steps) for w in self._pkg_windows]

    @property
    def metainfo(self) -> dict:
        return dataset_metainfo(self.taxonomy, self.horizon, self.feature_dim)

    def feature_statistics(self) -> dict:
        """Mean and standard deviation over every start and goal observation value (what a
        checkpoint records of its training features, ``engine.checkpoint.FEATURE_STATS_KEY``,
        and a test compares: features of another scale or extractor); computed once."""
        if getattr(self, '_feature_statistics', None) is None:
            self._feature_statistics = observation_statistics(self.start, self.goal)
        return self._feature_statistics


def observation_statistics(start, goal) -> dict:
    """``mean``, ``std`` and the number of ``values`` over every value of start and goal
    observations (arrays or tensors (B, D)): a dataset's ``feature_statistics`` and those of
    the observations a planner is given (``apis.plan_from_features``)."""
    values = np.concatenate([np.asarray(start, np.float64).ravel(),
                             np.asarray(goal, np.float64).ravel()])
    return dict(mean=float(values.mean()) if values.size else 0.0,
                std=float(values.std()) if values.size else 0.0, values=int(values.size))


def dataset_metainfo(taxonomy, horizon: int, feature_dim: int) -> dict:
    """A dataset's ``metainfo``: what training records in a checkpoint's
    ``meta.dataset_meta`` and a test compares (``engine.checkpoint.meta_mismatches``)."""
    return dict(num_actions=taxonomy.num_actions, num_tasks=taxonomy.num_tasks,
                horizon=int(horizon), feature_dim=int(feature_dim),
                action_names=list(taxonomy.action_names), task_names=list(taxonomy.task_names))


def config_metainfo(dataset_cfg) -> Optional[dict]:
    """The ``metainfo`` a ``PlanningDataset`` config dict would have, from its taxonomy and
    observation settings alone (no feature file read); None for another dataset type."""
    cfg = dict(dataset_cfg or {})
    if cfg.get('type') != 'PlanningDataset':
        return None
    import inspect
    defaults = inspect.signature(PlanningDataset).parameters
    horizon = cfg.get('horizon', defaults['horizon'].default)
    taxonomy = load_taxonomy(source_path(cfg['data_root'], cfg['taxonomy'], horizon))
    observation = cfg.get('observation', defaults['observation'].default)
    frame_dim = cfg.get('frame_dim', defaults['frame_dim'].default)
    return dataset_metainfo(taxonomy, horizon, observation_dim(observation, frame_dim))


def source_videos(dataset_cfg: dict) -> set:
    """Feature stems of the videos a ``PlanningDataset`` config reads, from its annotations
    alone (a CrossTask video list: the list itself, no CSV read)."""
    return set(source_video_ids(dataset_cfg))


def source_video_ids(dataset_cfg: dict) -> dict:
    """``{feature stem: (task index, vid)}`` of the videos a ``PlanningDataset`` config reads
    (:func:`source_videos`)."""
    cfg = dict(dataset_cfg)
    if cfg.get('video_list'):
        horizon = cfg.get('horizon', '')
        taxonomy = load_taxonomy(source_path(cfg['data_root'], cfg['taxonomy'], horizon))
        path = source_path(cfg['data_root'], cfg['video_list'], horizon)
        return {entry['feature']: (entry['task'], entry['vid'])
                for entry in read_video_list(path, taxonomy)}
    _, windows, videos = source_windows(cfg)
    return {item.feature: (item.task, item.vid)
            for item in (windows if videos is None else videos)}


def check_split_disjoint(cfg) -> None:
    """A config's training and test videos must be disjoint (``PlanningDataset`` configs of
    ``train_dataloader`` and ``test_dataloader``; others, e.g. a ``ConcatPlanningDataset``
    whose sources are dataset configs of their own, are not checked), and so must its training
    and validation videos (:func:`check_held_out_agrees`): ``ValueError``."""
    train, val, test = (_planning_dataset(cfg, split) for split in ('train', 'val', 'test'))
    check_split_roles(dict(train=train, val=val, test=test), cfg.filename or 'config')
    if train and val:
        check_held_out_agrees(train, val, cfg.filename or 'config')
        check_validation_source(train, val, cfg.filename or 'config')
    if train and test:  # first: a test moved onto training windows overlaps validation too
        where = f'{cfg.filename or "config"}: train_dataloader.dataset / test_dataloader.dataset'
        train_ids, test_ids = source_video_ids(train), source_video_ids(test)
        train_videos, test_videos = set(train_ids), set(test_ids)
        check_disjoint(train_videos, test_videos, where)
        check_disjoint_ids(train_ids, test_ids, where)
        check_disjoint_files(train_videos, test_videos, train.get('feature_dir'),
                             test.get('feature_dir'), where)
    if val and test and cfg.get('selection') != 'authors':
        check_selection_held_out(source_videos(val), source_videos(test), cfg)


def check_selection_held_out(val_videos: set, test_videos: set, cfg) -> None:
    """Validation on test videos is the authors' test-set selection, which a config names
    (``selection = 'authors'``, configs/_base_/selection): a ``val_dataloader`` moved onto the
    test windows (``--cfg-options val_dataloader.dataset.window_file=splits/test_T3.json``)
    selected the checkpoint on test videos and reported it as the unified protocol."""
    shared = sorted(val_videos & test_videos)
    if shared:
        raise ValueError(
            f'{cfg.filename or "config"}: val_dataloader.dataset / test_dataloader.dataset: '
            f'{len(shared)} video(s) are in both the validation and the test split, e.g. '
            f'{shared[:5]}, with selection={cfg.get("selection")!r}: the checkpoint would be '
            'selected on test windows; validate on held-out training videos (the dataset '
            "base's val_dataloader), or set selection='authors' to report the authors' "
            'test-set selection as such (configs/_base_/selection)')


# the splits each dataloader may read: a training on the 'test' split of its window file (its
# validation videos too) or a test scored on 'train' (90% of the test windows), each logged as
# if it were the config's, is refused; validation may use the test windows (the authors'
# checkpoint selection, configs/_base_/selection)
SPLIT_ROLES = {'train': ('train',), 'val': ('val', 'test'), 'test': ('test',)}


def check_split_roles(datasets: dict, where: str) -> None:
    """``<loader>_dataloader.dataset.split`` must be a split that loader may read
    (:data:`SPLIT_ROLES`): ``ValueError`` naming the key, the value and what is expected."""
    for loader, dataset in datasets.items():
        split = (dataset or {}).get('split', 'train')
        if dataset and split not in SPLIT_ROLES[loader]:
            allowed = ' or '.join(repr(s) for s in SPLIT_ROLES[loader])
            raise ValueError(
                f'{where}: {loader}_dataloader.dataset.split={split!r}; expected {allowed}: '
                f'the {loader} dataloader reading the {split!r} split would '
                + ('train on windows the other splits use (and be logged as its training)'
                   if loader == 'train' else
                   f'score a part of other windows as the {loader} set' if loader == 'test' else
                   'select the checkpoint on windows it was trained on')
                + '; change the window or annotation file instead to use other data')


def _same_source(one: dict, other: dict) -> bool:
    return all(one.get(key) == other.get(key) for key in ('data_root', *SOURCE_KEYS))


def check_validation_source(train: dict, val: dict, where: str) -> None:
    """Validation selects the checkpoint: a 'test' split of the training split's own source
    is all its windows, the trained ones among them (before: validated on 16 of the 697 NIV
    training windows and logged as selection='unified', 'held-out training videos')."""
    if val.get('split') == 'test' and _same_source(train, val):
        raise ValueError(
            f"{where}: val_dataloader.dataset.split='test' reads the training split's own "
            "source (the 'test' split of a window file is all its windows): the checkpoint "
            'would be selected on windows it was trained on; validate on split=\'val\' (held-'
            'out training videos) or on the test windows with selection=\'authors\' '
            '(configs/_base_/selection)')


def _planning_dataset(cfg, split: str) -> Optional[dict]:
    dataset = (cfg.get(f'{split}_dataloader') or {}).get('dataset')
    if dataset and str(dataset.get('type', '')).split('.')[-1] == 'PlanningDataset':
        return dataset
    return None


HELD_OUT_KEYS = {'val_fraction': 0.1, 'split_seed': 0}  # PlanningDataset's defaults


def check_held_out_agrees(train: dict, val: dict, where: str) -> None:
    """A 'val' split held out of the training split's own source draws its videos by
    ``val_fraction`` and ``split_seed``: both must be those of the 'train' split, else
    validation videos are also trained on (or training videos are used by neither)."""
    if train.get('split', 'train') != 'train' or val.get('split') != 'val':
        return
    if not _same_source(train, val):
        return  # validation on another source: nothing is held out of the training one
    for key, default in HELD_OUT_KEYS.items():
        ours, theirs = train.get(key, default), val.get(key, default)
        if ours != theirs and repr(ours) != repr(theirs):  # nan and nan: the dataset names it
            raise ValueError(
                f'{where}: train_dataloader.dataset.{key}={ours!r} but '
                f'val_dataloader.dataset.{key}={theirs!r}; the validation videos are the '
                f'training source\'s videos held out by {key}, so both splits must give the '
                f'same value (else validation videos are also trained on, or training videos '
                f'are used by neither): set {key} in both')
