"""Where a tool may write: the one rule of every output flag of ``tools/`` (docs/usage.md,
"Output files").

:func:`check_output` runs before a tool computes anything. An output path is refused
(``ValueError`` naming the flag, the path and the reason; exit status 1, nothing written) when

* it is empty, ends in ``/``, or names something that is not a plain file: a folder, a device
  or a FIFO (``/dev/stdout``: an atomic write would replace the device link itself);
* it is one of the command's inputs: the same file, also through a symlink, a hard link or
  another relative path. No flag allows this (the input would be gone before it was read);
* its name does not end in a suffix its format needs (``--save-features x.txt`` would be an
  npz named ``.txt``); a suffix is compared without case (:func:`has_suffix`: ``X.JSONL`` is a
  ``.jsonl``), by every tool and reader;
* it exists and is not recognisably an earlier output of this kind (another checkpoint, a
  video, someone's ``mine.md``), unless ``--overwrite`` is given;
* it is a symbolic link, unless ``--overwrite`` is given (then the link's target is written, as
  a shell redirection would, the link kept): its target has another name, e.g. an earlier
  report whose ``.tex`` would then disagree with the ``.md`` written through the link.
  Refused rather than the link replaced: the link is the user's, and where it points is
  theirs to change.

A tool recognises its own earlier output by its content, never by its name (:data:`KINDS`):
a marker it writes where the format has room for one (report tables, figures, converted
checkpoints, the synthetic-feature manifest), or a format no input of the tools has (a metrics
JSON of numbers, a pickled prediction list, an extracted-feature npz with its ``usable``
flag, a results file). Formats that others' files share (a window file, a text-feature
``.npy``) are never recognised: an existing file needs ``--overwrite``.

Pure Python (standard library only).
"""
from __future__ import annotations

import json
import math
import os
import re
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Optional

from .errors import file_on_the_way, json_lines

OVERWRITE_FLAG = '--overwrite'
MARKER_BYTES = 1 << 20  # how far into a file a marker is looked for (they sit near the top)
# markers written by the tools whose formats have room for one
REPORT_MARKDOWN_MARKER = '<!-- written by tools/report.py -->'
REPORT_LATEX_MARKER = '% written by tools/report.py'
FIGURE_MARKER = 'vpn_plugin tools/plots.py'  # PNG/PDF metadata 'Creator'
OVERLAP_TABLE_MARKER = '<!-- written by tools/plots.py overlap -->'
CONVERTED_MARKER = 'tools/convert_authors_checkpoint.py'  # meta.converted_by of a checkpoint


# ---------------------------------------------------------------- Markdown of the user's names
_MARKDOWN_SPECIAL = re.compile(r'[\\`*<>~$&]|\](?=[(\[])|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])')
# a line end as CommonMark, TeX and matplotlib's text all end a line: \n, \r\n and a lone \r
LINE_BREAK = re.compile(r'\r\n|\r|\n')


def markdown_text(text: str) -> str:
    """``text`` (a name of the user's: method, title, caption) as Markdown text, never markup:
    ``*VPN*`` stays ``*VPN*`` (not italic), ``<b>`` is no HTML, ``[a](b)`` no link, ``&amp;``
    no entity (it would show as ``&``); an ``_`` inside a word (``max_epochs``) and brackets not
    followed by ``(`` / ``[`` (``gpt [oracle]``), which mark up nothing, are kept as they are;
    ``$k$`` is no math (GitHub renders it); a line break is ``<br>`` (a raw one in a caption
    cut it into paragraphs, or made its tail a heading: a method named ``x\\n# y``), as in a
    cell. The one escape of every Markdown table written."""
    escaped = _MARKDOWN_SPECIAL.sub(lambda match: '\\' + match.group(0), text)
    return LINE_BREAK.sub('<br>', escaped)


def markdown_row(cells) -> str:
    """One table row; a ``|`` or a line break (``\\n``, ``\\r``: CommonMark ends a line at
    either) inside a cell (a method named ``A|B``) is escaped so that the row keeps its
    columns."""
    return '| ' + ' | '.join(LINE_BREAK.sub('<br>', str(cell).replace('|', r'\|'))
                             for cell in cells) + ' |'


MONEY_EXACT_BELOW = 1e13  # 15 digits before the point + 2 decimals: a float's precision


