"""Convert per-video feature files of any public layout to our ``.npz`` layout, once.

    python tools/convert_features.py --src /path/to/processed_data --dst data/crosstask/features

Every ``*.npy`` / ``*.npz`` file in ``--src`` (raw pickled dicts named ``.npy``, ``np.savez`` archives, ``.npy``
object or plain arrays; see vpn_plugin/datasets/features.py) becomes ``<dst>/<stem>.npz``
holding ``frames_features`` (seconds, D) and every other non-object field of the file. The
files are read without running any code from them: a pickle naming anything but numpy
arrays, numbers and strings is refused. The public files also load as they are; converting
saves the unpickling at every cache rebuild. Other files (a README) are skipped by name and
counted. Prints a summary (converted, kept, refused with reasons, skipped) and exits 1 when a
file was refused. One conversion into a ``--dst`` at a time: the run holds ``--dst``'s lock
(``.<dst name>.lock`` beside it, vpn_plugin/locks.py), and a second one is refused naming the
process. Each file is written to a hidden ``.<stem>.npz.partial-<host>-<pid>`` and renamed when
complete; a killed run's temporary files are removed by the next run, which says how many. ``<dst>/provenance.json`` says the folder was converted from ``--src`` and
carries the source's own record (synthetic, extracted, ...; none: user features), so results
rows trained on it name their features (vpn_plugin/datasets/provenance.py).
"""
import argparse
import glob
import os
import sys
import zipfile
from collections import Counter
from pathlib import Path

# torch and OpenMMLab are imported after the arguments are parsed (--help and refusals answer
# in ~0.1 s; tests/test_import_purity.py)
import numpy as np

from vpn_plugin.errors import (POSITIVE_INT, check_folder_target, link_problem, parse_once,
                               path_argument, path_kind, plain_text, tool_main)
from vpn_plugin.locks import exclusive_lock, lock_path_of
from vpn_plugin.outputs import check_output, same_file


def convert_file(src: Path, dst: Path, frame_dim: int) -> list:
    """One file -> ``dst`` (.npz); the frames are validated (shape, NaN/inf) first.
    Returns the names of the object fields left out."""
    from vpn_plugin.datasets.features import FEATURE_KEY, checked_frames, read_feature_record
    from vpn_plugin.video.extract import write_features_atomically
    record = read_feature_record(src, src.stem)
    frames = checked_frames(record, src, frame_dim, src.stem)
    extra, left_out = {}, []
    for key, value in record.items():
        array = np.asarray(value)
        if key == FEATURE_KEY:
            continue
        if array.dtype == object:
            left_out.append(key)
        else:
            extra[key] = array
    write_features_atomically(dst, {FEATURE_KEY: frames, **extra})  # never a partial file
    return left_out


FEATURE_SUFFIXES = ('.npy', '.npz')  # the names the datasets look for (find_feature_file)


def source_files(src: Path) -> tuple:
    """(feature files, other entries) of ``src``: a feature file is named ``*.npy`` /
    ``*.npz``; the others (a README, a listing, a subfolder, a dangling symlink) are skipped by
    name and counted, never read. Two feature files of one stem are refused (both would become
    ``<stem>.npz``: which one holds this video's features?)."""
    entries = sorted(src.iterdir())
    files = [p for p in entries if p.is_file() and p.suffix in FEATURE_SUFFIXES
             and not p.name.startswith('.')]  # a hidden file is no video's (skipped, counted)
    by_stem = {}
    for path in files:
        by_stem.setdefault(path.stem, []).append(path.name)
    twice = {stem: names for stem, names in by_stem.items() if len(names) > 1}
    if twice:
        stem, names = next(iter(twice.items()))
        raise ValueError(f'--src {src}: {len(twice)} video(s) have two feature files, e.g. '
                         f'{" and ".join(names)} (both would become {stem}.npz); expected one '
                         'feature file per video: remove the one that is not of these features; '
                         'nothing was written')
    return files, [p for p in entries if p not in files]


def check_destination(src: Path, dst: Path) -> None:
    """``--dst`` must not be ``--src`` (the npz files would sit beside their sources, two
    feature files per video, which the datasets refuse) and may hold feature files only from
    an earlier conversion of this ``--src`` (a resume): any other folder's files would be
    kept and labelled 'converted from --src' by the provenance record written over theirs
    (random-weights features would lose their UNUSABLE mark)."""
    from vpn_plugin.datasets.provenance import PROVENANCE_FILE, describe, feature_files, read_record
    check_folder_target(dst, '--dst', 'the converted .npz files', '--dst')
    if dst.is_dir() and same_file(dst, src):
        raise ValueError(f'--dst {dst}: that is an input of this command (the --src folder); '
                         'the .npz files would sit beside their sources (two feature files per '
                         'video). Choose another folder')
    held = feature_files(dst) if dst.is_dir() else []
    if not held and not (dst / PROVENANCE_FILE).is_file():
        return
    record = read_record(dst)
    if record.get('kind') == 'converted' and record.get('source_folder') == str(src.resolve()):
        return  # an earlier conversion of this --src: resumed, its files kept
    example = f' (e.g. {held[0].name})' if held else ''
    raise ValueError(f'--dst {dst} already holds {len(held)} feature file(s){example} and the '
                     f'record of {describe(record)}, not an earlier conversion of '
                     f'--src {src.resolve()}; converting into it would mix them and label every '
                     'file "converted from --src". Choose an empty or new folder; nothing was '
                     'written')


