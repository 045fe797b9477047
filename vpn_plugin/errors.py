"""How every tool ends on bad input: one message and a non-zero exit, never a traceback.

A *user error* is an exception that bad input causes: a missing or unreadable file
(``OSError``), a value, field, shape, name or option the code refuses (``ValueError``,
``KeyError``/``IndexError``), a refused pickle (``UnpicklingError``), a config file that does
not parse (``SyntaxError``). The messages name the file, the field, the value, what was
expected and, when there is one, the fix. Every tool's ``main`` runs under
:func:`explained_errors` (or is decorated with :func:`tool_main`): such an error ends the tool
with ``error: <message>`` on stderr and exit status 1; ``VPN_TRACEBACK=1`` re-raises it with
its traceback (for debugging). A collective that failed because another process of a
distributed run stopped ends the same way, in one line that says so. Other exceptions keep
their traceback.

Pure Python (no torch / OpenMMLab import at module level; :func:`checked_device` imports torch
when called; the kind rule is :mod:`config_types`').
"""
from __future__ import annotations

import argparse
import contextlib
import difflib
import errno
import functools
import math
import os
import re
import pickle
from pathlib import Path
from typing import Annotated, Optional

from .config_types import Range, check_value

USER_ERRORS = (OSError, ValueError, LookupError, pickle.UnpicklingError, SyntaxError)
TRACEBACK_VARIABLE = 'VPN_TRACEBACK'


def describe(error: BaseException) -> str:
    """The message of ``error`` (a ``KeyError``'s without the quotes ``str`` adds)."""
    if isinstance(error, KeyError) and len(error.args) == 1 and isinstance(error.args[0], str):
        return error.args[0]
    text = str(error)
    if isinstance(error, OSError) and error.errno in FULL_DISK and not error.filename:
        target = written_file(error.__traceback__)
        return (f'{text}' + (f' (writing {target})' if target else ' (while writing a file: '
                             f'{TRACEBACK_VARIABLE}=1 shows which)')
                + '; free disk space or choose another output folder (--work-dir, --out)')
    return text if text else type(error).__name__


# what gloo / NCCL say in a collective when another process of the run died (SIGKILL, OOM,
# its own error): the failure is that process's, which its own output and torchrun's summary name
LOST_PEER_SIGNS = ('Connection closed by peer', 'Connection reset by peer', 'Broken pipe',
                   'remote worker crashing', 'NCCL communicator was aborted')


def lost_peer(error: BaseException) -> bool:
    """``error`` is a collective's failure because another process of this distributed run
    (``WORLD_SIZE`` > 1) stopped: a ``RuntimeError`` (torch's ``DistError`` family, or gloo's
    plain ``RuntimeError``) saying the connection to a peer was lost."""
    try:
        world_size = int(os.environ.get('WORLD_SIZE') or 1)
    except ValueError:
        return False
    return (world_size > 1 and isinstance(error, RuntimeError)
            and any(sign in str(error) for sign in LOST_PEER_SIGNS))


def explained_message(error: BaseException) -> str | None:
    """The one-line message a tool ends with on ``error``; None when it keeps its traceback."""
    if isinstance(error, USER_ERRORS):
        return describe(error)
    if lost_peer(error):
        rank = os.environ.get('RANK', '?')
        sign = next(sign for sign in LOST_PEER_SIGNS if sign in str(error))
        return (f'another process of this distributed run stopped, so rank {rank} could not go '
                f'on (torch: "{sign}"); the first failure in torchrun\'s summary, and that '
                'process\'s own output, say which and why')
    return None


FULL_DISK = (errno.ENOSPC, errno.EDQUOT)  # an OSError raised by write/close names no file


def written_file(trace):
    """The file a failed write was writing: the innermost frame of ``trace`` holding a path
    (``file``, ``filename``, ``path``) or an open file (its ``name``) in a local; None."""
    found = None
    while trace is not None:
        for name in ('file', 'filename', 'path', 'f', 'handle', 'stream'):
            value = trace.tb_frame.f_locals.get(name)
            value = getattr(value, 'name', value) if hasattr(value, 'write') else value
            if isinstance(value, (str, os.PathLike)) and str(value):
                found = os.fspath(value)
                break
        trace = trace.tb_next
    return found


@contextlib.contextmanager
def explained_errors():
    """Turn a user error (module docstring), or a collective failed by another process of a
    distributed run that stopped, into ``SystemExit('error: <message>')`` (exit status 1);
    with ``VPN_TRACEBACK=1`` the error is raised unchanged."""
    try:
        yield
    except Exception as error:
        message = explained_message(error)
        if message is None or os.environ.get(TRACEBACK_VARIABLE):
            raise
        text = f'error: {message}\n(set {TRACEBACK_VARIABLE}=1 for the traceback)'
        raise SystemExit(1 if leave_to_rank_zero(text) else text) from None


