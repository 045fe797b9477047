"""Videos -> per-video feature files, sharded over processes, resumable.

* Videos (files, or folders searched recursively for video extensions) are sorted and
  shard ``r`` of ``w`` takes ``videos[r::w]``: processes split a list without overlap or gap
  and need no communication.
* Decoding runs in DataLoader workers (:class:`VideoBlocks`), which stream each video as blocks
  of whole chunks; the network embeds them in the main process, ``batch_chunks`` at a time.
* Output: ``<out>/<name>.npz`` (``np.savez``: ``frames_features`` (N, 512) float32, one row
  per 16-frame chunk, plus ``num_frames``, ``recipe``, ``weights``, ``usable``, ``source``;
  ``native_fps`` for a recipe of the video's own frames: the rate its stream states),
  the layout ``vpn_plugin.datasets.features`` reads, so ``--feature-dir <out>`` works as is.
  ``name`` is the video's file stem (``naming='parent_stem'``: ``<folder>_<stem>``, e.g.
  CrossTask's ``<task>_<vid>`` from ``videos/<task>/<vid>.mp4``).
* Resumable: a file is written to a hidden temporary name in the output folder
  (``.<name>.npz.partial-<host>-<pid>``) and renamed into place, so a ``<name>.npz`` is
  always complete; a video whose file exists is skipped. Nothing else is written to disk:
  decoded frames stay in memory (a block of ``block_chunks`` chunks per video in flight), and
  ffmpeg's messages go to an unnamed temporary file in ``tempfile.gettempdir()`` ($TMPDIR).
  Rank 0 says so when it starts (:func:`temporary_files_note`). A killed run loses
  only the videos in flight. ``<out>/extraction.json`` holds the recipe and weights; a run with
  another recipe or weights into the same folder is refused.
* A video that cannot be decoded leaves no file; it is listed with the reason in
  ``<out>/failures.tsv`` (``failures.rank<r>.tsv`` per process, merged by rank 0; a tab or
  newline of the path escaped: :func:`tsv_field`).
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Sequence

import numpy as np
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from ..errors import (OutputWriteError, check_folder_target, differences, link_problem,
                      path_kind, plain_text, read_json, write_text_atomically)
from ..progress import StepProgress
from .chunking import chunk_count, embed_frames
from .decode import (UnreadableVideoError, expected_frames, iter_frame_blocks, probe_video,
                     stream_fps)
from .recipe import FrameRecipe

VIDEO_EXTENSIONS = ('.mp4', '.webm', '.mkv', '.avi', '.mov', '.m4v', '.mpg', '.mpeg', '.flv')
NAMINGS = ('stem', 'parent_stem')
MANIFEST = 'extraction.json'
FAILURES = 'failures.tsv'
FEATURE_SUFFIX = '.npz'


# ---------------------------------------------------------------------- which videos
def list_videos(inputs: Sequence, extensions: Sequence[str] = VIDEO_EXTENSIONS) -> List[Path]:
    """Files as given, folders searched recursively for ``extensions``; sorted, unique (one
    file named twice, in any spelling of its folder, ``a/../v.mp4`` and ``v.mp4``, is read
    once, under its first spelling in sorted order). A name with such an extension that is no
    readable file (a dangling link, a FIFO) is listed too: the extraction fails it by name
    instead of leaving it out without a word."""
    videos = set()
    for item in map(Path, inputs):
        if item.is_dir():
            videos.update(p for p in item.rglob('*')
                          if not p.is_dir() and p.suffix.lower() in extensions)
        elif item.is_file():
            videos.add(item)
        elif link_problem(item):  # listed by ls: "no such file" would mislead
            raise FileNotFoundError(f'{item}: {link_problem(item)}; expected a video file or a '
                                    'folder of videos')
        elif path_kind(item) is None:
            raise FileNotFoundError(f'{item}: no such video file or folder')
        else:
            raise OSError(f'{item} is {path_kind(item)}; expected a video file or a folder of '
                          'videos')
    unique = {}
    for video in sorted(videos):  # the file itself: its folder resolved, its own name kept
        unique.setdefault(Path(os.path.realpath(video.parent)) / video.name, video)
    return sorted(unique.values())


def non_videos(inputs: Sequence, out_dir=None,
               extensions: Sequence[str] = VIDEO_EXTENSIONS) -> List[Path]:
    """The files of the folders in ``inputs`` that :func:`list_videos` leaves out (not named
    ``extensions``: a README, a .wmv or .3gp video), outside ``out_dir``: for the tool to count
    and name them (a skipped video was left out without a word)."""
    out = Path(out_dir).resolve() if out_dir is not None else None
    found = set()
    for item in map(Path, inputs):
        if item.is_dir():
            found.update(p for p in item.rglob('*') if not p.is_dir()
                         and p.suffix.lower() not in extensions
                         and not (out is not None and (out == p.resolve().parent
                                                       or out in p.resolve().parents)))
    return sorted(found)


def linked_folders(inputs: Sequence) -> List[Path]:
    """The symbolic links to folders inside the folders in ``inputs``: :func:`list_videos`
    does not enter them (a link can loop back); for the tool to name them (the videos in
    a linked folder were left out without a word). A linked folder given as an input is
    searched."""
    found = set()
    for item in map(Path, inputs):
        if item.is_dir():
            found.update(p for p in item.rglob('*') if p.is_symlink() and p.is_dir())
    return sorted(found)


def feature_name(video: Path, naming: str = 'stem') -> str:
    if naming not in NAMINGS:
        raise ValueError(f'naming={naming!r} is unknown; expected one of {NAMINGS}')
    if naming == 'stem':
        return video.stem
    # the folder the video is in, also when it was named from inside it ('x.mp4': its
    # parent '' gave '_x.npz'); '..' read as the folder it leads to
    return f'{Path(os.path.abspath(video)).parent.name}_{video.stem}'


def output_names(videos: Sequence[Path], naming: str) -> List[str]:
    """One feature-file name per video; two videos with one name are refused."""
    names, seen = [], {}
    for video in videos:
        name = feature_name(video, naming)
        if name in seen:
            raise ValueError(f'{seen[name]} and {video} would both write {name}{FEATURE_SUFFIX}'
                             f' (naming={naming!r}); rename one or use another naming')
        seen[name] = video
        names.append(name)
    return names


def shard(items: Sequence, rank: int, world_size: int) -> list:
    """Items ``rank, rank + world_size, ...``: the shards of all ranks partition ``items``."""
    if not 0 <= rank < world_size:
        raise ValueError(f'rank {rank} is outside 0..{world_size - 1} (world size {world_size})')
    return list(items[rank::world_size])


# ---------------------------------------------------------------------- decoding workers
def _identity(item):
    return item


class VideoBlocks(IterableDataset):
    """Yields ``dict(index, frames (n, S, S, 3) uint8, last, error, expected[, native_fps])``
    (``native_fps``: the rate the video states, for a recipe of its own frames) per block of
    each video (``index`` into ``videos``; ``expected``: the chunks its header promises, None
    when unknown); a video that fails yields one item with ``error`` set (its earlier blocks
    are to be discarded). Workers split the videos ``[worker::workers]``."""

    def __init__(self, videos: Sequence[Path], recipe: FrameRecipe, block_chunks: int = 64):
        self.videos, self.recipe, self.block_chunks = list(videos), recipe, block_chunks

    def __iter__(self) -> Iterator[dict]:
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info else (0, 1)
        block_frames = self.block_chunks * self.recipe.chunk
        for index in range(worker, len(self.videos), workers):
            item = dict(index=index, error='', expected=None, damage='')
            try:
                header = probe_video(self.videos[index])
                frames = expected_frames(header, self.recipe)
                item['expected'] = None if frames is None else chunk_count(frames,
                                                                           self.recipe.chunk)
                if self.recipe.fps is None:  # the rows' time step (checked when decoding)
                    item['native_fps'] = stream_fps(header)
                pending, damage = None, []  # one block of lookahead: the last one is marked
                for frames in iter_frame_blocks(self.videos[index], self.recipe, block_frames,
                                                header, damage):
                    if pending is not None:
                        yield dict(item, frames=pending, last=False)
                    pending = frames
            except UnreadableVideoError as error:
                yield dict(item, frames=None, last=True, error=error.reason)
                continue
            yield dict(item, frames=pending, last=True, damage=' '.join(damage))


# ---------------------------------------------------------------------- writing
def write_features_atomically(path: Path, arrays: Dict[str, np.ndarray],
                              replace: bool = True, resumable: bool = True) -> None:
    """``np.savez`` to a hidden temporary name beside ``path``, fsync, rename into place; a
    failed write (a full disk) leaves no file and raises ``OutputWriteError`` naming ``path``
    and the error (errno). ``resumable``: the file is one of a folder that a run again
    resumes (an extraction, a conversion); else (one file, ``plan.py --save-features``) the
    message says that nothing was written. ``replace=False``: a file that appeared at
    ``path`` meanwhile (another run's) is kept and ``FileExistsError`` raised (hard link into
    place, which never replaces)."""
    temporary = path.with_name(f'.{path.name}.partial-{socket.gethostname()}-{os.getpid()}')
    try:
        with open(temporary, 'wb') as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        if replace:
            os.replace(temporary, path)
        else:
            os.link(temporary, path)
            temporary.unlink()
    except BaseException as error:
        temporary.unlink(missing_ok=True)
        if isinstance(error, OSError) and not isinstance(error, FileExistsError):
            _raise_write_failure(path, error, resumable)
        raise


def _raise_write_failure(path: Path, error: OSError, resumable: bool) -> None:
    """``OutputWriteError`` of a failed feature write: the file, the error with its errno
    name, and what to do (free space / fix it, then run again: resumed, or the whole run)."""
    full = error.errno in (errno.ENOSPC, errno.EDQUOT)
    name = errno.errorcode.get(error.errno) if error.errno is not None else None
    what = f'{error.strerror or error}' + (f' ({name})' if name else '')
    if resumable:
        hint = 'free disk space and run again to resume' if full else \
            'fix that and run again to resume'
        raise OutputWriteError(f'cannot write the feature file {path}: {what}; it was not '
                               f'written (the files written before it are complete: {hint})'
                               ) from error
    raise OutputWriteError(f'cannot write the feature file {path}: {what}; nothing was written '
                           f'({path} is as it was before the run): '
                           f'{"free disk space" if full else "fix that"} and run again'
                           ) from error


def check_manifest(out_dir: Path, settings: dict) -> None:
    """``extraction.json`` records the settings of the folder's features; other settings into
    the same folder are refused (mixed features would be wrong numbers), and so is a folder
    that already holds feature files without one (a dataset's feature folder: its files are
    no extraction of this tool to resume, and it gets no manifest of ours). Rank 0 writes a
    missing one once every rank has checked (:func:`write_manifest`)."""
    path = out_dir / MANIFEST
    if not path.exists():
        # anything but a failed run's own leftovers: a dataset's feature folder in any layout
        # (.npz, .npy, .pkl, no extension, per-task subfolders), a folder of videos, ...
        found = sorted(p.name for p in out_dir.iterdir() if not _own_leftover(p.name))
        if found:
            features = [n for n in found if Path(n).suffix.lower() in ('.npz', '.npy')]
            what = (f'{len(features)} feature file(s) ({", ".join(features[:3])}'
                    f'{", ..." * (len(features) > 3)})' if features else
                    f'{len(found)} file(s) or folder(s) ({", ".join(found[:3])}'
                    f'{", ..." * (len(found) > 3)})')
            if _extracted_here(out_dir):  # its provenance names this tool: the record is gone
                raise ValueError(f'--out {out_dir} holds {what} and a provenance.json of '
                                 f'extract_features.py, but no {MANIFEST}, the record of the '
                                 'settings its files were extracted with: this run\'s cannot '
                                 'be checked against them; nothing was written. Put the '
                                 f'folder\'s {MANIFEST} back, or give a new or empty --out folder')
            raise ValueError(f'--out {out_dir} already holds {what} but no {MANIFEST}: not a '
                             'folder this tool extracted into (a dataset\'s feature folder?); '
                             'nothing was written. Give a new or empty --out folder')
    if path.exists():
        found = read_json(path, 'the record of the folder\'s extraction (recipe, weights)')
        if isinstance(found, dict) and 'naming' not in found:  # recorded before naming was
            settings = {k: v for k, v in settings.items() if k != 'naming'}
        before, now = _by_content(found), _by_content(settings)
        if before != now and _run_wrote_nothing(out_dir):
            # the record of a finished run whose every video failed: no feature file to mix
            # with (refusing named "the features in" a folder of none, and refused the run
            # that run's own failure advised, e.g. --fps 16 after a --native-fps VFR refusal)
            print(f'note: {plain_text(path)} recorded the settings of an earlier run that '
                  'wrote no feature file (its provenance.json: 0 files); replaced by this '
                  "run's", flush=True)
            return  # rank 0 writes this run's once every rank has checked (write_manifest)
        if before != now:
            if isinstance(before, dict) and isinstance(now, dict):  # named as recorded
                absent = object()
                differ = {k for k in set(before) | set(now)
                          if before.get(k, absent) != now.get(k, absent)}
                found, settings = ({k: v for k, v in record.items() if k in differ}
                                   for record in (found, settings))
            raise ValueError(f'{path}: the features in {out_dir} were extracted with other '
                             f'settings than this run asks for ('
                             f'{differences(found, settings, "there", "asked now")}). Use '
                             'another --out folder (or remove that one)')


def _run_wrote_nothing(out_dir: Path) -> bool:
    """Whether the folder is what a finished extraction that wrote no feature file leaves:
    its provenance.json of extract_features.py records 0 files, and the folder holds nothing
    but that, its ``extraction.json`` and failure lists (no feature file, no temporary file
    of a run in flight)."""
    try:
        record = json.loads((out_dir / 'provenance.json').read_text(encoding='utf-8'))
    except (OSError, ValueError):
        return False
    if not (isinstance(record, dict) and record.get('tool') == 'extract_features.py'
            and record.get('recorded_files') == 0):
        return False
    return all(p.name in (MANIFEST, 'provenance.json') or (
        p.name.startswith('failures') and p.name.endswith('.tsv')) for p in out_dir.iterdir())


def _extracted_here(out_dir: Path) -> bool:
    """Whether the folder's provenance.json says extract_features.py wrote it."""
    try:
        record = json.loads((out_dir / 'provenance.json').read_text(encoding='utf-8'))
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and record.get('tool') == 'extract_features.py'


