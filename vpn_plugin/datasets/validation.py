"""Strict checks of annotation values, shared by every annotation reader.

Nothing is coerced: an action or task id must be an integer (not ``8.9``, not ``true``, not
``"3"`` in JSON), a time a finite number of seconds in [0, :data:`MAX_SECONDS`], a sentence
list a list of non-empty strings, a feature array real floating point. A value that is wrong
raises ``ValueError`` with ``where`` (file, sample, field) in its message; the readers turn
the ones confined to one video into ``BadVideoError`` (skippable with ``skip_bad_videos``).

What is merely suspicious (steps out of temporal order, a window that appears twice in the
unified protocol's files, as a few do in the real CrossTask and NIV annotations) is counted
in an :class:`AnnotationWarnings` and printed once, as a WARNING, in the dataset's summary.
"""
from __future__ import annotations

import functools
import math
import numbers
import unicodedata
from collections import Counter

from ..errors import close_match_hint

MAX_SECONDS = 24 * 3600.0  # a step time beyond a day is a unit or parsing error, not a video


def as_int(value, where: str) -> int:
    """``value`` if it is an integer (Python or numpy, not a bool); else ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f'{where} = {value!r}; expected an integer')
    return int(value)


def as_seconds(value, where: str) -> float:
    """A time in seconds: a number (not a bool or a string), finite, in [0, MAX_SECONDS]."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f'{where} = {value!r}; expected a number of seconds')
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f'{where} is {value}; expected a finite number of seconds')
    if not 0 <= value <= MAX_SECONDS:
        raise ValueError(f'{where} = {value:g} s; expected a time in [0, {MAX_SECONDS:g}] s')
    return value


def as_sentences(value, where: str) -> list:
    """A list of non-empty strings (a string is not a list of its characters)."""
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError(f'{where} = {value!r:.80}; expected a non-empty list of sentences')
    for i, sentence in enumerate(value):
        if not isinstance(sentence, str) or not sentence.strip():
            raise ValueError(f'{where}[{i}] = {sentence!r:.80}; expected a non-empty string')
    return list(value)


def check_real_floats(array, where: str) -> None:
    """A feature array must hold real floating-point numbers (not ints, bools, complex)."""
    kind = getattr(getattr(array, 'dtype', None), 'kind', None)
    if kind != 'f':
        raise ValueError(f'{where} has dtype {getattr(array, "dtype", type(array).__name__)}; '
                         'expected real floating-point features (float16/32/64)')


def temporal_order(starts) -> str:
    """'ordered' (non-decreasing), 'reversed' (at least 2 steps, each starting before the
    previous one) or 'unordered'."""
    pairs = list(zip(starts, starts[1:]))
    if all(b >= a for a, b in pairs):
        return 'ordered'
    return 'reversed' if all(b < a for a, b in pairs) else 'unordered'


def first_duplicates(keys) -> dict:
    """{index of a repeated key: index of its first occurrence}."""
    seen, repeated = {}, {}
    for index, key in enumerate(keys):
        if key in seen:
            repeated[index] = seen[key]
        else:
            seen[key] = index
    return repeated


@functools.lru_cache(maxsize=65536)
def normalized_name(name) -> str:
    """Lower-case letters and digits of any script (and their combining marks), NFKC:
    'Make Jello Shots' == 'make_jello-shots', '烧水' != '放茶包' (an ASCII-only rule made
    every Chinese, Arabic or Cyrillic name '', so that all of them were "one name")."""
    text = unicodedata.normalize('NFKC', str(name)).casefold()
    return ''.join(c for c in text if c.isalnum() or unicodedata.category(c).startswith('M'))


def file_stem_problem(stem: str) -> str:
    """'' when ``stem`` (a video's feature file name without extension) names a file in the
    feature folder; else why not: a stem with a folder separator or '..' would read, and the
    synthetic-feature tool write, a file outside it (``../../other/features/x`` replaced
    ``other/features/x.npz``)."""
    if stem in ('', '.', '..') or '/' in stem or '\\' in stem or '\0' in stem:
        return (f'feature file name {stem!r} is no file name of the feature folder (it holds '
                "a '/', '\\' or is '', '.' or '..'): expected a plain file name (rename the "
                'video id or give "feature")')
    return ''


def check_fields(record: dict, known, where: str) -> None:
    """A record of an annotation file holds only the ``known`` fields (a field of the user's
    own starts with ``_``): a misspelled field (``"featur"``) would be ignored and its default
    used, so an unknown one is a ``ValueError`` naming it, its closest known field and the
    known ones."""
    unknown = [name for name in record if name not in known and not str(name).startswith('_')]
    if unknown:
        hint = close_match_hint(unknown[0], known)
        raise ValueError(f'{where}: unknown field(s) {", ".join(map(repr, unknown))}'
                         f'{f" ({hint[2:]})" if hint else ""}; expected only '
                         f'{", ".join(map(repr, known))} (a field of your own: start its '
                         "name with '_')")


def check_disjoint(train_videos, test_videos, where: str) -> None:
    """No video may be both trained on and tested on: ``ValueError`` naming the count and a
    few of them."""
    shared = sorted(set(train_videos) & set(test_videos))
    if shared:
        raise ValueError(f'{where}: {len(shared)} video(s) are in both the training and the '
                         f'test split, e.g. {shared[:5]}; the test windows must come from '
                         'videos never trained on (check the split files)')


def check_disjoint_ids(train_ids: dict, test_ids: dict, where: str) -> None:
    """No video (its task index and ``vid``) may be in both splits under two feature names
    (``{feature stem: (task, vid)}`` each side; one name in both is :func:`check_disjoint`'s):
    a test video listed among the training videos with the task written otherwise
    ("make_tea" / "0_make_tea" make two default stems) was trained on without a word."""
    train = {}
    for stem, key in sorted(train_ids.items()):
        train.setdefault(key, stem)
    shared = sorted((key, train[key], stem) for stem, key in test_ids.items()
                    if key in train and train[key] != stem)
    if shared:
        (task, vid), train_stem, test_stem = shared[0]
        raise ValueError(f'{where}: {len(shared)} video(s) are in both the training and the '
                         f'test split under two feature names, e.g. video {vid!r} of task '
                         f'{task}: feature {train_stem!r} in training, {test_stem!r} in the '
                         'test; the test windows must come from videos never trained on '
                         '(check the split files; two videos need two video ids)')


class AnnotationWarnings:
    """Counts of suspicious annotations by kind, with the first message of each kind."""

    def __init__(self):
        self.counts: Counter = Counter()
        self.examples: dict = {}

    def add(self, kind: str, message: str) -> None:
        self.counts[kind] += 1
        self.examples.setdefault(kind, message)

    def __bool__(self) -> bool:
        return bool(self.counts)

    def summary(self) -> str:
        """'3 duplicate windows (first: ...); 30 windows with steps out of temporal order
        (first: ...)'."""
        return '; '.join(f'{count} {kind} (first: {self.examples[kind]})'
                         for kind, count in sorted(self.counts.items()))