def check_outputs(files, dst: Path, overwrite: bool) -> None:
    """With ``--overwrite``, no ``<dst>/<stem>.npz`` may be a source file (``--dst`` =
    ``--src``, a link): its fields that are not arrays would be lost, and a ``<stem>.npz``
    beside ``<stem>.npy`` would be replaced by the other's conversion. Checked before any file
    is written (vpn_plugin/outputs.py)."""
    if not overwrite:
        return  # existing outputs are kept, never written
    by_stem = {}
    for src in files:
        by_stem.setdefault(src.stem, []).append(src)
    for stem, sources in by_stem.items():
        check_output(dst / f'{stem}.npz', 'features', '--dst', sources, overwrite=True)


def remove_stale_partials(files, dst: Path) -> list:
    """The temporary files (``.<stem>.npz.partial-*``, vpn_plugin/video/extract.py's
    ``write_features_atomically``) that a killed conversion left in ``dst`` for the stems of
    ``files``, removed; returns their names. Called under ``--dst``'s lock: no other
    conversion is writing them."""
    removed = []
    for stem in sorted({src.stem for src in files}):
        for stale in sorted(dst.glob(f'.{glob.escape(stem)}.npz.partial-*')):
            stale.unlink(missing_ok=True)
            removed.append(stale.name)
    return removed


def stored_frames_shape(path: Path) -> tuple:
    """The shape of ``frames_features`` in a converted ``.npz``, from its header (the array is
    not read)."""
    from vpn_plugin.datasets.features import FEATURE_KEY
    with zipfile.ZipFile(path) as archive, archive.open(f'{FEATURE_KEY}.npy') as member:
        version = np.lib.format.read_magic(member)
        read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                       else np.lib.format.read_array_header_2_0)
        return tuple(read_header(member)[0])


def check_kept(out: Path, frame_dim: int) -> None:
    """A ``<stem>.npz`` kept from an earlier run must hold frames of ``--frame-dim``: a rerun
    with another ``--frame-dim`` would otherwise keep every file of the other dimension and
    exit 0 (``BadVideoError``, reason 'kept file of another dimension')."""
    from vpn_plugin.datasets.annotations import BadVideoError
    try:
        shape = stored_frames_shape(out)
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as error:
        raise BadVideoError(out.stem, 'kept file unreadable',
                            f'{out}: kept from an earlier run but unreadable ({error}); pass '
                            '--overwrite to convert it again') from None
    if len(shape) != 2 or shape[1] != frame_dim:
        raise BadVideoError(out.stem, 'kept file of another dimension',
                            f'{out}: kept from an earlier run, holds frames of shape {shape}; '
                            f'--frame-dim {frame_dim} expects (seconds, {frame_dim}): convert '
                            'into a new --dst, or pass --overwrite to convert it again')


def convert_all(files, dst: Path, frame_dim: int, overwrite: bool) -> dict:
    """Convert every file into ``dst`` (checked and made by ``main``); returns counts and the
    refusal messages by reason."""
    from vpn_plugin.datasets.annotations import BadVideoError  # (compat fixes first)
    from mmengine.utils import ProgressBar
    counts, refused, bar = Counter(), {}, ProgressBar(len(files), file=sys.stderr)
    left_out = []  # (file name, field) of each object field left out
    for src in files:
        out = dst / f'{src.stem}.npz'
        if out.exists() and not overwrite:
            try:
                check_kept(out, frame_dim)
                counts['kept'] += 1
            except BadVideoError as err:
                counts['refused'] += 1
                refused.setdefault(err.reason, []).append(str(err))
        else:
            try:
                fields = convert_file(src, out, frame_dim)
                left_out += [(src.name, field) for field in fields]
                counts['object fields left out'] += len(fields)
                counts['converted'] += 1
            except BadVideoError as err:
                counts['refused'] += 1
                refused.setdefault(err.reason, []).append(str(err))
        bar.update()
    print(file=sys.stderr)
    return dict(counts=counts, refused=refused, left_out=left_out)