DIST_ERRORS_VARIABLE = 'VPN_DIST_ERRORS'  # set by tools/dist_run.py: its ranks' messages


def leave_to_rank_zero(text: str) -> bool:
    """In a run of ``tools/dist_run.py`` (which sets ``VPN_DIST_ERRORS`` to a folder), a
    rank's message goes to that folder, and only rank 0 prints it: the same refusal printed
    once per process reads as N problems. ``dist_run.py`` prints the messages of the other
    ranks that differ from rank 0's. True when this process should print nothing."""
    folder, rank = os.environ.get(DIST_ERRORS_VARIABLE), os.environ.get('RANK')
    if not folder or rank is None or not os.path.isdir(folder):
        return False
    try:
        Path(folder, f'rank{int(rank)}.txt').write_text(text, encoding='utf-8')
    except (OSError, ValueError):
        return False
    return rank != '0'


def tool_main(main):
    """Decorator for a tool's ``main(argv=None)``: runs it under :func:`explained_errors`;
    when it returns or ends, the log files its runs opened are closed
    (:func:`close_run_log_files`)."""
    @functools.wraps(main)
    def run(*args, **kwargs):
        try:
            with explained_errors():
                return main(*args, **kwargs)
        finally:
            close_run_log_files()
    return run


def close_run_log_files() -> None:
    """Close and detach the log files of mmengine's loggers (when mmengine is loaded): its
    current logger stays the last run's after the run, so the next call of a tool in the same
    process (a notebook, a test suite), refused before its own logger exists, wrote its lines
    into the previous run's log file."""
    import sys
    module = sys.modules.get('mmengine.logging')
    for logger in list(getattr(getattr(module, 'MMLogger', None), '_instance_dict', {}).values()):
        close_log_files(logger)


def close_log_files(logger, folder: Optional[str] = None) -> None:
    """Close and detach the log files of ``logger`` (a logging.Logger or None), only those
    inside ``folder`` when it is given."""
    import logging
    inside = None if folder is None else os.path.abspath(folder) + os.sep
    for handler in list(logger.handlers if logger is not None else ()):
        if isinstance(handler, logging.FileHandler) and (
                inside is None or os.path.abspath(handler.baseFilename).startswith(inside)):
            handler.close()
            logger.removeHandler(handler)


def is_mmaction_tool(script) -> bool:
    """``script`` (``sys.argv[0]``) is one of MMAction2's own tools (``mim train mmaction``
    runs ``<site-packages>/mmaction/.mim/tools/train.py``)."""
    parts = Path(str(script or '')).parts
    return any(a == 'mmaction' and b == '.mim' for a, b in zip(parts, parts[1:]))


def explain_uncaught_user_errors(script=None) -> bool:
    """In MMAction2's own tools (which have no :func:`tool_main`), end on a user error as ours
    do: ``error: <message>`` on stderr, exit status 1, no traceback (``VPN_TRACEBACK=1``:
    the traceback). Installed as ``sys.excepthook`` when the running script is such a tool
    (``vpn_plugin.mm`` calls this: every config imports it); returns whether it was."""
    import sys
    if not is_mmaction_tool(sys.argv[0] if script is None else script):
        return False
    previous = sys.excepthook
    if getattr(previous, 'vpn_explains', False):
        return True

    def hook(kind, error, traceback):
        message = explained_message(error) if isinstance(error, Exception) else None
        if message is not None and not os.environ.get(TRACEBACK_VARIABLE):
            print(f'error: {message}\n(set {TRACEBACK_VARIABLE}=1 for the traceback)',
                  file=sys.stderr)
            return  # Python exits with status 1 after the hook
        previous(kind, error, traceback)
    hook.vpn_explains = True
    sys.excepthook = hook
    return True


REPO_ROOT = Path(__file__).resolve().parents[1]


def plain_text(text) -> str:
    """``text`` (a name of the user's: a folder, a file, a vid) for one line of printed plain
    text (a table's title, a summary line, a progress line, an error message): control and
    separator characters (a newline, tab, NUL, escape, U+2028) written as Python escapes
    (``\\n``), so that a name cannot break the line or forge one the tool never printed; every
    other character as it is. The one rule for names in printed lines."""
    return ''.join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def tool_command(tool: str) -> str:
    """``python tools/<tool>`` as a hint prints it so that it runs from the user's working
    directory: the repository-relative path there, the absolute path anywhere else."""
    script = REPO_ROOT / 'tools' / tool
    here = Path.cwd().resolve()
    return f'python {script.relative_to(here) if here == REPO_ROOT else script}'


def close_match_hint(name, valid) -> str:
    """``"; did you mean 'x'?"`` for the closest of ``valid`` to ``name`` ('' when none is)."""
    matches = difflib.get_close_matches(str(name), [str(v) for v in valid], n=1, cutoff=0.6)
    return f"; did you mean {matches[0]!r}?" if matches else ''