def money_text(value: float) -> str:
    """A cost for a table or a summary line: two decimals ('11.56'), or two significant digits
    for a non-zero amount below half a cent ('0.00033', never a false '0.00'); from 1e13 on
    (where two decimals would print digits a float does not hold) 15 significant digits
    ('1.2e+28', never '11999999999999999059939033088.00')."""
    value = float(value)
    if math.isfinite(value) and abs(value) >= MONEY_EXACT_BELOW:
        return f'{value:.15g}'
    if value == 0 or not math.isfinite(value) or abs(value) >= 0.005:
        return f'{value:.2f}'
    return f'{value:.{1 - math.floor(math.log10(abs(value)))}f}'


def _head(path: Path, size: int = MARKER_BYTES) -> bytes:
    with open(path, 'rb') as handle:
        return handle.read(size)


def contains(marker: str) -> Callable[[Path], bool]:
    """An existing file is ours when its first MiB holds ``marker``."""
    def recognise(path: Path) -> bool:
        return marker.encode() in _head(path)
    return recognise


def json_matching(predicate: Callable[[object], bool]) -> Callable[[Path], bool]:
    """Ours when the file is JSON whose value satisfies ``predicate``."""
    def recognise(path: Path) -> bool:
        try:
            return bool(predicate(json.loads(path.read_text())))
        except (ValueError, UnicodeDecodeError):
            return False
    return recognise


def zip_members(*names: str, marker: Optional[str] = None) -> Callable[[Path], bool]:
    """Ours when the file is a zip archive (npz, torch checkpoint) holding members ending in
    each of ``names``; with ``marker``: and one of those members holds it."""
    def recognise(path: Path) -> bool:
        try:
            with zipfile.ZipFile(path) as archive:
                members = archive.namelist()
                found = [next((m for m in members if m.endswith(name)), None) for name in names]
                if None in found:
                    return False
                return marker is None or any(marker.encode() in archive.read(m)
                                             for m in found)
        except (zipfile.BadZipFile, OSError, KeyError):
            return False
    return recognise


def pickled_list(path: Path) -> bool:
    """A pickle whose top-level object is a list (mmengine's ``dump`` of the predictions:
    the PROTO opcode, then EMPTY_LIST, after a FRAME header from protocol 4 on)."""
    head = _head(path, 16)
    if len(head) < 3 or head[0] != 0x80:
        return False
    return head[2:3] == b']' or (head[2] == 0x95 and head[11:12] == b']')


def never(path: Path) -> bool:
    """Formats others' files share: an existing file is never taken for ours."""
    return False


# the notes tools/test.py writes beside the numbers (a string or a list of strings each)
METRICS_NOTES = ('shortened', 'changed_from_training', 'not_compared', 'feature_statistics',
                 'test_windows', 'damaged_features', 'reduced_precision', 'sample_draw',
                 'test_set_pkg', 'data_root')
# the horizons it names (tools/test.py tested_horizons): test windows' and training's T
METRICS_HORIZONS = ('horizon', 'train_horizon')


def _metrics(value) -> bool:
    """mmengine's metrics: ``{'<prefix>/<name>': number}`` (``plan/success_rate``), with the
    notes of :data:`METRICS_NOTES` when there are (``'shortened': <why>`` for
    ``tools/test.py --limit`` or a smoke checkpoint, ``not_compared``, ...) and the horizons
    of :data:`METRICS_HORIZONS` (whole numbers)."""
    def note(v) -> bool:
        return isinstance(v, str) or (isinstance(v, list) and all(isinstance(i, str) for i in v))
    return isinstance(value, dict) and bool(value) and all(
        (k in METRICS_NOTES and note(v))
        or (k in METRICS_HORIZONS and isinstance(v, int) and not isinstance(v, bool)) or (
            isinstance(k, str) and '/' in k and isinstance(v, (int, float))
            and not isinstance(v, bool)) for k, v in value.items())


def json_objects(path: Path) -> bool:
    """A JSON object, or JSON lines of objects (a run's summary, outcomes, per-sample dump)."""
    try:
        lines = [line for line in json_lines(path.read_text()) if line.strip()]
        try:
            return isinstance(json.loads('\n'.join(lines)), dict)
        except ValueError:
            return bool(lines) and all(isinstance(json.loads(line), dict) for line in lines)
    except (ValueError, UnicodeDecodeError):
        return False


