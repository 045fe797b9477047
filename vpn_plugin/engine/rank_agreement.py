"""The processes of a distributed run must read the same thing.

Each rank of ``tools/dist_train.sh`` / ``dist_test.sh`` builds its own config, datasets and
checkpoint from its own files (on several nodes: its own copies). A rank that read another
feature folder, another annotation copy, another ``--cfg-options`` value or another checkpoint
would train or score on a mixture and the run would still exit 0 with rank 0's record. Before
a run loads its checkpoint and starts, every rank states what it read (:func:`what_this_rank_read`)
and :func:`check_ranks_agree` refuses any difference, naming the rank and what differs.

A checkpoint also records how many processes trained it (``meta['world_size']``):
:func:`check_resume_world_size` refuses to continue it with another number of processes (the
batch per step is the config's batch size times the number of processes: the resumed run would
be neither the one nor the other), and what its training windows held (``meta['train_data']``,
:func:`dataset_digest`): :func:`check_resume_data` refuses to continue it on other data (another
feature folder, annotation copy or split option), which would train its last epochs on
something else than its first.
"""
from __future__ import annotations

import hashlib
import os

import numpy as np

# the arrays of a PlanningDataset that hold what it read (features and labels)
DATASET_ARRAYS = ('start', 'goal', 'observed', 'plans', 'tasks')
WORLD_SIZE_KEY = 'world_size'
TRAIN_DATA_KEY = 'train_data'  # dataset_digest of the training windows a checkpoint was trained on
VAL_DATA_KEY = 'val_data'  # dataset_digest of the validation windows its run validated on


def flat_config(cfg) -> dict:
    """``{'a.b.c': repr(value)}`` of every leaf of a config (dicts and lists walked)."""
    flat = {}

    def visit(node, prefix):
        if hasattr(node, 'items'):
            for key, value in node.items():
                visit(value, f'{prefix}.{key}' if prefix else str(key))
        elif isinstance(node, (list, tuple)):
            for i, value in enumerate(node):
                visit(value, f'{prefix}[{i}]')
        else:
            flat[prefix] = repr(node)
    visit(cfg, '')
    return flat


def dataset_digest(dataset) -> str:
    """16 hex digits over what a dataset holds: its length and, for a PlanningDataset, its
    observations, plans and tasks (:data:`DATASET_ARRAYS`)."""
    digest = hashlib.sha256(f'{type(dataset).__name__}:{len(dataset)}'.encode())
    for name in DATASET_ARRAYS:
        value = getattr(dataset, name, None)
        if isinstance(value, np.ndarray):
            digest.update(f'{name}{value.shape}{value.dtype}'.encode())
            digest.update(np.ascontiguousarray(value).tobytes())
    return digest.hexdigest()[:16]


def file_digest(path) -> str:
    """16 hex digits of a file's content ('' when it is no file)."""
    from vpn_plugin.datasets.file_digests import sha256_of
    return sha256_of(path)[:16] if path and os.path.isfile(str(path)) else ''


def what_this_rank_read(cfg, digests: dict, checkpoint) -> dict:
    """``{'config': {key: value}, '<split> data': digest, 'checkpoint': digest}`` of one rank
    (``digests``: ``{split: dataset_digest(dataset)}`` of the loops built; ``checkpoint``: the
    file it loads)."""
    config = flat_config(cfg.to_dict() if hasattr(cfg, 'to_dict') else cfg)
    read = {'config': config}
    for split, digest in sorted(digests.items()):
        read[f'{split} data'] = digest
    if checkpoint:
        read['checkpoint'] = f'{checkpoint} (content {file_digest(checkpoint) or "absent"})'
    return read


def disagreements(reads: list) -> list:
    """``['rank r: what (rank r's value; rank 0: value)', ...]`` for every rank whose record
    differs from rank 0's (``reads``: one :func:`what_this_rank_read` per rank)."""
    found = []
    first = reads[0]
    for rank, read in enumerate(reads[1:], start=1):
        for key in sorted(set(first) | set(read)):
            mine, theirs = read.get(key), first.get(key)
            if mine == theirs:
                continue
            if key == 'config':
                keys = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
                shown = '; '.join(f'{k}={mine.get(k, "(absent)")} (rank 0: '
                                  f'{theirs.get(k, "(absent)")})' for k in keys[:3])
                more = f' and {len(keys) - 3} more' if len(keys) > 3 else ''
                found.append(f'rank {rank}: the config differs: {shown}{more}')
            else:
                found.append(f'rank {rank}: the {key} differs ({mine or "(absent)"}; '
                             f'rank 0: {theirs or "(absent)"})')
    return found