def check_choice(name: str, value, choices) -> None:
    """An option ``name`` (e.g. 'model.decode') must be one of ``choices``."""
    if value not in choices:
        raise ValueError(f'{name}={value!r} is unknown; expected one of {tuple(choices)}')


def check_names(given, valid, what: str) -> None:
    """Every name in ``given`` must be one of ``valid``; a ``ValueError`` names each unknown
    one (``what``: e.g. ``'--methods'``), its closest valid name and the valid names."""
    valid = list(dict.fromkeys(valid))
    unknown = [name for name in dict.fromkeys(given or ()) if name not in valid]
    if unknown:
        hints = ''.join(close_match_hint(name, valid) for name in unknown[:1])
        raise ValueError(f'{what}: {", ".join(map(repr, unknown))} '
                         f'{"is" if len(unknown) == 1 else "are"} not among the valid names '
                         f'{valid}{hints}')


def check_given_once(given, what: str, why: str) -> None:
    """No name in ``given`` twice (``what``: e.g. ``'--methods'``; ``why``: what a repeat would
    do, e.g. ``'the table would show it twice'``); a ``ValueError`` names each repeated one."""
    given = list(given or ())
    repeated = sorted({name for name in given if given.count(name) > 1})
    if repeated:
        raise ValueError(f'{what}: {", ".join(map(repr, repeated))} given twice; {why} '
                         '(give each once)')


def check_misspelled(names, known, what: str, cutoff: float = 0.8) -> None:
    """A name of ``names`` that is not in ``known`` but close to one of them is a typo
    (``horizn`` for ``horizon``); a ``ValueError`` names it (``what``: e.g. 'top-level config
    key') and its match. Names far from every known one are left alone (helper variables)."""
    known = [str(k) for k in known]
    for name in names:
        if name in known:
            continue
        match = [k for k in known if k.lower() == str(name).lower()]  # HORIZON for horizon
        match = match or difflib.get_close_matches(str(name), known, n=1, cutoff=cutoff)
        if match:
            raise ValueError(f'{what} {name!r} is unknown; did you mean {match[0]!r}? (a '
                             'misspelled key would be ignored; name a helper variable '
                             "with a leading '_')")


def number_text_problem(text: str) -> str | None:
    """Why ``text``, which Python's ``int()`` / ``float()`` read as a number, is not written as
    one: other digits than ASCII 0-9 (``'٥'``, ``'３'``) or ``_`` between digits (``'1_0'`` is
    10, ``'1e-3_0'`` is 1e-30: a typo kept as another number), or a number other than 0
    below float's range (``'1e-400'`` is read as 0.0). None for plain numbers and for any text
    that is no number at all."""
    stripped = text.strip()
    if stripped.isascii() and '_' not in stripped:
        try:
            value = float(stripped)
        except ValueError:
            return None
        mantissa = re.split('[eE]', stripped)[0]
        if value == 0 and re.search('[1-9]', mantissa) and not stripped.lower().startswith('0x'):
            return f'is below the smallest float (Python reads it as {value!r})'
        return None
    for kind in (int, float):
        try:
            kind(stripped)
        except ValueError:
            continue
        return ('is written in other digits than ASCII 0-9' if not stripped.isascii() else
                f'has "_" between its digits (Python reads it as {kind(stripped)!r})')
    return None


def decimal_int(text, signed: bool = False) -> Optional[int]:
    """The integer that ``text`` spells in ASCII decimal digits (surrounding whitespace, a
    ``+``; a ``-`` only when ``signed``), else None: the value side of
    :func:`number_text_problem`, for the readers of ids in files (taxonomy keys, COIN step
    ids, CrossTask rows), which ``int()`` would read from ``'1_6'`` or ``'١٦'``."""
    if not isinstance(text, str) or number_text_problem(text):
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return value if signed or not text.strip().startswith('-') else None


def decimal_number(text) -> Optional[float]:
    """The number that ``text`` spells in ASCII (``'16'``, ``' 1.6e1'``, ``'inf'``), else None
    (:func:`decimal_int`'s rule for a recorded rate or a time)."""
    if not isinstance(text, str) or number_text_problem(text):
        return None
    try:
        return float(text)
    except ValueError:
        return None


