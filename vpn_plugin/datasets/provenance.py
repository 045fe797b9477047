"""What a feature folder holds: its provenance record, read into every results row.

Every tool that fills a feature folder writes ``<folder>/provenance.json``
(:func:`write_provenance`), a small JSON with ``kind`` and what made the files:

* ``synthetic``: ``tools/make_synthetic_features.py`` (generator, seed, difficulty, ...);
* ``extracted``: ``tools/extract_features.py`` (network, recipe, weights file and its sha256);
* ``random-weights``: the same with ``--random-weights``: unusable, for pipeline checks only;
* ``converted``: ``tools/convert_features.py`` (source folder, and the source's own record).

A folder without one holds *user features* (e.g. the public S3D files, as downloaded). Folders
written before these records are recognised by their older manifests
(``../synthetic_manifest.json``, ``extraction.json``).

:func:`feature_provenance` reads the record and adds the folder's *fingerprint*
(:func:`folder_fingerprint`), cheap by design: sha256 over the sorted feature file names and
sizes plus the full contents of :data:`SAMPLED_FILES` files sampled by name (the sample is the
same for the same names). It changes when a file is added, removed, renamed or resized, or
when a sampled file changes; a same-size rewrite of an unsampled file goes unnoticed. The
fingerprint recorded when the tool wrote the record is compared with today's: files changed
since are said so in the label.

The results row keeps the record (``ResultRow.features``, :func:`row_features`): ``kind``,
``label`` (what tables and figures print), ``fingerprint``, ``folder`` and the details.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from ..config_types import PathLike, checked_arguments

PROVENANCE_FILE = 'provenance.json'
LEGACY_SYNTHETIC = 'synthetic_manifest.json'  # in the parent of features/ (before provenance)
LEGACY_EXTRACTION = 'extraction.json'  # tools/extract_features.py's resume guard
FEATURE_SUFFIXES = ('.npz', '.npy')
SAMPLED_FILES = 8
FINGERPRINT_METHOD = (f'sha256 of the sorted feature file names and sizes and of the contents '
                      f'of {SAMPLED_FILES} files sampled by name')
KINDS = ('synthetic', 'extracted', 'random-weights', 'converted', 'user', 'none')
# a row's record may also be 'mixed' (a union of folders of several kinds, :func:`combine`)
UNUSABLE_KINDS = ('random-weights',)
_CACHE: dict = {}


@checked_arguments
def feature_files(folder: PathLike) -> list:
    """The feature files of ``folder`` (``*.npz`` / ``*.npy``, hidden files aside), sorted."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f'feature folder {folder} does not exist')
    return sorted(p for p in folder.iterdir()
                  if p.suffix in FEATURE_SUFFIXES and not p.name.startswith('.') and p.is_file())


def folder_fingerprint(folder) -> dict:
    """``{'fingerprint': 16 hex digits, 'files': count, 'bytes': total}`` of a feature folder
    (:data:`FINGERPRINT_METHOD`; the module docstring says what it sees and what it does
    not). Cached per process while names, sizes and modification times stay the same."""
    files = feature_files(folder)
    stats = [(p.name, p.stat()) for p in files]
    listing = tuple((name, st.st_size, st.st_mtime_ns) for name, st in stats)
    key = (str(Path(folder).resolve()), listing)
    if key not in _CACHE:
        digest = hashlib.sha256()
        for name, size, _ in listing:
            digest.update(f'{name}\0{size}\n'.encode())
        for path in sampled_files(files):
            with open(path, 'rb') as handle:
                for block in iter(lambda: handle.read(1 << 20), b''):
                    digest.update(block)
        if len(_CACHE) > 64:  # a process reads a few folders; listings change rarely
            _CACHE.clear()
        _CACHE[key] = dict(fingerprint=digest.hexdigest()[:16], files=len(files),
                           bytes=sum(size for _, size, _ in listing))
    return dict(_CACHE[key])


def _sample_order(path: Path) -> str:
    return hashlib.sha1(path.name.encode()).hexdigest()


