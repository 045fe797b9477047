"""Per-video feature files: the one reader for every public layout, safely.

A feature file holds one vector per second, ``frames_features`` of shape (L, D) (D = 512 for
S3D). Every public planning loader reads it with
``np.load(path, allow_pickle=True)["frames_features"]``; ``read_feature_record`` reads the
same files, and more, whatever their extension:

* a raw pickle of a dict (protocols 0-5; the public CrossTask/NIV/COIN files);
* an ``np.savez`` archive (our safe layout ``<stem>.npz``, or one named ``.npy``), keyed
  ``frames_features`` or holding a single array;
* a ``.npy`` holding a 0-d object array with the dict (``np.save(path, dict)``);
* a plain ``.npy`` array (L, D).

Pickled payloads (raw pickles, object ``.npy`` files and object npz members) are read with
``safe_pickle.SafeUnpickler``: numpy arrays, numbers and strings only, no code from the file
runs; any other global is refused with an error naming the file and the global.
"""
import hashlib
import itertools
import os
import unicodedata
import zipfile
from pathlib import Path
from typing import Optional

import numpy as np

from ..config_types import Count, PathLike, checked_arguments
from .annotations import BadVideoError
from .safe_pickle import RefusedGlobalError, safe_load
from .validation import check_real_floats
from ..video.recipe import (ROW_SECONDS_TOLERANCE, recipe_dict,  # noqa: F401
                            recipe_number_problem, row_seconds_problem)
from vpn_plugin.errors import (NPY_MAGIC, ZIP_MAGIC, decimal_number, link_problem, path_kind,
                               plain_text, tool_command, what_the_file_is)

FEATURE_KEY = 'frames_features'
TIME_STEP_KEYS = ('recipe', 'native_fps')  # an extraction's record of a row's seconds
DAMAGE_KEY = 'damage'  # extract_features' note of a video that ffmpeg decoded with errors
USABLE_KEY = 'usable'  # extract_features: False for S3D with random weights (pipeline checks)
SYNTHETIC_DATASETS = ('crosstask', 'niv', 'coin')


@checked_arguments
def find_feature_file(feature_dir: PathLike, stem: str) -> Path:
    """``<feature_dir>/<stem>.npz`` if it exists, else ``<stem>.npy`` (may not exist); both
    present is a ``ValueError`` (two versions of one video's features: which one is right?)."""
    npz, npy = Path(feature_dir) / f'{stem}.npz', Path(feature_dir) / f'{stem}.npy'
    if not npz.exists():  # a dangling .npz link and no .npy: the link, which ls lists, is named
        return npz if npz.is_symlink() and not os.path.lexists(npy) else npy
    if npy.exists():
        raise ValueError(f'{feature_dir}: both {npz.name} and {npy.name} exist for video '
                         f'{stem}; expected one feature file per video: remove the one that is '
                         'not of these features')
    return npz


def check_disjoint_files(train_stems, test_stems, train_dir, test_dir, where: str) -> None:
    """The test videos must not read a training video's feature file under another name (a
    symbolic link, a hard link: ``check_disjoint`` compares names only, and a link made the
    leak invisible): ``ValueError`` naming both names and the file. Folders not there (an
    annotations-only check) and files not there are left to the dataset, which names them."""
    def files(stems, folder) -> dict:
        if not folder or not Path(folder).is_dir():
            return {}
        found = {}
        for stem in sorted(map(str, stems)):
            try:
                path = find_feature_file(folder, stem)
                if path.is_file():
                    info = path.stat()
                    found.setdefault((info.st_dev, info.st_ino), (stem, path))
            except (OSError, ValueError):  # two files, a loop: the dataset names it
                continue
        return found
    train, test = files(train_stems, train_dir), files(test_stems, test_dir)
    shared = [(train[key], test[key]) for key in sorted(set(train) & set(test))
              if train[key][0] != test[key][0]]  # one name in both: check_disjoint's
    if shared:
        (train_stem, train_path), (test_stem, test_path) = shared[0]
        raise ValueError(f'{where}: {len(shared)} test video(s) read the feature file of a '
                         f'training video under another name, e.g. test {test_stem!r} '
                         f'({test_path}) is the file of training video {train_stem!r} '
                         f'({os.path.realpath(train_path)}): a link; the test windows must come '
                         'from videos never trained on (check the feature folder\'s links)')