def at_least(kind, low, strict: bool = False, high=None, why: str = ''):
    """An argparse ``type``: a ``kind`` (``int`` or ``float``) >= ``low`` (> ``low`` when
    ``strict``), so that e.g. ``--max-epochs 0`` is refused instead of ignored; with ``high``,
    also <= ``high`` (``why`` says why, in the message)."""
    what = 'an integer' if kind is int else 'a number'
    bounds = Range(low, high, low_open=strict).describe()  # one bound format: check_value's
    because = f' ({why})' if why and high is not None else ''

    def parse(text: str):
        other_form = number_text_problem(text)
        if other_form:
            raise argparse.ArgumentTypeError(f'{text!r} {other_form}; expected {what} {bounds}'
                                             f'{because}, in ASCII digits 0-9 without "_"')
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f'{text!r} is not {what}') from None
        if kind is float and not math.isfinite(value):  # float("inf") parses; inf >= 0 holds
            raise argparse.ArgumentTypeError(f'{text}: not a finite number; expected {what} '
                                             f'{bounds}{because}')
        if not Range(low, high, low_open=strict).holds(value):
            raise argparse.ArgumentTypeError(f'{text}: expected {what} {bounds}{because}')
        return value + 0 if kind is float else value  # -0.0 is 0.0 (recorded, compared)
    parse.__name__ = f'{kind.__name__} {bounds}'
    return parse


def check_number(name: str, value, *, integer: bool = False, low=None, high=None,
                 low_open: bool = False, high_open: bool = False, optional: bool = False):
    """A config value ``name`` (e.g. 'model.step_n_timesteps') must be a number (an integer
    with ``integer``; never a bool or a string), finite, in the range ``low`` .. ``high``
    (``*_open``: the bound excluded); ``None`` passes with ``optional``. Returns it; else a
    ``ValueError`` naming it, its value and the range. Nothing is coerced: ``0`` is not
    "unset", ``8.9`` is not an id. The rule is :func:`config_types.check_value`'s (one rule
    for a config option, a public argument and a class's own check)."""
    kind = Annotated[int if integer else float, Range(low, high, low_open, high_open)]
    check_value(name, value, Optional[kind] if optional else kind)
    return value


def check_bool(name: str, value) -> bool:
    """A switch ``name`` must be ``True`` or ``False`` (``'yes'``, ``1`` or ``'False'`` would be
    read by truth value): ``ValueError`` otherwise (:func:`config_types.check_value`'s rule)."""
    check_value(name, value, bool)
    return value


def check_numbers(options: dict, prefix: str = 'model.', **limits) -> None:
    """:func:`check_number` of each ``{name: value}`` of ``options`` (named ``prefix``
    + name), all with the same ``limits``."""
    for name, value in options.items():
        check_number(prefix + name, value, **limits)


POSITIVE_INT = at_least(int, 1)
NON_NEGATIVE_INT = at_least(int, 0)
POSITIVE_FLOAT = at_least(float, 0.0, strict=True)
NON_NEGATIVE_FLOAT = at_least(float, 0.0)


def seed_argument(text: str) -> int:
    """An argparse ``type``: a random seed, an integer in [0, 2**32 - 1] (numpy's range)."""
    value = NON_NEGATIVE_INT(text)
    if value > 2 ** 32 - 1:
        raise argparse.ArgumentTypeError(f'{text}: expected an integer in [0, 2**32 - 1]')
    return value


class _CountedNamespace(argparse.Namespace):
    """An argparse namespace that keeps every value each attribute is set to (its default,
    then one per occurrence of its option)."""

    def __init__(self, **kwargs):
        object.__setattr__(self, '_values_set', {})
        super().__init__(**kwargs)

    def __setattr__(self, name, value):
        self._values_set.setdefault(name, []).append(value)
        super().__setattr__(name, value)


REPEATABLE_ACTIONS = ('_AppendAction', '_AppendConstAction', '_CountAction', '_ExtendAction')


def _kept(earlier, final) -> bool:
    """Whether an option's earlier value survives in its final one: equal, or merged into it
    (a dict's items: ``--cfg-options a=1 --cfg-options b=2`` is ``{a: 1, b: 2}``)."""
    if isinstance(earlier, dict) and isinstance(final, dict):
        return all(key in final and final[key] == value for key, value in earlier.items())
    return earlier == final


def parse_once(parser: argparse.ArgumentParser, argv=None) -> argparse.Namespace:
    """``parser.parse_args(argv)``, with an option given twice refused when a value would be
    dropped (argparse keeps the last without a word: ``--out a --out b`` wrote into b,
    ``--horizons 3 --horizons 4`` counted T=4 alone). The same value again, or one merged into
    the last (``--cfg-options``), drops nothing and is read; options made to be repeated
    (append, count, extend actions) and options sharing their destination with another flag
    (a pair like ``--fps`` / ``--native-fps``, whose own check names them) are not compared."""
    args = parser.parse_args(argv, _CountedNamespace())
    values = object.__getattribute__(args, '_values_set')
    owners = {}
    for action in parser._actions:  # noqa: SLF001 (argparse exposes no public list)
        owners.setdefault(action.dest, []).append(action)
    for dest, actions in owners.items():
        action = actions[0]
        if (len(actions) > 1 or not action.option_strings or dest == argparse.SUPPRESS
                or type(action).__name__ in REPEATABLE_ACTIONS):
            continue
        given = values.get(dest, [])[action.default is not argparse.SUPPRESS:]
        if any(not _kept(value, given[-1]) for value in given[:-1]):
            parser.error(f'{"/".join(action.option_strings)} is given {len(given)} times ('
                         f'{", ".join(map(repr, given))}); expected it once (argparse would '
                         'use the last and drop the others without a word)')
    return argparse.Namespace(**{k: v for k, v in vars(args).items() if k != '_values_set'})