def sampled_files(files) -> list:
    """The :data:`SAMPLED_FILES` of ``files`` whose contents a fingerprint reads (chosen by
    name: the same names give the same sample)."""
    return sorted(files, key=_sample_order)[:SAMPLED_FILES]


@checked_arguments
def write_provenance(folder: PathLike, record: dict) -> Path:
    """Write ``<folder>/provenance.json``: ``record`` (``kind`` and what made the files) and
    the folder's fingerprint as it is now; atomic (temporary file + rename)."""
    if record.get('kind') not in KINDS:
        raise ValueError(f'provenance kind {record.get("kind")!r}; expected one of {KINDS}')
    folder = Path(folder)
    content = dict(record, **{f'recorded_{k}': v for k, v in folder_fingerprint(folder).items()})
    path = folder / PROVENANCE_FILE
    temporary = path.with_name(f'.{PROVENANCE_FILE}.{os.getpid()}.partial')
    temporary.write_text(json.dumps(content, indent=1, sort_keys=True, default=str) + '\n')
    os.replace(temporary, path)
    return path


@checked_arguments
def read_record(folder: PathLike) -> dict:
    """The folder's provenance record: ``provenance.json``, else an older manifest, else
    ``{'kind': 'user'}``; a damaged record is an error naming the file."""
    folder = Path(folder)
    path = folder / PROVENANCE_FILE
    if path.is_file():
        record = _json(path)
        if record.get('kind') not in KINDS:
            raise ValueError(f'{path}: field "kind" = {record.get("kind")!r}; expected one of '
                             f'{KINDS}')
        return record
    legacy = folder.parent / LEGACY_SYNTHETIC
    if folder.name == 'features' and legacy.is_file():
        return dict(_json(legacy), kind='synthetic', generator='make_synthetic_features.py',
                    record_file=str(legacy))
    if (folder / LEGACY_EXTRACTION).is_file():
        settings = _json(folder / LEGACY_EXTRACTION)
        random = settings.get('weights') == 'random'
        return dict(kind='random-weights' if random else 'extracted', **settings,
                    record_file=str(folder / LEGACY_EXTRACTION))
    return {'kind': 'user'}


def _json(path: Path) -> dict:
    try:
        record = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f'{path}: not a readable provenance record ({error})') from None
    if not isinstance(record, dict):
        raise ValueError(f'{path}: holds {type(record).__name__}; expected a JSON object')
    return record


@checked_arguments
def feature_provenance(folder: PathLike) -> dict:
    """A row's ``features`` record of one folder: ``kind``, ``label``, ``folder``,
    ``fingerprint``, ``files`` and the record's details (module docstring)."""
    folder = Path(folder)
    record = read_record(folder)
    found = folder_fingerprint(folder)
    recorded = record.get('recorded_fingerprint')
    changed = recorded is not None and recorded != found['fingerprint']
    label = f'{describe(record)}, fingerprint {found["fingerprint"]} ({found["files"]} files)'
    if changed:
        label += f'; files changed since the record was written (then {recorded})'
    details = {k: v for k, v in record.items() if not k.startswith('recorded_')}
    return dict(details, kind=record['kind'], label=label, folder=str(folder.resolve()),
                fingerprint=found['fingerprint'], files=found['files'],
                **({'changed_since_record': True} if changed else {}))


def describe(record: dict) -> str:
    """The words for a record's kind (the label before its fingerprint)."""
    kind = record['kind']
    if kind == 'synthetic':
        settings = ', '.join(f'{name} {record[name]}' for name in ('seed', 'difficulty')
                             if name in record)
        return f'synthetic ({record.get("generator", "make_synthetic_features.py")}' + \
            (f': {settings})' if settings else ')')
    if kind == 'random-weights':
        return 'UNUSABLE: S3D with random weights (pipeline check only)'
    if kind == 'extracted':
        weights = record.get('weights', '?')
        digest = record.get('weights_sha256')
        return (f'extracted ({record.get("network", "S3D")}, weights {weights}'
                + (f' sha256 {digest[:16]}' if digest else ', weights hash not recorded')
                + f', recipe {_recipe_text(record.get("recipe"))})')
    if kind == 'converted':
        source = record.get('source') or {}
        inner = describe(source) if source.get('kind') in KINDS else 'user features'
        return f'converted from {record.get("source_folder", "?")} ({inner})'
    if kind == 'none':
        return record.get('description', 'no features read')
    return 'user features'