def feature_fix_hint(feature_dir, data_root) -> str:
    """The commands that fill ``feature_dir``: synthetic features (CrossTask, NIV) or a
    conversion of real ones, with this config's paths."""
    feature_dir, data_root = Path(feature_dir), Path(data_root)
    if not feature_dir.is_absolute() and not feature_dir.is_dir():
        return (f'feature_dir {feature_dir} is relative and was read from the working directory '
                f'{Path.cwd()}; build datasets from a config loaded with '
                'vpn_plugin.apis.build_split_dataset(CONFIG, split) or '
                'vpn_plugin.data_paths.load_config, which resolve it from the repository root '
                '(or give an absolute path)')
    dataset = data_root.name
    convert = (f'{tool_command("convert_features.py")} --src /path/to/real/features '
               f'--dst {feature_dir}')
    make = tool_command('make_synthetic_features.py')
    if dataset not in SYNTHETIC_DATASETS:
        return (f'Dataset {dataset!r}: put its feature files in {feature_dir} (public files load '
                f'as they are), or convert them: {convert}; synthetic stand-ins for a dataset '
                f'in the per-video JSON format: {make} --config <its config>')
    out = feature_dir.parent if feature_dir.name == 'features' else Path('OUT')
    generate = f'{make} --dataset {dataset} --data-root {data_root.parent} --out {out}'
    then = '' if out != Path('OUT') else ' (then set feature_dir=OUT/features)'
    return (f'Dataset {dataset!r}: generate synthetic features with: {generate}{then}; or use '
            f'the real ones: point feature_dir at their folder (public files load as they are) '
            f'or convert them: {convert}')


@checked_arguments
def load_features(path: PathLike, frame_dim: Count, vid: str = '', fix_hint: str = '',
                  damage: Optional[dict] = None) -> np.ndarray:
    """Read one video's frames -> (L, D) float32; BadVideoError names the file and problem.
    ``damage``: a dict that gets ``{file name: note}`` when the file records a damaged video
    (:func:`damage_note`)."""
    path = require_feature_file(path, vid, fix_hint)
    record = read_feature_record(path, vid, frames_only=True)
    frames = checked_frames(record, path, frame_dim, vid)
    problem = unusable_problem(record, path)
    if problem:
        raise BadVideoError(vid, 'unusable features', problem)
    note = damage_note(record)
    if note and damage is not None:
        damage[path.name] = note
    return frames


def usable_flag(record: dict, source) -> bool:
    """The ``usable`` field of a feature record (absent: True; False: S3D with random weights,
    extract_features --random-weights); ``ValueError`` naming ``source``, the field and its
    value unless it is one boolean (``0``, ``[False]`` or ``'false'`` were read as usable)."""
    if USABLE_KEY not in record:
        return True
    value = np.asarray(record[USABLE_KEY])
    if value.shape != () or value.dtype != np.bool_:
        raise ValueError(f'{source}: field "{USABLE_KEY}" = {record[USABLE_KEY]!r}; expected a '
                         'boolean (false: features of S3D with random weights)')
    return bool(value)