def path_argument(text: str) -> str:
    """An argparse ``type`` for every file or folder flag and argument of the tools: an empty
    string (``--work-dir ''``, an unset shell variable) is refused instead of falling back to
    the default; a leading ``~`` is the home folder (``--out '~/r.jsonl'`` quoted, or
    ``--out=~/r.jsonl``, which the shell leaves as written), as config paths read it."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f'{text!r} is an empty path (an unset shell variable?); '
                                         'expected a file or folder (a flag with a default: '
                                         'leave it out for the default)')
    return os.path.expanduser(text)


path_argument.__name__ = 'path'


def text_argument(text: str) -> str:
    """An argparse ``type`` for a name flag (``--method``, ``--decode``): an empty string is
    refused instead of meaning "the default"."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f'{text!r} is empty; expected a value (leave the flag '
                                         'out for the default)')
    return text


text_argument.__name__ = 'text'


def join_dash_values(parser, argv) -> list:
    """``argv`` with ``--opt -x`` written ``--opt=-x`` where ``--opt`` is an option of
    ``parser`` that takes one value and ``-x`` is no option of ``parser`` (nor the start of
    one): argparse reads ``-x`` (``--mem-per-run -4G``) as an unknown option and says only
    "expected one argument"; joined, the value reaches the option's own check, whose message
    names the option, the value and the form expected."""
    single = {name for action in parser._actions if action.nargs is None
              and action.option_strings for name in action.option_strings}
    known = list(parser._option_string_actions)
    joined, tokens = [], list(argv)
    while tokens:
        token = tokens.pop(0)
        if (token in single and tokens and tokens[0].startswith('-') and tokens[0] != '--'
                and not any(name.startswith(tokens[0].split('=', 1)[0]) for name in known)):
            token = f'{token}={tokens.pop(0)}'
        joined.append(token)
    return joined


def path_kind(path) -> str | None:
    """What is at ``path``: None (nothing), 'a regular file', 'a folder', 'a FIFO', 'a
    character device' (``/dev/zero``), 'a block device', 'a socket'."""
    import stat
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError:  # e.g. a path through a file: nothing of that name is there
        return None
    kinds = ((stat.S_ISREG, 'a regular file'), (stat.S_ISDIR, 'a folder'),
             (stat.S_ISFIFO, 'a FIFO'), (stat.S_ISCHR, 'a character device'),
             (stat.S_ISBLK, 'a block device'), (stat.S_ISSOCK, 'a socket'))
    return next((name for test, name in kinds if test(mode)), 'not a regular file')


def link_loop(path) -> bool:
    """Whether ``path`` is a symbolic link that leads back to itself (``a -> b -> a``: the
    system's ELOOP), not a dangling one (its target absent): the one test of every message
    that names a link leading to no file."""
    try:
        os.stat(path)
    except OSError as error:
        return error.errno == errno.ELOOP
    return False


def checked_device(device, name: str = '--device'):
    """``device`` (the option ``name``: '--device', or an API argument such as
    'init_planner() argument device') as given, refused by name when torch cannot use it here:
    the one device check of the tools and the API (extraction, inference, benchmarks)."""
    import torch
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(f'{name} {device!r} is not a torch device; expected cpu, cuda or '
                         'cuda:N') from None
    if parsed.type not in ('cpu', 'cuda'):
        raise ValueError(f'{name} {device!r}: a {parsed.type} device holds no data to '
                         'run on; expected cpu, cuda or cuda:N')
    if parsed.type == 'cuda':
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if (parsed.index or 0) >= count:
            raise ValueError(f'{name} {device!r}: this machine has {count} CUDA device(s) '
                             f'usable by this torch (CUDA build: {torch.version.cuda}); '
                             'expected cpu' + (f' or cuda:0..{count - 1}' if count else ''))
    return device


EMPTY_ZIP_MAGIC, ZIP_MAGIC, NPY_MAGIC = b'PK\x05\x06', b'PK\x03\x04', b'\x93NUMPY'