def check_ranks_agree(read: dict) -> None:
    """Gather every rank's :func:`what_this_rank_read` and refuse, on every rank, any
    difference from rank 0 (a ``ValueError`` naming the ranks and what differs)."""
    from mmengine.dist import all_gather_object, get_world_size
    if get_world_size() < 2:
        return
    found = disagreements(all_gather_object(read))
    if found:
        raise ValueError('the processes of this distributed run read different things: '
                         + '; '.join(found) + '. Every process must read the same config, '
                         'annotations, features and checkpoint (on several nodes: the same '
                         'copies); fix the copies and run again')


def check_resume_world_size(checkpoint: dict, filename: str, world_size: int) -> None:
    """A checkpoint trained by N processes continues only with N processes."""
    recorded = (checkpoint.get('meta') or {}).get(WORLD_SIZE_KEY)
    if recorded is None or recorded == world_size:
        return
    how = ('tools/train.py CONFIG --resume' if recorded == 1
           else f'tools/dist_train.sh CONFIG {recorded} --resume')
    raise ValueError(f'--resume {filename}: trained by {recorded} process(es), this run has '
                     f'{world_size}; the batch of a step is the config\'s batch size times the '
                     f'number of processes, so the resumed run would be neither: resume it with '
                     f'{recorded} ({how}), or start a new run in another --work-dir')


def check_resume_data(checkpoint: dict, filename: str, digest: str,
                      validation: bool = False) -> None:
    """A checkpoint continues only on the training data it was trained on (``digest``: this
    run's :func:`dataset_digest` of its training set; '' when unknown); with ``validation``,
    only on the validation data its run validated on (``digest``: of this run's validation
    set): the resumed epochs' scores are compared with the run's best (``save_best``)."""
    recorded = (checkpoint.get('meta') or {}).get(VAL_DATA_KEY if validation else
                                                    TRAIN_DATA_KEY)
    if not recorded or not digest or recorded == digest:
        return
    if validation:
        raise ValueError(f'--resume {filename}: its run validated on other validation data '
                         f'(content {recorded}; this run reads {digest}): its feature files, '
                         'annotations, video lists (their order too) or split options differ, '
                         'so the resumed epochs would be '
                         "scored on other windows than the run's first ones and compared with "
                         'their best (save_best). Give the same --feature-dir / --data-root / '
                         'options, resume without validation (--no-validate), or start a new '
                         'run in another --work-dir')
    raise ValueError(f'--resume {filename}: trained on other training data (content {recorded}; '
                     f'this run reads {digest}): its feature folder, annotations, video lists '
                     '(their order too: the sampler draws windows by position) or split options '
                     '(val_fraction, subset, limit) differ, so the resumed run would train its '
                     'last epochs on other data than its first. Give the same --feature-dir / '
                     '--data-root / options, or start a new run in another --work-dir (load_from '
                     'to fine-tune from its weights)')


def check_resume_epoch(checkpoint: dict, filename: str, cfg) -> str:
    """A checkpoint past the config's ``train_cfg.max_epochs`` (resumed with max_epochs=1 at
    epoch 2) trained nothing, exited 0 and rewrote the work dir's config to say 1 epoch: refused.
    One that has trained exactly ``max_epochs`` (a complete run resumed, as the protocol's
    restart after a finished training does) trains nothing and exits 0: the returned line says
    so (the runner logs it); '' otherwise."""
    epoch = (checkpoint.get('meta') or {}).get('epoch')
    max_epochs = (cfg.get('train_cfg') or {}).get('max_epochs')
    if isinstance(epoch, int) and isinstance(max_epochs, int) and epoch == max_epochs:
        return (f'--resume {filename}: the checkpoint has trained all {epoch} epochs of '
                f"the config's train_cfg.max_epochs={max_epochs}: nothing is trained (the run "
                'is complete); test the checkpoint with tools/test.py, or give max_epochs > '
                f'{epoch} to continue it')
    if isinstance(epoch, int) and isinstance(max_epochs, int) and epoch > max_epochs:
        raise ValueError(f'--resume {filename}: the checkpoint has trained {epoch} epochs, '
                         f"past the config's train_cfg.max_epochs={max_epochs}: nothing would "
                         f'be trained; give max_epochs > {epoch} to continue it, or test the '
                         'checkpoint with tools/test.py')
    return ''