def unusable_problem(record: dict, path) -> str:
    """'' unless the record says its features mean nothing (``usable`` false: S3D with random
    weights, extract_features --random-weights) while its folder is no such extraction (its
    provenance is not ``random-weights``, whose runs are all marked UNUSABLE): a pipeline
    check's file copied among real features was read as one of them without a word."""
    try:
        if usable_flag(record, path):
            return ''
    except ValueError as err:  # 0, [False], 'false': neither read as usable nor as unusable
        return str(err)
    from .provenance import read_record
    try:
        record_of_folder = read_record(Path(path).parent)
    except ValueError:  # a damaged record: the folder's kind cannot be told
        record_of_folder = {}
    kind = record_of_folder.get('kind')
    if kind == 'random-weights' or (kind == 'extracted' and 'weights' not in record_of_folder):
        return ''  # a random-weights extraction (or one by the library, weights unrecorded)
    warning = ' '.join(str(np.asarray(record.get('warning', 'random S3D weights'))).split())
    return (f'{path}: field "{USABLE_KEY}" is false ({warning}) in a folder of {kind} features '
            f'(its provenance); expected usable features: extract this video again with '
            f'--weights, or keep random-weights features in a folder of their own (their runs '
            f'are marked UNUSABLE)')


def damage_note(record: dict) -> str:
    """The ``damage`` note a feature record holds ('' without): extract_features writes it
    when ffmpeg decoded the video but reported errors (frames concealed or repeated)."""
    note = record.get(DAMAGE_KEY)
    if note is None:
        return ''
    note = np.asarray(note)
    if note.dtype.kind in 'US':  # one note, or several (each kept)
        texts = [n.decode('utf-8', 'replace') if isinstance(n, bytes) else str(n)
                 for n in note.ravel().tolist()]
        return '; '.join(t.strip() for t in texts if t.strip())
    if note.size == 1 and note.dtype.kind in 'biuf' and not note.item():
        return ''  # a flag 0 / False: not damaged
    return f'field "{DAMAGE_KEY}" = {np.array2string(note, threshold=5)[:200]} (no text note)'



@checked_arguments
def require_feature_file(path: PathLike, vid: str = '', fix_hint: str = '') -> Path:
    """``path`` as a Path; BadVideoError when no such file exists, or when it is no regular
    file (a FIFO would block the read for ever, ``/dev/zero`` never end)."""
    path, kind = Path(path), path_kind(path)
    of_video = f' (video {plain_text(vid)})' if vid else ''
    if kind is None:  # find_feature_file looked for the .npz first
        nor = f' (nor {path.stem}.npz)' if path.suffix == '.npy' else ''
        link = link_problem(path)
        if link:  # it is listed by ls: say where it points
            raise BadVideoError(vid, 'missing feature file', f'feature file {path}{of_video} '
                                f'is {link}; expected a link to a feature file')
        raise BadVideoError(vid, 'missing feature file', f'feature file {path} does not exist'
                            f'{nor}{of_video}{other_case_hint(path)}. {fix_hint}'.rstrip())
    if kind != 'a regular file':
        raise BadVideoError(vid, 'unreadable feature file',
                            f'feature file {path}{of_video} is {kind}, not a regular file; '
                            'expected a feature file (.npy, .npz or a pickle)')
    return path


def other_case_hint(path: Path) -> str:
    """``'; the folder holds V.NPZ ...'`` when a file of ``path``'s name but for the case of
    its .npz / .npy extension is there (not read: the layout's names are lower-case); '' when
    none. Looks up the 14 spellings, not the folder's listing (one missing file of thousands)."""
    stem, found = path.stem, []
    for suffix in ('npz', 'npy'):
        for letters in itertools.product(*((c, c.upper()) for c in suffix)):
            name = f'{stem}.{"".join(letters)}'
            if name != f'{stem}.{suffix}' and (path.parent / name).is_file():
                found.append(name)
    if found:
        return (f'; the folder holds {" and ".join(found)}, whose extension differs only by '
                f'case: expected {stem}.npz or {stem}.npy (rename it)')
    for form in ('NFC', 'NFD'):  # a name written back by macOS (NFD) looks the same
        other = unicodedata.normalize(form, stem)
        found += [(f'{other}.{suffix}', form) for suffix in ('npz', 'npy')
                  if other != stem and (path.parent / f'{other}.{suffix}').is_file()]
    if found:
        return (f'; the folder holds {found[0][0]}, the same letters in another Unicode '
                f'normalization ({found[0][1]}, as some file systems and copies write names): '
                f'expected the name as the annotation writes it, {stem!r} (rename the file)')
    given = Path(stem)
    if given.suffix.lower() in ('.npz', '.npy') and (path.parent / stem).is_file():
        return (f'; the folder holds {stem}: the name was given with its extension; expected '
                f'the file name without it ({given.stem!r})')
    pickles = [f'{stem}{suffix}' for suffix in PICKLE_SUFFIXES
               if (path.parent / f'{stem}{suffix}').is_file()]
    if pickles:  # the public files are pickles named .npy: read as they are when so named
        return (f'; the folder holds {pickles[0]}: feature files are read under the names '
                f'{stem}.npz or {stem}.npy only, whatever their layout (a pickled dict named '
                f'.npy is read, as the public files are): rename it to {stem}.npy')
    return ''