def _by_content(settings):
    """``settings`` with its weights as their sha256 alone: the same weights file under
    another name (a symlink, a renamed copy of s3d_howto100m.pth) is the same extraction;
    ``'<name> (sha256 <hex>)'`` is how extract_features.py records them."""
    if not isinstance(settings, dict) or not isinstance(settings.get('weights'), str):
        return settings
    digest = re.search(r'\(sha256 ([0-9a-f]{64})\)$', settings['weights'])
    return dict(settings, weights=f'sha256 {digest.group(1)}') if digest else settings


def write_manifest(out_dir: Path, settings: dict) -> None:
    """Write ``extraction.json`` unless it is there (checked by :func:`check_manifest`), or
    replace the one of an earlier run that wrote no feature file (its provenance goes with it:
    the run's own is written when it ends)."""
    path = out_dir / MANIFEST
    if path.exists() and _run_wrote_nothing(out_dir):
        (out_dir / 'provenance.json').unlink(missing_ok=True)
    elif path.exists():
        return
    write_text_atomically(path, json.dumps(settings, indent=1, sort_keys=True), MANIFEST)


def check_finished(path: Path, recipe: FrameRecipe, extra: Optional[dict] = None,
                   video: Optional[Path] = None, naming: str = 'stem') -> None:
    """A feature file already in the output folder is skipped only if it is one this
    extraction writes: an npz archive with ``frames_features`` (N, D) float, ``num_frames``,
    ``source`` and this run's ``recipe`` (and ``usable`` flag), made from a video of the
    name of ``video`` (a file copied or renamed onto another video's name holds that other
    video's features). A truncated file, another tool's (a dataset's features copied in) or
    another recipe's is refused by name."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            missing = sorted({'frames_features', 'num_frames', 'source', 'recipe'}
                             - set(archive.files))
            if missing:
                raise ValueError(f'no member(s) {missing}')
            with archive.zip.open('frames_features.npy') as member:
                read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                               (2, 0): np.lib.format.read_array_header_2_0}
                shape, _, dtype = read_header[np.lib.format.read_magic(member)](member)
            if len(shape) != 2 or not shape[0] or dtype.kind != 'f':
                raise ValueError(f'frames_features of shape {shape} and dtype {dtype}')
            source = Path(str(archive['source']))
            if video is not None and feature_name(source, naming) != path.stem:
                raise ValueError(f'made from the video {source}, not from {video}')
            if video is not None and 'video_bytes' in archive.files \
                    and int(archive['video_bytes']) != Path(video).stat().st_size:
                raise ValueError(f'made from {source} when it had {int(archive["video_bytes"])} '
                                 f'bytes; {video} has {Path(video).stat().st_size} now (another '
                                 'video under that name?)')
            if video is not None and 'video_sha256' in archive.files:
                check_same_video(archive, Path(video), source)
            found = json.loads(str(archive['recipe']))
            if found != recipe.as_dict():
                raise ValueError('extracted with another recipe than this run asks for ('
                                 f'{differences(found, recipe.as_dict(), "there", "asked now")})')
            if recipe.fps is None and 'native_fps' not in archive.files:
                raise ValueError('the video\'s own frames without the rate they were judged '
                                 'at (native_fps): written before extraction recorded it')
            if extra and 'usable' in extra and 'usable' in archive.files \
                    and bool(archive['usable']) != bool(extra['usable']):
                raise ValueError(f'usable={bool(archive["usable"])} (random weights: False), '
                                 f'this run writes usable={bool(extra["usable"])}')
    except Exception as error:  # zip, npy header, JSON, the checks above
        raise ValueError(f'{path}: already there, but not a complete feature file of this '
                         f'extraction ({error}); the extraction stops before any video (the '
                         'file is left as it is): remove it (its video is then extracted '
                         'again) or give another --out folder') from None


def video_identity(video: Path) -> dict:
    """What a feature file records of its video: the stat record and the content's SHA-256, so
    that a resume recognises the same video without reading it, and another video of the same
    name and size (even with its mtime restored: the ctime changes) by its content (the rule
    of ``datasets.file_digests``, which sits above this module)."""
    return dict(video_stat=_stat_record(video), video_sha256=np.str_(_sha256(video)))


def check_same_video(archive, video: Path, source) -> None:
    """``ValueError`` when ``video`` is not the video ``archive``'s features were made from:
    hashed again only when its stat record changed (a copied or touched file of the same
    content still resumes)."""
    if np.array_equal(archive['video_stat'], _stat_record(video)):
        return
    if _sha256(video) != str(archive['video_sha256']):
        raise ValueError(f'made from {source} when its content had SHA-256 '
                         f'{str(archive["video_sha256"])[:16]}...; {video} has other content '
                         'now (the same name and size: another or re-encoded video?)')


def _stat_record(path: Path) -> np.ndarray:
    status = os.stat(path)
    return np.array([status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns,
                     status.st_ctime_ns], np.int64)


def _sha256(path: Path) -> str:
    with open(path, 'rb') as handle:
        return hashlib.file_digest(handle, 'sha256').hexdigest()


@dataclass
class ExtractionResult:
    done: List[str] = field(default_factory=list)      # names written by this run
    skipped: List[str] = field(default_factory=list)   # already there (resumed)
    failed: Dict[str, str] = field(default_factory=dict)  # video path -> reason
    damaged: Dict[str, str] = field(default_factory=dict)  # written, but ffmpeg reported errors
    frames: int = 0
    seconds: float = 0.0


class Progress:
    """A rank's progress in chunks (one S3D row each; ``vpn_plugin.progress.StepProgress``): a
    line on ``stream`` at the first chunks, then at most every ``interval`` s, with the chunks
    done of those expected (each video's duration from its header, ``decode.expected_frames``;
    the videos not yet opened counted at the mean of those opened), chunks/s, the ETA and the
    video in flight."""

    def __init__(self, total_videos: int, rank: int, stream=None, interval: float = 10.0,
                 clock=time.monotonic):
        self.steps = StepProgress(f'[rank {rank}] S3D features', 0,
                                  lambda line: print(line, file=stream or sys.stderr, flush=True),
                                  unit='chunks', interval=interval, clock=clock)
        self.total_videos, self.videos = total_videos, 0
        self.expected: Dict[int, int] = {}  # video index -> chunks (probed, or a guess)

    def expect(self, index: int, chunks: Optional[int]) -> None:
        """The chunks video ``index`` will give (None: unknown)."""
        if index in self.expected:
            return
        known = [c for c in self.expected.values() if c] + ([chunks] if chunks else [])
        mean = sum(known) / len(known) if known else 1
        self.expected[index] = chunks or int(round(mean))
        left = self.total_videos - len(self.expected)
        self.steps.total = max(int(sum(self.expected.values()) + mean * left), self.steps.done)

    def chunks(self, count: int, name: str) -> None:
        # a video giving more chunks than its header promised (or one that failed after some)
        # raises the total: never "28/27 chunks (104%)"
        self.steps.total = max(self.steps.total, self.steps.done + count)
        self.steps.update(count, extra=lambda: (
            f'{self.steps.rate():.2f} chunks/s, {self.videos}/{self.total_videos} videos done, '
            f'in flight: {plain_text(name)}'))

    def video_done(self, index: int, chunks: int) -> None:
        """Video ``index`` ended (written or failed) after ``chunks`` chunks: its estimate
        becomes what it gave."""
        self.videos += 1
        self.steps.total += chunks - self.expected.get(index, chunks)
        self.expected[index] = chunks


def temporary_files_note(out_dir) -> str:
    """Where an extraction writes besides its feature files (module docstring)."""
    return (f'temporary files: each <name>.npz is written as {Path(out_dir)}/.<name>.npz.partial-'
            f'{socket.gethostname()}-<pid> and renamed when complete (a killed run\'s are '
            f'removed by the next run); ffmpeg\'s messages go to an unnamed file in '
            f'{tempfile.gettempdir()} ($TMPDIR); decoded frames stay in memory')


# ---------------------------------------------------------------------- the loop
def extract_videos(network: Callable, videos: Sequence[Path], out_dir, recipe: FrameRecipe,
                   *, naming: str = 'stem', rank: int = 0, world_size: int = 1,
                   num_workers: int = 2, batch_chunks: int = 8, block_chunks: int = 64,
                   extra: Optional[Dict[str, np.ndarray]] = None,
                   settings: Optional[dict] = None, progress_stream=None,
                   barrier: Callable[[], None] = lambda: None) -> ExtractionResult:
    """Extract this rank's shard of ``videos`` (module docstring). ``network``: a module
    returning ``{'video_embedding': (B, D)}`` for (B, 3, chunk, S, S) in [0, 1] (``S3D`` in
    eval mode); ``extra``: arrays stored in every file (e.g. ``usable``); ``settings``: what
    ``extraction.json`` records (the recipe and weights); ``barrier``: waits for every rank
    (``torch.distributed.barrier`` in a multi-process run), called once the folder is
    checked and before anything is written, so that no rank checks a folder another rank has
    begun to fill."""
    progress_stream = progress_stream or sys.stderr  # the stream of now, not of the import
    out_dir = Path(out_dir)
    check_folder_target(out_dir, '--out', 'the feature files', '--out')
    names = output_names(videos, naming)  # a refused name collision makes no --out folder
    out_dir.mkdir(parents=True, exist_ok=True)
    settings = settings or dict(recipe=recipe.as_dict())
    check_manifest(out_dir, settings)
    barrier()  # every rank has checked the folder: no rank checks while rank 0 writes into it
    if rank == 0:
        write_manifest(out_dir, settings)
    barrier()
    mine = shard(list(zip(videos, names)), rank, world_size)
    result = ExtractionResult()
    todo = []
    for video, name in mine:
        _remove_stale_partials(out_dir, name)
        if (out_dir / f'{name}{FEATURE_SUFFIX}').exists():
            check_finished(out_dir / f'{name}{FEATURE_SUFFIX}', recipe, extra, video, naming)
            result.skipped.append(name)
        else:
            todo.append((video, name))
    failures = out_dir / f'failures.rank{rank}.tsv'  # this run's failures (the last run's go)
    failures.unlink(missing_ok=True)
    if rank == 0:
        print(f'[rank 0] {len(todo)} videos to extract into {plain_text(out_dir)} ({len(result.skipped)} '
              f'already there); {temporary_files_note(out_dir)}', file=progress_stream,
              flush=True)
    start = time.monotonic()
    progress = Progress(len(todo), rank, progress_stream)
    loader = DataLoader(VideoBlocks([v for v, _ in todo], recipe, block_chunks),
                        batch_size=None, num_workers=num_workers, collate_fn=_identity)
    rows: Dict[int, list] = {}
    counts: Dict[int, int] = {}
    for item in loader:
        index = item['index']
        video, name = todo[index]
        progress.expect(index, item['expected'])
        if item['error']:
            done = sum(len(part) for part in rows.pop(index, []))
            result.failed[str(video)] = item['error']
            _append_line(failures, f'{tsv_field(str(video))}\t{_one_line(item["error"])}')
            progress.video_done(index, done)
            continue
        frames = item['frames']
        counts[index] = counts.get(index, 0) + len(frames)
        rows.setdefault(index, []).append(embed_frames(
            network, frames, recipe.chunk, batch_chunks,
            on_rows=lambda n, name=name: progress.chunks(n, name)).numpy())
        if item['last']:
            features = np.concatenate(rows.pop(index)).astype(np.float32)
            write_features_atomically(
                out_dir / f'{name}{FEATURE_SUFFIX}',
                dict(frames_features=features, num_frames=np.int64(counts[index]),
                     source=np.str_(str(video)), video_bytes=np.int64(Path(video).stat().st_size),
                     **video_identity(Path(video)),
                     recipe=np.str_(json.dumps(recipe.as_dict(), sort_keys=True)),
                     **({} if item.get('native_fps') is None else
                        dict(native_fps=np.float64(item['native_fps']))),
                     **(extra or {}), **(dict(damage=np.str_(item['damage']))
                                         if item['damage'] else {})))
            result.done.append(name)
            if item['damage']:
                result.damaged[str(video)] = item['damage']
                short = (f'; {len(features)} of the {item["expected"]} chunks its header states'
                         if item['expected'] and len(features) < item['expected'] else '')
                print(f'[rank {rank}] WARNING: {plain_text(video)}: {item["damage"]}{short} '
                      f'({plain_text(name)}{FEATURE_SUFFIX} records it as "damage")',
                      file=progress_stream,
                      flush=True)
            decoded = counts.pop(index)
            result.frames += decoded
            progress.video_done(index, len(features))
    result.seconds = time.monotonic() - start
    return result


def merge_failures(out_dir, world_size: int) -> List[str]:
    """Rank 0, after every rank finished: ``failures.rank*.tsv`` -> ``failures.tsv`` (removed
    when none failed); returns its lines."""
    out_dir = Path(out_dir)
    lines = []
    for rank in range(world_size):
        part = out_dir / f'failures.rank{rank}.tsv'
        if part.exists():
            lines += [line for line in part.read_text().splitlines() if line.strip()]
            part.unlink()
    target = out_dir / FAILURES
    if lines:
        write_text_atomically(target, ''.join(f'{line}\n' for line in sorted(lines)), FAILURES)
    else:
        target.unlink(missing_ok=True)
    return sorted(lines)


def _own_leftover(name: str) -> bool:
    """A file an extraction leaves in its folder before ``extraction.json`` can exist: a
    killed run's temporary file or failure list."""
    return (name.startswith('.') and f'{FEATURE_SUFFIX}.partial-' in name) or (
        name.startswith('failures') and name.endswith('.tsv'))