def what_the_file_is(path) -> str:
    """What a file that could not be read as what it should be holds, by its size and first
    bytes: 'the file is empty (0 bytes)', 'a zip archive (npz, torch.save) with no member',
    'a text file (it starts with ...)', ...: for messages of readers that failed on it."""
    try:
        with open(path, 'rb') as f:
            head = f.read(512)
    except OSError as err:
        return f'the file cannot be opened ({err.strerror})'
    if not head:
        return 'the file is empty (0 bytes)'
    if head.startswith(EMPTY_ZIP_MAGIC):
        return 'a zip archive (an npz or torch.save file) with no member'
    if head.startswith(ZIP_MAGIC):
        return 'a zip archive (an npz or torch.save file), damaged, truncated or of other content'
    if head.startswith(NPY_MAGIC):
        return 'a .npy file, damaged, truncated or of other content'
    if head[:1] == b'\x80' or head.startswith((b'(dp', b'}q')):  # pickle protocols 2-5, 0, 1
        return 'a pickle, damaged, truncated or of other content'
    try:
        head.decode('utf-8')
    except UnicodeDecodeError as err:
        if err.start < len(head) - 3:  # not a character cut at the end of the head
            return f'a binary file of unknown format (it starts with bytes {head[:8]!r})'
    text = head[:40].decode('utf-8', 'replace')
    return f'a text file (it starts with {text!r})'


def check_folder_target(path, what: str = 'work dir', holds: str = 'the logs and checkpoints',
                        flag: str = '--work-dir', writable: bool = True) -> None:
    """``path``, a folder a run writes into (made when missing), must not be a file: a
    ``NotADirectoryError`` says what is there (``makedirs`` says only "File exists"); with
    ``writable``, a ``PermissionError`` names the folder this user cannot write
    (:func:`unwritable_folder`; Python's says only "[Errno 13] Permission denied: <a file in
    it>")."""
    kind = path_kind(path)
    if kind not in (None, 'a folder'):
        raise NotADirectoryError(f'{what} {path} is {kind}; expected a folder (made when missing) '
                                 f'for {holds}: give another {flag}')
    if os.path.islink(path) and not os.path.exists(path) and link_loop(path):
        raise NotADirectoryError(f'{what} {path} is {link_problem(path)}; expected a folder '
                                 f'(made when missing) for {holds}: give another {flag}')
    above = file_on_the_way(path)
    if above is not None:
        raise NotADirectoryError(f'{what} {path}: {above} is {path_kind(above)}, not a folder; '
                                 f'expected a folder (made when missing) for {holds}: give '
                                 f'another {flag}')
    blocked = unwritable_folder(path) if writable else None
    if blocked is not None:
        raise PermissionError(f'{what} {path}: {blocked}; expected a folder this user can write '
                              f'{holds} into: give another {flag}')


def file_on_the_way(path) -> Path | None:
    """The nearest existing path above ``path`` when it is no folder (a file that ``path``
    would be made under: ``makedirs`` says only "Not a directory"), else None."""
    above = next((p for p in Path(os.path.abspath(path)).parents if p.exists()), None)
    return above if above is not None and not above.is_dir() else None


def unwritable_folder(path) -> str | None:
    """Why this process cannot write into folder ``path`` (made when missing): '<folder> is
    read-only for user <name>' naming ``path`` or the nearest existing folder above it that it
    would be made in; None when it can."""
    folder = Path(os.path.abspath(path))
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir() or os.access(folder, os.W_OK | os.X_OK):
        return None
    import getpass
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f'uid {os.getuid()}'
    made = '' if folder == Path(os.path.abspath(path)) else ', where it would be made,'
    return f'{folder}{made} is read-only for user {user}'


def broken_link(path) -> str | None:
    """Why a symbolic link ``path`` leads to nothing ('leads to no file (a dangling link)' or
    'leads back to itself (a loop of links)'), else None (no link, or one to a file): its
    name is listed by ``ls``, so "does not exist" would mislead; say "a symbolic link to
    {os.readlink(path)}, which {why}"."""
    if not os.path.islink(path) or os.path.exists(path):
        return None
    return ('leads back to itself (a loop of links)' if link_loop(path) else
            'leads to no file (a dangling link)')


def link_problem(path) -> str | None:
    """'a symbolic link to <target>, which <why>' (:func:`broken_link`) when ``path`` is a
    link that leads to nothing, else None: the one wording of a broken link in every message
    ("<what> <path> is <this>")."""
    why = broken_link(path)
    return f'a symbolic link to {os.readlink(path)}, which {why}' if why else None


def check_file(path, what: str, missing: str | None = None) -> Path:
    """``path`` must be a regular file (what a tool reads as an input): ``FileNotFoundError``
    (``missing``, default ``'<what> <path> does not exist'``) when nothing is there, an
    ``OSError`` saying what is there instead (a folder, a FIFO, ``/dev/zero``: reading one
    would block or never end) otherwise. Returns ``Path(path)``."""
    if isinstance(path, (bool, int, float)) or not isinstance(path, (str, os.PathLike)):
        # os.stat(0) is stdin's descriptor; 1.5, True or [] failed in os.stat naming no option
        raise ValueError(f'{what}={path!r}: expected a file path (a string)')
    kind = path_kind(path)
    if kind == 'a regular file':
        return Path(path)
    link = link_problem(path)
    if link:  # was "does not exist": the name is there
        raise FileNotFoundError(f'{what} {path} is {link}; expected a file')
    if kind is None:
        raise FileNotFoundError(missing or f'{what} {path} does not exist')
    raise OSError(f'{what} {path} is {kind}, not a regular file; expected a file')