PICKLE_SUFFIXES = ('.pkl', '.pickle', '.pk', '.p')  # names of pickles other_case_hint names


def checked_frames(record: dict, path, frame_dim: int, vid: str = '') -> np.ndarray:
    """A record's ``frames_features`` (L, D) float32, checked: 2-D, D = frame_dim, finite, and
    one row per second when the record says its frame recipe (:func:`row_seconds_problem`)."""
    problem = time_step_problem(record)
    if problem:
        raise BadVideoError(vid, 'features of another time step',
                            f'{path}: field "recipe": {problem}')
    frames = frames_of(record, path, vid)
    if frames.ndim != 2 or frames.shape[0] < 1 or frames.shape[1] != frame_dim:
        raise BadVideoError(vid, 'wrong feature dimension',
                            f'{path}: field "{FEATURE_KEY}" has shape {frames.shape}; expected '
                            f'(seconds, {frame_dim})')
    if not np.isfinite(frames).all():
        bad = np.flatnonzero(~np.isfinite(frames).all(axis=1))
        raise BadVideoError(vid, 'NaN/inf frames',
                            f'{path}: field "{FEATURE_KEY}" has NaN/inf values in frames '
                            f'{bad[:10].tolist()} ({len(bad)} frames)')
    return np.require(frames, np.float32, ['C', 'W'])  # a writable copy only when needed


def time_step_problem(record: dict) -> str:
    """'' unless the record's extraction fields say its rows are not one second each: its
    ``recipe`` (:func:`row_seconds_problem`, over the record's rows), judged at its
    ``native_fps`` for a recipe of the video's own frames (``--native-fps``; a record of such a
    recipe without ``native_fps``, written before extraction recorded it, cannot be told and is
    refused), or a recipe whose numbers cannot be judged (:func:`recipe_number_problem`)."""
    if 'recipe' not in record:
        return ''
    native = _recorded_number(record.get('native_fps'))
    problem = recipe_number_problem(record['recipe'], native)
    if problem:
        return problem
    shape = np.shape(record.get(FEATURE_KEY)) if FEATURE_KEY in record else ()
    problem = row_seconds_problem(record['recipe'], native, shape[0] if shape else None)
    if problem or native is not None:
        return problem
    if (recipe_dict(record['recipe']) or {}).get('fps', 0) is None:
        return ('frame recipe of the video\'s own frames (fps null, --native-fps) and no field '
                '"native_fps": the seconds of a row cannot be told (16 frames at 30 fps are '
                '0.53 s); remove it and extract it again: extraction now records the rate')
    return ''


def _recorded_number(value):
    """A recorded scalar (a 0-d array, a number, its text) as a Python number; anything else
    (an array of several values, other text) as it is, for the caller to name."""
    if value is None:
        return None
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(value, (str, bytes)):  # ASCII only: float() reads '1_6' or '١٦' as 16
        text = value.decode('utf-8', 'replace') if isinstance(value, bytes) else value
        number = decimal_number(text)
        return value if number is None else number
    return value


