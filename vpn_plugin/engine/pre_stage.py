"""Pre-stages: what a model trains before its main training, in the train loop's
``before_train`` (``TaskClassifierHook``: PDPP's / CEFITO's task classifier;
``KEPPStepModelHook``: KEPP's step model and its predictions on the training windows).

* Each writes one file into the work dir (:data:`PRE_STAGE_FILES`) when it finishes. Such a
  file is no checkpoint of the run: a fresh start, ``--resume`` or ``--overwrite`` in that work
  dir reuses it (``tools/train.py``), and the hook logs that it did.
* The file records what it was trained on (:func:`data_identity`: the training windows, their
  features, T, the action / task counts, D) and how (``settings``: the hook's steps, lr, batch
  size, seed, ...). A file of another dataset, horizon, action count or setting is refused,
  naming both (:func:`check_identity`); delete it to retrain.
* Progress: :func:`stage_progress`, a logged line with a true ETA (``vpn_plugin.progress``).
* Random streams: each hook runs its whole pre-stage (training or loading, KEPP's predictions)
  in ``random_states.own_seeded_stream(runner.seed)``, as the official code runs it in a
  process of its own seeded with the run's seed; training draws random numbers and reusing the
  file draws none, so without it a restart that reuses the file would train the main model
  from another point of the run's streams.
"""
from __future__ import annotations

import hashlib
import io
import json
import os

import torch
from mmengine.logging import print_log

from vpn_plugin.errors import OutputWriteError, replace_atomically
from vpn_plugin.progress import StepProgress

CLASSIFIER_FILE, STEP_FILE = 'task_classifier.pth', 'kepp_step_model.pth'
# file name -> what it holds
PRE_STAGE_FILES = {CLASSIFIER_FILE: 'the task classifier (TaskClassifierHook)',
                   STEP_FILE: "KEPP's step model (KEPPStepModelHook)"}
DATA_KEYS = ('actions_sha1', 'windows_sha1', 'feature_dir', 'features_fingerprint', 'horizon',
             'num_actions', 'num_tasks', 'feature_dim')
# keys a file saved before they were recorded lacks: compared only when it has them
LATER_KEYS = ('features_fingerprint',)
PROGRESS_SECONDS = 30.0  # a pre-stage logs its progress at most this often