def native_order(value):
    """A numpy array ``value`` in the machine's byte order (the same values): torch refuses an
    array of another byte order (a fixture or observations saved big-endian on another
    machine) with its own words, so every array handed to torch from a user's file or call
    goes through this."""
    return value if value.dtype.isnative else value.astype(value.dtype.newbyteorder('='))


def read_text(path, what: str = '', expected: str = 'UTF-8 text') -> str:
    """The text of the file ``path``, UTF-8, a leading byte-order mark read past (Notepad and
    Excel's "CSV UTF-8" write one; it is no part of the text): the one rule of every reader of
    the user's text and JSON files. Not UTF-8 is a ``ValueError`` naming ``what``, the file and
    the byte of the file (a BOM counted: decoded before it is dropped) and ``expected``."""
    path = Path(path)
    try:
        return path.read_text(encoding='utf-8').removeprefix('\ufeff')
    except UnicodeDecodeError as error:
        where = f'{what} {path}' if what else str(path)
        raise ValueError(f'{where}: not UTF-8 text ({error.reason} at byte {error.start}; a '
                         f'compressed or binary file?); expected {expected}') from None


def json_lines(text: str) -> list:
    """The lines of a JSON-lines text: split at ``\n`` (``\r\n`` too) only, the one rule of
    every JSON-lines reader (results, expected rows, submission records, earlier outputs).
    ``str.splitlines`` also breaks at U+2028/U+2029/U+0085 and \\x0b/\\x0c/\\x1c-\\x1e, which JSON
    allows raw inside a string (``json.dumps(..., ensure_ascii=False)`` writes them so): a
    valid record would be cut."""
    return [line.removesuffix('\r') for line in text.split('\n')]


def read_json(path, what: str = 'JSON file', **options):
    """The parsed JSON of the file ``path`` (:func:`check_file` first, :func:`read_text`: a
    BOM read past); a file that is not UTF-8 JSON (truncated, edited, binary) is a
    ``ValueError`` naming ``what``, the file, the line and column. ``options``:
    ``json.loads``'s; without an ``object_pairs_hook``, :func:`unique_keys` (a key given twice
    in one object is refused: ``json`` would keep only the last)."""
    import json
    path = check_file(path, what)
    options.setdefault('object_pairs_hook', unique_keys(path, what))
    try:
        return json.loads(read_text(path, what, 'a JSON file'), **options)
    except json.JSONDecodeError as error:
        raise ValueError(f'{what} {path}: line {error.lineno} column {error.colno}: '
                         f'{error.msg} (a truncated or edited file?); expected valid JSON'
                         ) from None
    except RecursionError:
        raise ValueError(f'{what} {path}: JSON nested deeper than Python\'s parser goes (lists '
                         'or objects inside each other thousands of levels deep); expected a '
                         'JSON file of this kind') from None


def unique_keys(path, what: str = 'JSON file', *, same_value_ok: bool = False):
    """An ``object_pairs_hook`` for :func:`read_json` (and every other JSON reader: the one
    duplicate-key rule): a dict, or a ``ValueError`` naming ``what`` and the file ``path``
    (None: a text that is no file, e.g. ``what='reply'`` of a model), a key given twice in one
    object (``json`` would keep only the last), both values and the object's feature / vid /
    id where it has one. ``same_value_ok``: a key repeated with the same value is read (a
    model's reply: the answer is not in doubt)."""
    where = what if path is None else f'{what} {path}'

    def pairs_to_dict(pairs):
        seen = {}
        for key, value in pairs:
            if key in seen and not (same_value_ok and seen[key] == value):
                fields = dict(pairs)
                named = next((f' (in the object of {name} {fields[name]!r})'
                              for name in ('feature', 'vid', 'id', 'video_id')
                              if name in fields and name != key), '')
                raise ValueError(f'{where}: the key {key!r} is given twice in one '
                                 f'object{named}: {_short(seen[key])} and {_short(value)}; '
                                 'JSON would keep only the last: expected each key once')
            seen[key] = value
        return seen
    return pairs_to_dict