def _remove_stale_partials(out_dir: Path, name: str) -> None:
    """Temporary files of a killed run for this rank's own video (only this rank writes it)."""
    for stale in out_dir.glob(f'.{name}{FEATURE_SUFFIX}.partial-*'):
        stale.unlink(missing_ok=True)


def _append_line(path: Path, line: str) -> None:
    try:
        with open(path, 'a') as handle:
            handle.write(line + '\n')
    except OSError as error:
        raise OutputWriteError(f'cannot write the failure list {path}: '
                               f'{error.strerror or error} (free disk space and run again)'
                               ) from error


def tsv_field(text: str) -> str:
    """``text`` as one field of a line of ``failures.tsv`` (the TSV file only; printed lines
    show names by the one rule of names in printed lines, ``errors.plain_text``): a
    backslash, tab, newline or carriage return written ``\\\\``, ``\\t``, ``\\n``, ``\\r``, any
    other control character ``\\xNN`` (a video named with a newline was two failure lines, and
    the run counted two failed videos)."""
    text = (text.replace('\\', '\\\\').replace('\t', '\\t').replace('\n', '\\n')
            .replace('\r', '\\r'))
    return re.sub(r'[\x00-\x1f\x7f]', lambda match: f'\\x{ord(match.group()):02x}', text)


def _one_line(text: str) -> str:
    return ' '.join(str(text).split())