def results_rows_problem(path: Path) -> str:
    """'' for a ``.jsonl`` results file (vpn_plugin/protocol/results.py): every line a JSON
    object with a method and its metrics (empty: a file just created); else what is not
    (``line 2 is not JSON (...)``: an interrupted copy of a file of our rows is named so)."""
    try:
        lines = json_lines(path.read_text())
    except UnicodeDecodeError as error:
        return f'it is not UTF-8 text ({error.reason} at byte {error.start})'
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as error:
            return f'line {number} is not JSON ({error})'
        if not (isinstance(row, dict) and {'method', 'metrics'} <= set(row)):
            return f'line {number} is not a results row (a JSON object with method and metrics)'
    return ''


def results_rows(path: Path) -> bool:
    """A ``.jsonl`` results file (:func:`results_rows_problem`)."""
    return not results_rows_problem(path)


def name_suffix(path) -> str:
    """The extension of ``path``'s name in lower case (``X.JSONL`` -> ``.jsonl``): the one
    rule by which a tool tells a file's format from its name (:func:`has_suffix`)."""
    return Path(str(path)).suffix.lower()


def has_suffix(path, suffixes: Iterable[str]) -> bool:
    """``path``'s name ends in one of ``suffixes``, case aside (``X.NPY`` is an ``.npy``)."""
    return str(path).lower().endswith(tuple(suffix.lower() for suffix in suffixes))


@dataclass(frozen=True)
class OutputKind:
    """What a tool writes to one output flag: words for messages, the name endings the format
    needs (empty: any), and how an existing file is recognised as an earlier one of ours."""
    what: str
    suffixes: tuple = ()
    recognise: Callable[[Path], bool] = field(default=never)
    problem: Optional[Callable[[Path], str]] = None  # why a file is not one (for the message)


KINDS = {
    'metrics': OutputKind('metrics JSON of tools/test.py', ('.json',),
                          json_matching(_metrics)),
    'predictions': OutputKind('predictions pickle of tools/test.py', ('.pkl', '.pickle'),
                              pickled_list),
    'features': OutputKind('feature npz of tools/plan.py or tools/extract_features.py',
                           ('.npz',), zip_members('frames_features.npy', 'usable.npy')),
    'report_markdown': OutputKind('Markdown table of tools/report.py', ('.md',),
                                  contains(REPORT_MARKDOWN_MARKER)),
    'report_latex': OutputKind('LaTeX table of tools/report.py', ('.tex',),
                               contains(REPORT_LATEX_MARKER)),
    'figure': OutputKind('figure of tools/plots.py', ('.png', '.pdf'), contains(FIGURE_MARKER)),
    'overlap_table': OutputKind('overlap table of tools/plots.py', ('.md',),
                                contains(OVERLAP_TABLE_MARKER)),
    'converted_checkpoint': OutputKind('checkpoint of tools/convert_authors_checkpoint.py',
                                       ('.pth',), zip_members('data.pkl',
                                                              marker=CONVERTED_MARKER)),
    'window_file': OutputKind('window file', ('.json',)),
    'text_features': OutputKind('text-feature array', ('.npy',)),
    'synthetic_manifest': OutputKind('manifest of tools/make_synthetic_features.py', ('.json',),
                                     json_matching(lambda info: isinstance(info, dict) and {
                                         'difficulty', 'params', 'seed'} <= set(info))),
    'converted_dataset': OutputKind('dataset file of tools/convert_egoper.py (recognised by '
                                    'the conversion.json beside it)'),
    'anchors': OutputKind('anchors JSON of tools/llm_eval.py', ('.json',), json_matching(
        lambda value: isinstance(value, dict) and set(value) == {'first', 'last'})),
    'results': OutputKind('results file (JSON lines)', ('.jsonl',), results_rows,
                          results_rows_problem),
    'llm_side_file': OutputKind('per-run file of tools/llm_eval.py', (), json_objects),
    'per_sample': OutputKind('per-sample scores JSON of PlanningMetric', ('.json',),
                             json_matching(lambda value: isinstance(value, dict) and {
                                 'metrics', 'sample_idx', 'pred_plan', 'gt_plan'} <= set(value))),
}