def fingerprint(value) -> str:
    return hashlib.sha1(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def data_identity(dataset, **sizes) -> dict:
    """What a pre-stage is tied to: the training set (taxonomy file, action names, windows and
    feature folder) and the model's sizes ``sizes`` (``horizon``, ``num_actions``, ...)."""
    taxonomy = getattr(dataset, 'taxonomy', None)
    windows = [(w.feature, w.position, list(w.steps)) for w in getattr(dataset, 'windows', [])]
    feature_dir = str(getattr(dataset, 'feature_dir', '') or '')
    return dict(dataset=str(getattr(taxonomy, 'path', type(dataset).__name__)),
                actions_sha1=fingerprint(list(getattr(taxonomy, 'action_names', []))),
                windows_sha1=fingerprint(windows), num_windows=len(windows),
                feature_dir=feature_dir,
                features_fingerprint=features_fingerprint(dataset, feature_dir), **sizes)


def features_fingerprint(dataset, feature_dir: str):
    """16 hex digits over the name and SHA-256 of each feature file the training ``dataset``
    reads (``feature_files_read`` / ``feature_digests``: the observation cache's memo; without
    them, every feature file of ``feature_dir``): features regenerated in place (another seed,
    another extractor, one file rewritten with its size kept) keep the folder's path, so the
    path alone let a pre-stage trained on the old files be reused; the same files in another
    folder (moved, copied) have the same. None without a folder."""
    from pathlib import Path
    from vpn_plugin.datasets.file_digests import file_digests
    from vpn_plugin.datasets.provenance import feature_files
    if not feature_dir or not Path(feature_dir).is_dir():
        return None
    reading, hashing = (getattr(dataset, name, None)
                        for name in ('feature_files_read', 'feature_digests'))
    files = reading() if callable(reading) else feature_files(feature_dir)
    digests = hashing(files) if callable(hashing) else file_digests(files)
    return fingerprint([[Path(path).name, digest] for path, digest in zip(files, digests)])


def describe(identity: dict, keys) -> str:
    return ', '.join(f'{key}={identity.get(key, "not recorded")}' for key in keys)


RETRAIN = 'delete it to retrain'  # the advice for the run's own pre-stage file


def check_identity(path, what: str, saved: dict, expected: dict, keys,
                   advice: str = RETRAIN) -> None:
    """Refuse a saved pre-stage whose ``keys`` differ from this run's, naming both
    (``advice``: what to do, for the run's own file or a file the config names). A feature
    folder of another path with the recorded fingerprint holds the same files (moved or
    copied): not a difference."""
    moved = bool(saved.get('features_fingerprint')) and \
        saved.get('features_fingerprint') == expected.get('features_fingerprint')
    differ = [key for key in keys if key in expected and saved.get(key) != expected[key]
              and not (key in LATER_KEYS and key not in saved)
              and not (key == 'feature_dir' and moved)]  # the same files in another folder
    if differ:
        raise ValueError(
            f'{path}: {what} trained for {saved.get("dataset", "?")} ({describe(saved, differ)}), '
            f'but this run is {expected.get("dataset", "?")} ({describe(expected, differ)}); '
            'it is never reused for another run: use the file of this dataset, horizon and '
            f'settings, or {advice}')


def read_pre_stage(path, what: str, keys, advice: str = RETRAIN) -> dict:
    """The dict a pre-stage hook saved at ``path``, read with ``weights_only``; ``ValueError``
    naming the file, ``what`` it should hold and why it does not (torch's reason without its
    advice to load it unrestricted) when it is unreadable, not a dict or lacks ``keys``."""
    from vpn_plugin.compat import unpickler_reason
    try:
        saved = torch.load(path, map_location='cpu', weights_only=True)
    except Exception as error:  # noqa: BLE001  (any unreadable file: say which)
        reason = (unpickler_reason(error) if 'weights_only' in str(error)
                  else str(error).split('. ')[0].strip() or 'an empty or unreadable file')
        raise ValueError(f'{path}: not {what} ({type(error).__name__}: {reason}); '
                         f'{advice}') from None
    missing = [key for key in keys if key not in saved] if isinstance(saved, dict) else keys
    if missing:
        found = f'keys {sorted(map(str, saved))}' if isinstance(saved, dict) else \
            f'a {type(saved).__name__}'
        raise ValueError(f'{path}: not {what}: it holds {found}, without {list(missing)}; '
                         f'{advice}')
    return saved


def stage_progress(what: str, total: int, unit: str = 'steps') -> StepProgress:
    """A :class:`StepProgress` logging through mmengine's current logger."""
    return StepProgress(what, total, lambda text: print_log(text, logger='current'), unit=unit,
                        interval=PROGRESS_SECONDS)


def save_torch_file(payload, path) -> None:
    """``torch.save`` through memory, then one Python write: torch's own zip writer reports a
    full disk as ``RuntimeError: [enforce fail at inline_container.cc] unexpected pos``, which
    no ``OSError`` handler sees (a traceback, and the partial file left behind)."""
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    with open(path, 'wb') as handle:
        handle.write(buffer.getbuffer())


def save_pre_stage(path, payload: dict) -> None:
    """``torch.save(payload)`` to ``path`` atomically: a killed or full-disk run leaves the
    complete file or none (a partial one would be reused)."""
    replace_atomically(path, lambda temporary: save_torch_file(payload, temporary),
                       lambda path, cause: OutputWriteError(
                           f'cannot save the pre-stage file {path}: {cause}; nothing was '
                           'written there (free disk space or give a writable --work-dir)'))


def check_not_pre_stage(checkpoint: dict, filename) -> None:
    """A pre-stage file (``task_classifier.pth``, ``kepp_step_model.pth``: an ``identity`` and
    no ``meta``) given as a checkpoint: ``ValueError`` naming it (it failed as a KeyError
    'state_dict' in the EMA hook, or as a list of missing keys)."""
    if isinstance(checkpoint, dict) and 'identity' in checkpoint and 'meta' not in checkpoint:
        what = PRE_STAGE_FILES.get(os.path.basename(str(filename)),
                                   "a pre-stage's weights (TaskClassifierHook / KEPPStepModelHook)")
        raise ValueError(f'{filename} is a pre-stage file, {what}, not a checkpoint of a run: '
                         'give an epoch_<n>.pth or best_*.pth of its work dir (the pre-stage '
                         'is inside every checkpoint)')