def differences(found, wanted, there: str = 'there', here: str = 'now', prefix: str = '') -> str:
    """The fields in which two records (dicts, nested) differ, ``'name: <found> there,
    <wanted> now'`` each ('absent' where one lacks it), '; '-joined, nested fields dotted
    (``recipe.size``): what a mismatch message names instead of printing both records; ''
    when they agree."""
    if not (isinstance(found, dict) and isinstance(wanted, dict)):
        return '' if found == wanted else \
            f'{prefix or "value"}: {found!r} {there}, {wanted!r} {here}'
    parts = []
    for key in sorted(set(found) | set(wanted), key=str):
        name = f'{prefix}.{key}' if prefix else str(key)
        if key in found and key in wanted:
            parts.append(differences(found[key], wanted[key], there, here, name))
        else:
            shown = [repr(record[key]) if key in record else 'absent'
                     for record in (found, wanted)]
            parts.append(f'{name}: {shown[0]} {there}, {shown[1]} {here}')
    return '; '.join(part for part in parts if part)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + '...'


class OutputWriteError(OSError):
    """An output file could not be written (disk full, read-only folder); nothing was left."""


def replace_atomically(path, write, failure) -> None:
    """``write(temporary path)`` beside ``path``, then rename it into place: ``path`` is the
    complete new file or untouched (a full disk leaves no 0-byte or truncated file). An
    ``OSError`` removes the temporary file and raises ``failure(path, cause)``."""
    replace_all_atomically({path: write}, failure)


def replace_all_atomically(writes, failure) -> None:
    """``write(temporary path)`` beside each path of ``writes`` (``{path: write}``), then,
    once all are complete, each renamed into place: every path is its complete new file, or
    every one is as it was (a full disk on the second file, or a failed rename, leaves no
    0-byte, truncated or half-replaced set). An ``OSError`` removes the temporary files, puts
    back the files already replaced and raises ``failure(path, cause)`` for the path that
    failed."""
    paths = [Path(path) for path in writes]
    temporaries = [_beside(path, 'partial') for path in paths]
    earlier = {}  # path -> a copy of the file it replaced (several files only), or None
    path = paths[0]
    try:
        for path, temporary, write in zip(paths, temporaries, writes.values()):
            write(temporary)
        for path, temporary in zip(paths, temporaries):
            if len(paths) > 1:
                earlier[path] = _kept_copy(path)
            os.replace(temporary, path)
    except OSError as error:
        _put_back(earlier, replaced=paths[:len(earlier) - (path in earlier)])
        for temporary in temporaries:
            with contextlib.suppress(OSError):
                temporary.unlink()
        raise failure(path, error.strerror or str(error)) from error
    for copy in earlier.values():
        if copy is not None:
            with contextlib.suppress(OSError):
                copy.unlink()


def _beside(path: Path, kind: str) -> Path:
    """A hidden name beside ``path`` for this process (``.<name>.<kind>.<pid>.partial``: a
    killed run's leftovers match ``engine.checkpoint.PARTIAL_FILE``)."""
    middle = '' if kind == 'partial' else f'.{kind}'
    return path.with_name(f'.{path.name}{middle}.{os.getpid()}.partial')


def _kept_copy(path: Path):
    """A hard link (else a copy) of the file at ``path`` beside it, None when there is none."""
    if not os.path.lexists(path):
        return None
    copy = _beside(path, 'earlier')
    try:
        os.link(path, copy, follow_symlinks=False)
    except OSError:
        import shutil
        shutil.copy2(path, copy, follow_symlinks=False)
    return copy


def _put_back(earlier: dict, replaced: list) -> None:
    """Undo the renames of ``replaced``: each path gets back its earlier file
    (``earlier[path]``), or is removed when it had none; best effort."""
    for path in replaced:
        with contextlib.suppress(OSError):
            if earlier[path] is None:
                path.unlink()
            else:
                os.replace(earlier[path], path)
    for copy in earlier.values():
        if copy is not None:
            with contextlib.suppress(OSError):
                copy.unlink()


def write_text_atomically(path, text: str, what: str = 'output') -> None:
    """Write ``text`` to ``path`` atomically (``write_texts_atomically``), creating its folder;
    an ``OSError`` raises ``OutputWriteError`` naming ``path``."""
    write_texts_atomically({path: text}, what)


def write_texts_atomically(texts, what: str = 'output') -> None:
    """Write every file of ``texts`` (``{path: text}``) or none of them, creating their
    folders (:func:`replace_all_atomically`). An ``OSError`` raises ``OutputWriteError``
    naming the file that failed and every file that was therefore not written."""
    def writer(text):
        def write(temporary):
            temporary.parent.mkdir(parents=True, exist_ok=True)
            temporary.write_text(text)
        return write
    try:
        replace_all_atomically({path: writer(text) for path, text in texts.items()},
                               _NotReplaced)
    except _NotReplaced as failed:
        path, cause = failed.args
        others = [str(other) for other in map(Path, texts) if other != path]
        raise OutputWriteError(
            f'cannot write the {what} {path}: {cause}; nothing was written '
            f'there{" nor to " + ", ".join(others) if others else ""} (free disk space or '
            'choose a writable folder)') from failed.__cause__


class _NotReplaced(Exception):
    """``replace_all_atomically``'s failure for a caller that words its own message:
    ``args`` are the path that failed and the cause."""