def frames_of(record: dict, path, vid: str = '') -> np.ndarray:
    """The ``frames_features`` array (L, D) of a record from ``read_feature_record``."""
    if FEATURE_KEY not in record:
        raise BadVideoError(vid, 'unreadable feature file',
                            f'{path}: no field "{FEATURE_KEY}"; found {sorted(record)[:10]}')
    try:
        frames = np.asarray(record[FEATURE_KEY])
    except (TypeError, ValueError) as err:
        raise BadVideoError(vid, 'unreadable feature file',
                            f'{path}: field "{FEATURE_KEY}" is not a numeric array: {err}') from err
    try:  # int, bool, complex or object arrays are not features (nothing is coerced)
        check_real_floats(frames, f'{path}: field "{FEATURE_KEY}"')
    except ValueError as err:
        raise BadVideoError(vid, 'wrong feature dtype', str(err)) from None
    check_float32_range(frames, path, vid)
    return frames.astype(np.float32, copy=False)


def check_float32_range(frames: np.ndarray, path, vid: str = '') -> None:
    """Finite values of a wider float array (L, D) must fit float32, the dtype features are
    read as: 1e300 would become inf and be reported as a NaN/inf value the file does not hold."""
    if frames.dtype.itemsize <= 4:
        return
    limit = np.finfo(np.float32).max
    with np.errstate(invalid='ignore'):
        beyond = np.isfinite(frames) & (np.abs(frames) > limit)
    if beyond.any():
        rows = np.flatnonzero(beyond.reshape(beyond.shape[0] if beyond.ndim else 1, -1).any(1))
        raise BadVideoError(vid, 'feature values overflow float32',
                            f'{path}: field "{FEATURE_KEY}" ({frames.dtype}) has values beyond '
                            f'float32 range (|x| > {limit:.4g}, e.g. {frames[beyond][0]:.4g}) in '
                            f'frames {rows[:10].tolist()} ({len(rows)} frames); features are read '
                            'as float32: expected values within it')


@checked_arguments
def read_feature_record(path: PathLike, vid: str = '', frames_only: bool = False) -> dict:
    """Every field of a feature file in any layout (module docstring) as a dict; a plain array
    comes back as ``{'frames_features': array}``. Runs no code from the file.
    ``frames_only``: an npz archive's other members are not read (faster)."""
    path = Path(path)
    kind = path_kind(path)
    if kind not in (None, 'a regular file'):  # a FIFO blocks the read, /dev/zero never ends
        raise BadVideoError(vid, 'unreadable feature file',
                            f'feature file {path} is {kind}, not a regular file; expected a '
                            'feature file (.npy, .npz or a pickle)')
    try:
        with open(path, 'rb') as f:
            head = f.read(len(NPY_MAGIC))
            f.seek(0)
            if head.startswith(ZIP_MAGIC):
                return _read_npz(f, frames_only)
            content = _read_npy(f) if head == NPY_MAGIC else safe_load(f)
    except RefusedGlobalError as err:
        if err.global_name.startswith('persistent id'):  # no feature file has one: garbage,
            raise BadVideoError(vid, 'unreadable feature file',  # or a legacy torch.save file
                                f'cannot read {path}: {what_the_file_is(path)} (read as a '
                                f'pickle it asks for a {err.global_name}, as only torch.save '
                                f'files do); expected {EXPECTED_LAYOUTS}') from err
        raise BadVideoError(vid, 'unsafe feature file',
                            f'{path}: {err}; the file was not read') from err
    except Exception as err:  # zip, pickle, numpy format and OS errors of a damaged file
        raise BadVideoError(vid, 'unreadable feature file',
                            f'cannot read {path}: {what_the_file_is(path)} ({err!r}); expected '
                            f'{EXPECTED_LAYOUTS}') from err
    return _as_record(content, path, vid)


TORCH_LEGACY_MAGIC = 0x1950a86a20f9469cfc6c  # torch.serialization's MAGIC_NUMBER
EXPECTED_LAYOUTS = (f'a .npy array (seconds, D), an npz archive with "{FEATURE_KEY}" or a '
                    f'pickled dict with "{FEATURE_KEY}"')