def same_file(a: Path, b: Path) -> bool:
    """``a`` and ``b`` are one file (symlinks, hard links, relative paths resolved)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


SYSTEM_FOLDERS = ('/dev', '/proc', '/sys')  # devices and process files, never an output


def check_output(path, kind: str, flag: str, inputs: Iterable = (), overwrite: bool = False,
                 overwrite_flag: str = OVERWRITE_FLAG, exists_advice: str = '') -> Path:
    """The file to write a ``kind`` (:data:`KINDS`) to for the output flag ``flag`` given
    ``path`` (rules: module docstring), else ``ValueError`` naming ``flag``, the path and the
    reason. A symlink is refused unless ``overwrite`` (then it gives its target: written in
    place of the target, as a shell redirection would; the link stays). ``inputs``: every
    file the command reads (``None`` is skipped); ``exists_advice``: what to do about an
    existing file of another kind or a link, where no ``overwrite_flag`` exists (default:
    another name or that flag)."""
    output = KINDS[kind]
    text = '' if path is None else str(path)
    if not text.strip():
        raise ValueError(f'{flag} {text!r}: an empty path; expected a file name')
    if text.endswith(os.sep):
        raise ValueError(f'{flag} {text}: ends in {os.sep!r} (a folder); expected a file name '
                         f'for the {output.what}')
    target = Path(os.path.realpath(text))
    for source in inputs:
        if source is not None and str(source) and same_file(target, Path(str(source))):
            shown = '' if str(source) == text else f' ({source})'
            raise ValueError(f'{flag} {text}: that is an input of this command{shown}; it '
                             f'would be replaced by the {output.what} before or while it is '
                             'read. Choose another file name')
    other = _kind_of_existing(Path(os.path.abspath(text))) or _kind_of_existing(target)
    if other:
        raise ValueError(f'{flag} {text}: is {other}; expected a file name for the '
                         f'{output.what} (written to a temporary file beside it, then renamed '
                         'into place)')
    folder = file_on_the_way(target)
    if folder is not None:
        raise ValueError(f'{flag} {text}: {folder} is a file, not a folder to write into')
    if output.suffixes and not has_suffix(text, output.suffixes):
        raise ValueError(f'{flag} {text}: expected a file name ending in '
                         f'{" or ".join(output.suffixes)} (the {output.what}); nothing is '
                         'written under another extension')
    if target.exists() and not overwrite and not _recognised(output, target):
        why = (f'files of its kind ({output.what}) are never taken for an earlier output '
               '(others\' files share the format)' if output.recognise is never else
               f'it is not recognisably an earlier output of this kind ({output.what}'
               f'{_problem_text(output, target)}); another checkpoint, video or document '
               'would be lost')
        advice = exists_advice or f'choose another name, or pass {overwrite_flag} to replace it'
        link = (f' (a symbolic link to {target}: that file would be replaced, the link kept)'
                if os.path.islink(text) else '')
        raise ValueError(f'{flag} {text}{link}: the file exists and {why}; {advice}')
    if os.path.islink(text) and not overwrite:
        advice = exists_advice or (f'give the file\'s own name, remove the link, or pass '
                                   f'{overwrite_flag} to write into {target}')
        raise ValueError(f'{flag} {text}: a symbolic link to {target}; an output is written '
                         f'through a link only when asked: the file of the other name would be '
                         'replaced (an earlier output of its own: its other files, e.g. a '
                         "table's .tex beside its .md, would no longer agree with it); "
                         f'{advice}')
    return target if os.path.islink(text) else path


WRITTEN_KEYS = ('work_dir', 'cache_dir', 'out_file', 'out_dir', 'save_dir')  # a config's outputs


def config_inputs(config, key: str = '') -> Iterable:
    """``(key, path)`` of every string of ``config`` (a dict, at any depth) that names an
    existing file or folder, except the places it writes (:data:`WRITTEN_KEYS`)."""
    if isinstance(config, dict):
        for name, value in config.items():
            if str(name) not in WRITTEN_KEYS:
                yield from config_inputs(value, f'{key}.{name}' if key else str(name))
    elif isinstance(config, (list, tuple)):
        for index, value in enumerate(config):
            yield from config_inputs(value, f'{key}[{index}]')
    elif isinstance(config, str) and os.path.isabs(config) and config != os.sep \
            and os.path.exists(config):
        yield key, config


def check_spares_config_inputs(path, kind: str, flag: str, config) -> None:
    """An existing ``path`` that is not an earlier output of ``kind`` may not be a file the
    config reads, nor lie inside a folder it reads (its data root, feature folder): with
    ``--overwrite``, ``test.py --out-metrics <data root>/niv/taxonomy.json`` replaced the
    taxonomy the test had just read. ``ValueError`` naming the flag, the key and the path;
    no flag allows it."""
    if path is None or not os.path.isfile(str(path)):
        return
    target = Path(os.path.realpath(str(path)))
    if _recognised(KINDS[kind], target):
        return
    read = input_reading(target, config)
    if read:
        raise ValueError(f'{flag} {path}: is {read[1]} this command reads ({read[0]}); it '
                         f'would be replaced by the {KINDS[kind].what}. Choose a file name '
                         'outside its inputs')


def input_reading(path, config) -> Optional[tuple]:
    """``(key, 'a file' | 'inside <folder>, a folder')`` of the input of ``config``
    (:func:`config_inputs`) that is the file ``path`` or a folder holding it; None when none
    is."""
    target = Path(os.path.realpath(str(path)))
    for key, source in config_inputs(config):
        folder = os.path.isdir(source)
        inside = folder and os.path.commonpath([str(target), os.path.realpath(source)]) \
            == os.path.realpath(source)
        if inside or (not folder and same_file(target, Path(source))):
            return key, f'inside {source}, a folder' if inside else 'a file'
    return None


def _kind_of_existing(target: Path) -> str:
    """'' when ``target`` (as given, or resolved) may be written: absent or a plain file,
    outside the system folders; else what it is."""
    if any(target == Path(folder) or Path(folder) in target.parents
           for folder in SYSTEM_FOLDERS):
        return f'a device or process file (under {target.parts[0]}{target.parts[1]})'
    try:
        mode = os.stat(target).st_mode
    except (FileNotFoundError, NotADirectoryError):  # absent (a folder of it may be a file)
        return ''
    if stat.S_ISREG(mode):
        return ''
    if stat.S_ISDIR(mode):
        return 'a folder'
    if stat.S_ISFIFO(mode):
        return 'a FIFO'
    return 'not a plain file'


def _problem_text(output: OutputKind, path: Path) -> str:
    """``': <why>'`` when the kind says why ``path`` is not one of its files, else ''."""
    try:
        problem = output.problem(path) if output.problem else ''
    except OSError:
        problem = ''
    return f': {problem}' if problem else ''


def _recognised(output: OutputKind, path: Path) -> bool:
    try:
        return output.recognise(path)
    except OSError:
        return False


# the endings of every output a stem names (report.py: .md/.tex; plots.py: .png/.pdf, and the
# overlap figure's .md): a stem given with one of them (``--out fig.png``) names the same files
STEM_SUFFIXES = ('.md', '.tex', '.png', '.pdf')


def stem_files(stem, suffixes: Iterable[str], flag: str = '--out') -> list:
    """The files ``<stem><suffix>`` an output stem names (``report.py --out docs/table``:
    ``docs/table.md`` and ``.tex``). A stem ending in one of ``suffixes`` or
    :data:`STEM_SUFFIXES` (``docs/table.md``) has it replaced; any other ending is part of the
    name (``--out table.v2`` writes ``table.v2.md``; replaced, it would be ``table.md``, the
    table of ``--out table``, overwritten). ``ValueError`` for a stem that names no file
    (empty, ``.``, ending in ``/``)."""
    text = '' if stem is None else str(stem)
    if not text.strip() or text.endswith(os.sep) or Path(text).name in ('', '.', '..'):
        raise ValueError(f'{flag} {text!r}: expected a file stem, a file name without its '
                         f'extension (it writes <stem>{"/".join(suffixes)}), not a folder or an '
                         'empty name')
    suffixes = tuple(suffixes)
    path = Path(text)
    if name_suffix(path) in (*suffixes, *STEM_SUFFIXES):
        path = path.with_suffix('')
    return [path.with_name(path.name + suffix) for suffix in suffixes]


def add_overwrite_argument(parser, what: str = 'the output files') -> None:
    """The ``--overwrite`` flag of a tool whose outputs :func:`check_output` checks."""
    parser.add_argument(OVERWRITE_FLAG, action='store_true',
                        help=f'replace {what} when they exist but are not recognisably this '
                        "tool's earlier output (never allowed: an output that is an input)")