def print_summary(result: dict, dst: Path, removed=()) -> None:
    counts = result['counts']
    if removed:
        print(f'removed {len(removed)} temporary file(s) that a stopped conversion left in '
              f'{plain_text(dst)} (e.g. {plain_text(removed[0])})')
    print(f'converted {counts["converted"]} files, kept {counts["kept"]} existing .npz (use '
          f'--overwrite), refused {counts["refused"]} -> {plain_text(dst)}')
    if counts['object fields left out']:
        left_out = result.get('left_out') or []
        named = ', '.join(f'{name}: field "{field}"' for name, field in left_out[:5])
        print(f'left out {counts["object fields left out"]} object fields (not arrays): '
              f'{named}{", ..." * (len(left_out) > 5)}')
    for reason, messages in sorted(result['refused'].items()):
        print(f'  refused ({reason}): {len(messages)} files, e.g. {messages[0]}')
    orphans = result.get('orphans') or []
    if orphans:
        print(f'warning: {plain_text(dst)} holds {len(orphans)} feature file(s) with no source in '
              f'--src any more (e.g. {plain_text(orphans[0])}), converted by an earlier run from '
              'a file since removed or renamed: they are read as features of these videos; '
              'remove them if their sources were removed on purpose')


def skipped_listing(others) -> None:
    """Print what ``--src`` holds besides feature files: files by name, then entries that are
    no file (a subfolder is not read; a dangling link)."""
    def listing(paths, show):
        return ', '.join(plain_text(show(p)) for p in paths[:5]) + (', ...' if len(paths) > 5
                                                                     else '')
    hidden = [p for p in others if p.name.startswith('.')]
    if hidden:
        print(f'skipped {len(hidden)} hidden entries (names starting with ".": no video\'s '
              'features): ' + listing(hidden, lambda p: p.name))
    others = [p for p in others if not p.name.startswith('.')]
    files = [p for p in others if p.is_file()]
    if files:
        print(f'skipped {len(files)} files not named *.npy / *.npz (not feature files): '
              + listing(files, lambda p: p.name))
    rest = [p for p in others if not p.is_file()]
    if rest:
        print(f'skipped {len(rest)} entries that are not files (a subfolder is not read; a '
              'dangling link or a loop of links has no file): ' + listing(rest, entry_kind))


def entry_kind(path: Path) -> str:
    """A skipped entry's name with what it is: ``sub/``, ``x.npy (dangling link)``, ``x.npy
    (loop of links)``, ``x.npy (not a regular file)`` (a FIFO, a socket, a device)."""
    if path.is_dir():
        return path.name + '/'
    if link_problem(path):
        return f'{path.name} ({link_problem(path)})'
    return path.name + ' (not a regular file)'


def convert_locked(src: Path, dst: Path, args) -> tuple:
    """(result, removed temporary files, skipped entries): the checks and the conversion,
    under ``--dst``'s lock (module docstring)."""
    from vpn_plugin.datasets.provenance import feature_files, read_record, write_provenance
    check_destination(src, dst)
    files, others = source_files(src)
    if not files:
        raise FileNotFoundError(f'--src {src}: no feature files there (expected a folder of '
                                '<task>_<vid>.npy/.npz files' + (
                                    f'; it holds {len(others)} other files, e.g. '
                                    f'{others[0].name}' if others else '') + ')')
    # the record first: a run stopped part-way (a full disk, a kill) is then an earlier
    # conversion of this --src, which the next run resumes (check_destination)
    check_outputs(files, dst, args.overwrite)
    Path(os.path.realpath(dst)).mkdir(parents=True, exist_ok=True)  # a dangling link: its target
    removed = remove_stale_partials(files, dst)
    record = dict(kind='converted', tool='convert_features.py',
                  source_folder=str(src.resolve()), source=read_record(src))
    write_provenance(dst, record)
    result = convert_all(files, dst, args.frame_dim, args.overwrite)
    write_provenance(dst, record)  # again: its fingerprint of the files now there
    result['orphans'] = [p.name for p in feature_files(dst)
                         if p.stem not in {src.stem for src in files}]
    return result, removed, others


@tool_main
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--src', type=path_argument,
                        required=True, help='folder of feature files (any layout)')
    parser.add_argument('--dst', type=path_argument,
                        required=True, help='output folder for .npz files')
    parser.add_argument('--frame-dim', type=POSITIVE_INT, default=512)
    parser.add_argument('--overwrite', action='store_true')
    args = parse_once(parser, argv)
    src, dst = Path(args.src), Path(args.dst)
    if not src.is_dir():
        kind = path_kind(src)
        raise FileNotFoundError(f'--src {src}: ' + ('does not exist' if kind is None else
                                                    f'is {kind}, not a folder') +
                                '; expected a folder of <task>_<vid>.npy/.npz files')
    check_destination(src, dst)  # before the lock file is made beside --dst; again under it
    with exclusive_lock(lock_path_of(dst), wait=False, what=f'--dst {dst} (a conversion)',
                        discard_if_refused=True):
        result, removed, others = convert_locked(src, dst, args)
    print_summary(result, dst, removed)
    skipped_listing(others)
    return 1 if result['counts']['refused'] else 0


if __name__ == '__main__':
    sys.exit(main())