def _read_npz(f, frames_only: bool) -> dict:
    with zipfile.ZipFile(f) as archive:
        members = [n for n in archive.namelist() if n.endswith('.npy')]
        twice = sorted({n for n in members if members.count(n) > 1})
        if twice:  # zipfile would read the last of them without a word
            raise ValueError(f'the archive holds {len(members)} members, {twice[0]!r} more than '
                             'once (two arrays under one name: which one is meant cannot be '
                             'told); expected each member once')
        if not members:  # e.g. a torch.save file (data.pkl, data/0, ...)
            raise ValueError(f'a zip archive without .npy members (it holds '
                             f'{archive.namelist()[:5]}: a torch.save file?)')
        if frames_only and f'{FEATURE_KEY}.npy' in members:  # and what says a row's time
            members = [f'{name}.npy' for name in (FEATURE_KEY, DAMAGE_KEY, USABLE_KEY)
                       + TIME_STEP_KEYS
                       if f'{name}.npy' in members]
        record = {}
        for name in members:
            with archive.open(name) as member:
                record[name[:-len('.npy')]] = _read_npy(member)
    if FEATURE_KEY not in record and len(record) == 1:  # np.savez(path, frames): 'arr_0'
        record = {FEATURE_KEY: next(iter(record.values()))}
    return record


def _read_npy(f):
    """One ``.npy`` stream; an object array's pickle goes through ``safe_load``."""
    version = np.lib.format.read_magic(f)
    read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                   else np.lib.format.read_array_header_2_0)
    shape, fortran, dtype = read_header(f)
    if not dtype.hasobject:
        f.seek(0)
        array = np.lib.format.read_array(f, allow_pickle=False)
    else:
        array = safe_load(f)
        if not isinstance(array, np.ndarray) or array.shape != shape:
            raise ValueError(f'object array payload is {type(array).__name__}, expected an '
                             f'array of shape {shape}')
    if f.read(1):  # np.load stops after the array: data after it (two files joined) unread
        raise ValueError(f'bytes follow the {shape} array (two .npy files joined, or a '
                         'damaged one?): only one array per .npy')
    return array


def _as_record(content, path, vid) -> dict:
    if isinstance(content, np.ndarray) and content.dtype == object and content.ndim == 0:
        content = content.item()
    if isinstance(content, dict):
        return {str(k): v for k, v in content.items()}
    if isinstance(content, np.ndarray):
        return {FEATURE_KEY: content}
    if isinstance(content, int) and content == TORCH_LEGACY_MAGIC:  # a legacy torch.save file
        raise BadVideoError(vid, 'unreadable feature file',
                            f'{path}: a torch.save file (legacy format); expected '
                            f'{EXPECTED_LAYOUTS}')
    raise BadVideoError(vid, 'unreadable feature file',
                        f'{path}: holds a {type(content).__name__}; expected a dict with '
                        f'"{FEATURE_KEY}" or an array (seconds, D)')


def frames_digest(path) -> str:
    """'<exact> <half> <dtype>' of a feature file's frames array, 16 hex digits each, whatever
    its layout (.npz, .npy, pickle): exact over its shape and values as every reader passes
    them on (float32, ``features.frames_of``: the same features converted to another file
    format, or stored as float64, have the same), half over its shape and values rounded to
    float16 (the same features stored as float16 have the same; negated or other features do
    not), and the dtype the file stores (what tells a float16 copy from values changed below
    float16 precision); '' when the file cannot be read."""
    try:
        stored = np.asarray(read_feature_record(path, frames_only=True)['frames_features'])
        with np.errstate(over='ignore', invalid='ignore'):
            frames = np.ascontiguousarray(stored, dtype=np.float32)
    except Exception:  # noqa: BLE001  (unreadable here: the dataset names it when it reads it)
        return ''
    exact = hashlib.sha256(f'{frames.dtype.str}{frames.shape}'.encode())
    exact.update(frames.tobytes())
    half = hashlib.sha256(f'{frames.shape}'.encode())
    half.update(np.ascontiguousarray(frames, dtype=np.float16).tobytes())
    return f'{exact.hexdigest()[:16]} {half.hexdigest()[:16]} {stored.dtype.name}'