DEFAULT_RECIPE = dict(fps=16.0, crop='center', size=224, jpeg_quality=95, chunk=16)  # P3IV


def _recipe_text(recipe) -> str:
    if not isinstance(recipe, dict):
        return 'not recorded'
    if recipe == DEFAULT_RECIPE:
        return 'P3IV default'
    return ' '.join(f'{k}={v}' for k, v in sorted(recipe.items()))


def file_sha256(path) -> str:
    """sha256 of a whole file (e.g. the S3D weights an extraction used)."""
    digest = hashlib.sha256()
    with open(path, 'rb') as handle:
        for block in iter(lambda: handle.read(1 << 20), b''):
            digest.update(block)
    return digest.hexdigest()


# ---------------------------------------------------------------- a dataset's folders
def dataset_feature_dirs(dataset) -> list:
    """The feature folders a built dataset reads: ``feature_dir`` of a ``PlanningDataset``,
    those of every part of a ``ConcatPlanningDataset`` (``parts``)."""
    parts = getattr(dataset, 'parts', None)
    if isinstance(parts, dict):
        return [d for part in parts.values() for d in dataset_feature_dirs(part)]
    folder = getattr(dataset, 'feature_dir', None)
    return [] if folder is None else [Path(folder)]


def dataset_data_roots(dataset) -> list:
    """The annotation roots a built dataset reads (absolute, each once): ``data_root`` of a
    ``PlanningDataset`` after ``--data-root`` / the config / the environment, those of every
    part of a ``ConcatPlanningDataset``; what a tool's records name, so that a reader can
    tell which annotations were scored."""
    parts = getattr(dataset, 'parts', None)
    if isinstance(parts, dict):
        return list(dict.fromkeys(r for part in parts.values() for r in dataset_data_roots(part)))
    root = getattr(dataset, 'data_root', None)
    return [] if root is None else [os.path.abspath(root)]


def data_root_record(dataset):
    """:func:`dataset_data_roots` as a record: one root as a text, several as a list, none
    as ''."""
    roots = dataset_data_roots(dataset)
    return roots[0] if len(roots) == 1 else roots or ''


def folders_provenance(folders) -> dict:
    """One ``features`` record of the folders a run read: the folder's record, or for
    several (a union dataset) ``kind`` the shared kind (``random-weights`` when any is,
    else ``mixed``), ``label`` joining theirs and ``parts``."""
    records = [feature_provenance(f) for f in dict.fromkeys(map(str, folders))]
    if not records:
        return {}
    if len(records) == 1:
        return records[0]
    return combine(records)


def combine(records: list) -> dict:
    """One record of several (folders of a union dataset, datasets of an averaged row)."""
    kinds = {r.get('kind', '') for r in records}
    kind = next(iter(kinds)) if len(kinds) == 1 else (
        'random-weights' if 'random-weights' in kinds else 'mixed')
    return dict(kind=kind, label='; '.join(dict.fromkeys(r.get('label', 'not recorded')
                                                          for r in records)),
                fingerprint='+'.join(r.get('fingerprint', '?') for r in records),
                parts=records)


def run_features(train, test: dict) -> dict:
    """A row's record from the training's and the test's: the test's, and ``trained_on``
    (with the label saying so) when the training read other features or did not record
    them (``{}``: a training finished before they were recorded); ``train`` ``None``: no
    training (a planner without one)."""
    if train is None or train.get('fingerprint') == test.get('fingerprint'):
        return test
    if not train:
        train = dict(kind='', label='features not recorded')
    return dict(test, trained_on=train,
                label=f'trained on {train.get("label")}; tested on {test.get("label")}')
