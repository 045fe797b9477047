"""Train a vpn_plugin config with the mmengine Runner (mmaction2-style CLI).

    .venv/bin/python tools/train.py configs/vpn_crosstask_t3.py [--resume [CKPT|auto]] [--amp]
    .venv/bin/python tools/train.py configs/vpn_crosstask_t3.py --horizon 4   # = vpn_crosstask_t4.py
    .venv/bin/python tools/train.py configs/baselines/kepp_niv_t3.py --smoke  # end to end, marked
    tools/dist_train.sh configs/vpn_crosstask_t3.py 2       # torchrun, CPU or GPU

Same flags as MMAction2's ``tools/train.py`` (``--no-validate``, ``--auto-scale-lr``,
``--diff-rank-seed``, ``--launcher``, ...); the config is written to the work dir, not logged.
"""
import argparse
import contextlib
import fnmatch
import os
import os.path as osp
import re
import sys
from pathlib import Path

# torch and OpenMMLab are imported after the arguments are parsed (--help and refusals answer
# in ~0.1 s; tests/test_import_purity.py): load_config applies vpn_plugin.compat first
from vpn_plugin.data_paths import (add_runner_arguments, check_flags_agree, data_path_args,
                                  check_work_dir_option,
                                  load_config as read_config, read_config_file,
                                  set_launcher)
from vpn_plugin.errors import (check_file, check_folder_target, parse_once, path_argument,
                               seed_argument, tool_main)
from vpn_plugin.smoke import batches_reason, smoke_config, training_limit_reason


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description='Train a vpn_plugin model')
    parser.add_argument('config', type=path_argument, help='config file path')
    parser.add_argument('--work-dir', type=path_argument,
                        help='where logs and checkpoints go (default: work_dirs/<config name>)')
    parser.add_argument('--resume', type=path_argument, nargs='?', const=LATEST, metavar='CKPT',
                        help='resume from CKPT, or from the latest checkpoint of the work dir '
                        'when no CKPT is given (an error if it has none); "--resume auto": '
                        'resume if the work dir has a checkpoint, else start afresh')
    parser.add_argument('--overwrite', action='store_true',
                        help="start afresh in a work dir that holds another run's checkpoints "
                        '(they are deleted first)')
    parser.add_argument('--amp', action='store_true', help='mixed precision (needs a GPU)')
    parser.add_argument('--tensorboard', action='store_true',
                        help='also log to TensorBoard (<work-dir>/<timestamp>/vis_data)')
    parser.add_argument('--seed', type=seed_argument, help='random seed (overrides randomness.seed)')
    parser.add_argument('--deterministic', action='store_true',
                        help='deterministic cuDNN / torch algorithms')
    parser.add_argument('--smoke', action='store_true',
                        help='a smoke run of any config: 1 epoch of 4 steps, small pre-stages, '
                        'few windows (vpn_plugin/smoke.py), about a minute on a CPU, marked '
                        'shortened in its log and checkpoints (default work dir: '
                        'work_dirs/<config name>_smoke)')
    add_runner_arguments(parser, 'train_cfg.max_epochs=5')
    add_mmaction_flags(parser)
    args = parse_once(parser, argv)
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    return args


def add_mmaction_flags(parser):
    """MMAction2 ``tools/train.py`` switches not covered above."""
    parser.add_argument('--no-validate', action='store_true',
                        help='no validation during training (drops val_cfg/loader/evaluator)')
    parser.add_argument('--auto-scale-lr', action='store_true',
                        help='scale the learning rate by (total batch size) / '
                        'auto_scale_lr.base_batch_size')
    parser.add_argument('--diff-rank-seed', action='store_true',
                        help='a different seed on each distributed rank')


def apply_mmaction_flags(cfg, args):
    """Fold ``--no-validate``, ``--auto-scale-lr``, ``--diff-rank-seed`` into the config."""
    if args.no_validate:
        cfg.val_cfg = cfg.val_dataloader = cfg.val_evaluator = None
        checkpoint = cfg.get('default_hooks', {}).get('checkpoint', {})
        checkpoint.pop('save_best', None)  # nothing to select on without validation
    if args.auto_scale_lr:
        if 'base_batch_size' not in cfg.get('auto_scale_lr', {}):
            raise SystemExit(f'--auto-scale-lr: {args.config} has no '
                             'auto_scale_lr.base_batch_size (the batch size its lr is for)')
        cfg.auto_scale_lr.enable = True
    if args.diff_rank_seed:
        cfg.setdefault('randomness', dict(seed=None))['diff_rank_seed'] = True


def default_work_dir(config_path, smoke: bool = False):
    name = osp.splitext(osp.basename(config_path))[0]
    return osp.join('work_dirs', name + ('_smoke' if smoke else ''))


def work_dir_of(cfg, args) -> str:
    """``--work-dir``, else the config's ``work_dir`` (not for a smoke run), else
    ``work_dirs/<config name>[_smoke]``."""
    return (args.work_dir or (None if args.smoke else cfg.get('work_dir'))
            or default_work_dir(args.config, args.smoke))


def enable_amp(cfg):
    import torch
    if not torch.cuda.is_available():
        raise SystemExit('--amp needs a CUDA GPU (mmengine AmpOptimWrapper); '
                         'this machine has none, run without --amp')
    cfg.optim_wrapper.type = 'AmpOptimWrapper'
    cfg.optim_wrapper.setdefault('loss_scale', 'dynamic')


LATEST = '<latest>'  # --resume without CKPT


def existing_checkpoints(work_dir, template=None) -> list:
    """The files a training run writes directly in ``work_dir``: its epoch / iteration
    checkpoints (``epoch_N.pth``, ``iter_N.pth``, or the config's checkpoint ``template``,
    ``engine.checkpoint.checkpoint_template``), its best checkpoints (``best_*.pth``) and mmengine's
    ``last_checkpoint`` record; the pre-stage files (``engine.pre_stage.PRE_STAGE_FILES``: a
    finished task classifier or KEPP step model, reused by any start in the work dir) are
    none. Another ``.pth`` beside them (a user's ``s3d_howto100m.pth``) is no run's: never
    counted, and never deleted by ``--overwrite`` (which deleted every ``*.pth``)."""
    from vpn_plugin.engine.checkpoint import LAST_CHECKPOINT, checkpoint_names
    from vpn_plugin.engine.checkpoint_hook import BEST_PATTERN
    from vpn_plugin.engine.pre_stage import PRE_STAGE_FILES
    folder = Path(work_dir)
    names = [checkpoint_names(template).pattern, fnmatch.translate(BEST_PATTERN),
             re.escape(LAST_CHECKPOINT) + '$']
    written = re.compile('|'.join(f'(?:{name})' for name in names))
    return sorted(p for p in folder.iterdir() if written.match(p.name)
                  and p.name not in PRE_STAGE_FILES and (p.is_file() or p.is_symlink())) \
        if folder.is_dir() else []


def pre_stage_note(work_dir) -> str:
    """'; its finished pre-stages (kepp_step_model.pth) are reused by any start' or ''."""
    from vpn_plugin.engine.pre_stage import PRE_STAGE_FILES
    found = sorted(name for name in PRE_STAGE_FILES if (Path(work_dir) / name).is_file())
    return (f'; its finished pre-stages ({", ".join(found)}) are reused by any start (checked '
            'against the config; delete one to retrain it)' if found else '')


def set_resume(cfg, resume, launcher: str = 'none'):
    """``--resume CKPT`` / ``--resume`` (latest, must exist) / ``--resume auto`` (latest if
    any, else a fresh start). Resolved by every process of a distributed run before it starts
    (no rank is known to the loggers yet): rank 0 alone (:func:`launch_rank`) says what it
    found, once."""
    from vpn_plugin.engine.checkpoint import checkpoint_template, latest_checkpoint_in
    from vpn_plugin.engine.checkpoint_hook import best_checkpoints, no_resume_point_note
    if resume not in (LATEST, 'auto'):
        check_file(resume, '--resume', missing=f'--resume {resume}: no such checkpoint file')
        cfg.resume, cfg.load_from = True, resume
        return
    first = launch_rank(launcher) == 0
    try:  # resolved inside the work dir: a copied or moved work dir resumes from its own files
        latest = latest_checkpoint_in(cfg.work_dir, logger='current' if first else 'silent',
                                      template=checkpoint_template(cfg))
    except ValueError as error:
        raise SystemExit(f'--resume: {error}') from None
    if latest is not None and not osp.isfile(latest):
        raise SystemExit(f'--resume: {cfg.work_dir}/last_checkpoint names {latest!r}, which is '
                         'no checkpoint file; give the CKPT to resume from')
    if latest is None and resume == LATEST:
        best = no_resume_point_note(cfg.work_dir)
        raise SystemExit(f'--resume: the work dir {cfg.work_dir} holds no checkpoint to resume '
                         f'from{best}' + ('' if best else '; give a CKPT, "--resume auto" to '
                                          'start afresh when there is none, or no --resume')
                         + pre_stage_note(cfg.work_dir))
    cfg.resume = latest is not None  # auto with nothing to resume: a fresh start
    if latest is not None:
        cfg.load_from = latest
    elif not first:
        return
    elif best := best_checkpoints(cfg.work_dir):  # requeued between best and epoch_1
        print(f'warning: --resume auto: {cfg.work_dir} holds no epoch checkpoint to resume, '
              f'only {", ".join(best)} (best validation weights, no '
              'optimizer or schedule state: not a resume point): the run starts afresh and '
              'replaces it', file=sys.stderr)
    else:
        print(f'--resume auto: {cfg.work_dir} holds no checkpoint to resume from: the run '
              'starts afresh', file=sys.stderr)


def check_resume_load_from(args) -> None:
    """``--resume`` continues the work dir's latest checkpoint (or its CKPT): a
    ``--cfg-options load_from=X`` given with it was replaced without a word (mmengine's own
    resume=True would continue X), or met "holds no checkpoint to resume from"."""
    if (args.cfg_options or {}).get('resume', True) is False:
        raise SystemExit(f'--resume{"" if args.resume == LATEST else " " + args.resume} and '
                         '--cfg-options resume=False contradict each other; give one of the two')
    given = (args.cfg_options or {}).get('load_from')
    if given is None or (args.resume not in (LATEST, 'auto')
                         and osp.abspath(str(given)) == osp.abspath(args.resume)):
        return
    resumed = 'the work dir\'s latest checkpoint' if args.resume in (LATEST, 'auto') \
        else args.resume
    raise SystemExit(f'--resume continues {resumed}, and --cfg-options load_from={given} would '
                     f'be dropped: to continue {given}, give --resume {given}; to start a new '
                     'run from its weights, give load_from without --resume')


def require_trainable(model, config) -> None:
    """A model without a trainable parameter (the uniform-emission PKG baseline) is evaluated,
    not trained: torch's "optimizer got an empty parameter list" named neither."""
    if not any(p.requires_grad for p in model.parameters()):
        raise SystemExit(f'{config}: {type(getattr(model, "module", model)).__name__} has no '
                         'trainable parameter: nothing to train; evaluate it with tools/test.py '
                         f'{config} (no checkpoint)')


def check_fresh_work_dir(cfg, overwrite: bool) -> None:
    """A fresh run never mixes its checkpoints with another run's: refuse a work dir that
    holds some unless ``--overwrite`` (which deletes them)."""
    from vpn_plugin.engine.checkpoint import checkpoint_template, latest_checkpoint_in
    from vpn_plugin.engine.checkpoint_hook import no_resume_point_note
    template = checkpoint_template(cfg)
    found = existing_checkpoints(cfg.work_dir, template)
    if found and not overwrite:
        best_only = (no_resume_point_note(cfg.work_dir)
                     if latest_checkpoint_in(cfg.work_dir, template=template) is None else '')
        raise SystemExit(f'the work dir {cfg.work_dir} already holds checkpoints of another run '
                         f'({", ".join(p.name for p in found[:4])}{" ..." * (len(found) > 4)})'
                         + (best_only or '; continue it with --resume, or start afresh with '
                            '--overwrite (deletes them), or pick another --work-dir')
                         + pre_stage_note(cfg.work_dir))
    check_spares_inputs(found, cfg)
    for path in found:
        path.unlink()
    if found:
        print(f'--overwrite: deleted {", ".join(p.name for p in found)} of the earlier run in '
              f'{cfg.work_dir}', file=sys.stderr)


def check_spares_inputs(found, cfg) -> None:
    """``--overwrite`` deletes the work dir's checkpoints, never a file this run reads:
    ``--overwrite --cfg-options load_from=<work dir>/pretrained.pth`` deleted the weights it
    was to start from, then failed on the missing file."""
    from vpn_plugin.outputs import input_reading
    config = cfg.to_dict()
    if config.get('load_from'):  # given relative to the working directory
        config['load_from'] = osp.abspath(str(config['load_from']))
    for path in found:
        read = input_reading(path, config)
        if read and read[1] == 'a file':
            raise SystemExit(f'--overwrite would delete {path}, a file this run reads '
                             f'({read[0]}); move it out of the work dir {cfg.work_dir} and point '
                             f'{read[0]} at its new place, then start again')


def mark_fewer_epochs(cfg, args) -> None:
    """``--cfg-options train_cfg.max_epochs=N`` below the config file's, or a training split
    cut to ``limit`` windows: the run is marked shortened (its log, checkpoints and their
    tests say so), as the protocol's --max-epochs."""
    if cfg.get('shortened'):
        return
    reasons = []
    epochs = (args.cfg_options or {}).get('train_cfg.max_epochs')
    if epochs is not None:
        planned = (read_config_file(args.config).get('train_cfg') or {}).get('max_epochs')
        if isinstance(planned, int) and isinstance(epochs, int) and epochs < planned:
            reasons.append(f'max_epochs={epochs} (config: {planned})')
    limit = ((cfg.get('train_dataloader') or {}).get('dataset') or {}).get('limit')
    if limit is not None:
        reasons.append(training_limit_reason(limit))
    batches = (cfg.get('train_dataloader') or {}).get('num_batch_per_epoch')
    if batches is not None:  # mmengine cuts the training split to that many batches: unmarked
        reasons.append(batches_reason(batches))
    if reasons:
        cfg.shortened = '; '.join(reasons)


def apply_args(cfg, args):
    """Fold the command-line switches into the config (CLI wins over the file)."""
    if any(key in cfg and cfg[key] is None for key in ('train_dataloader', 'train_cfg')):
        raise SystemExit(f'{args.config}: train_dataloader / train_cfg = None: this config is '
                         'evaluated, not trained (e.g. an LLM baseline): run tools/test.py on it')
    set_launcher(cfg, args)
    if args.smoke:
        smoke_config(cfg)
    else:
        mark_fewer_epochs(cfg, args)
    cfg.work_dir = work_dir_of(cfg, args)
    if args.amp:
        enable_amp(cfg)
    if args.overwrite and (args.resume is not None or cfg.get('resume')):
        raise SystemExit('--overwrite deletes the checkpoints of the work dir and --resume (or '
                         "the config's resume=True) continues from them: give one of the two")
    if args.resume is not None:
        check_resume_load_from(args)
        set_resume(cfg, args.resume, args.launcher)
    elif not cfg.get('resume'):
        check_fresh_work_dir(cfg, args.overwrite)
    randomness = cfg.setdefault('randomness', dict(seed=None))
    if args.seed is not None:
        check_flags_agree(args.cfg_options, {'--seed': ('randomness.seed', args.seed)})
        randomness['seed'] = args.seed
    check_switches_agree(args)
    if args.deterministic:
        randomness['deterministic'] = True
    if args.tensorboard:
        cfg.visualizer.vis_backends.append(dict(type='TensorboardVisBackend'))
    apply_mmaction_flags(cfg, args)
    return cfg


NO_VALIDATE_KEYS = ('val_cfg', 'val_dataloader', 'val_evaluator',
                    'default_hooks.checkpoint.save_best')  # what --no-validate drops


def check_switches_agree(args) -> None:
    """A switch given with a ``--cfg-options`` key that says otherwise (``--deterministic``
    with ``randomness.deterministic=False``; ``--auto-scale-lr`` with ``auto_scale_lr.enable=
    False`` scaled the learning rate; ``--no-validate`` with ``val_dataloader.batch_size=8``):
    the switch won and the option was dropped without a word; refused naming both, as
    ``--seed`` against ``randomness.seed``."""
    options = args.cfg_options or {}
    check_flags_agree(options, {
        '--deterministic': ('randomness.deterministic', True if args.deterministic else None),
        '--auto-scale-lr': ('auto_scale_lr.enable', True if args.auto_scale_lr else None),
        '--diff-rank-seed': ('randomness.diff_rank_seed', True if args.diff_rank_seed else None)})
    dropped = [key for key in options if args.no_validate and any(
        (key == name and options[key] is not None)  # name=None says what --no-validate does
        or key.startswith(name + '.') for name in NO_VALIDATE_KEYS)]
    if dropped:
        raise ValueError(f'--no-validate drops the validation loop and --cfg-options '
                         f'{dropped[0]}={options[dropped[0]]} sets it; give one of the two')


def load_config(args):
    cfg = read_config(args.config, args.cfg_options, horizon=args.horizon,
                      **data_path_args(args))
    return apply_args(cfg, args)


def launch_rank(launcher: str = 'none') -> int:
    """This process's rank before ``init_dist``: the launcher's variables (torchrun's
    ``RANK``, Slurm's ``SLURM_PROCID``); 0 for a run of one process."""
    return int(os.environ.get('RANK') or (os.environ.get('SLURM_PROCID') if launcher == 'slurm'
                                          else None) or '0')


def work_dir_lock(work_dir, launcher: str = 'none'):
    """The work dir's lock (``vpn_plugin.locks``), held from the check that it holds no other
    run's checkpoints to the end of the training: a second training started into the same
    work dir meanwhile is refused instead of overwriting this one's checkpoints (rank 0 holds
    it for all ranks). A refused training removes the lock file it made."""
    from vpn_plugin.locks import exclusive_lock, lock_path_of
    if launch_rank(launcher) != 0:
        return contextlib.nullcontext()
    return exclusive_lock(lock_path_of(work_dir), wait=False, what=f'work dir {work_dir}',
                          discard_if_refused=True)  # a refused training leaves no lock file


@tool_main
def main(argv=None):
    args = parse_args(argv)
    check_work_dir_option(args, 'a --smoke run writes to work_dirs/<config name>_smoke'
                          if args.smoke else '')
    cfg = read_config(args.config, args.cfg_options, horizon=args.horizon,
                      **data_path_args(args))
    check_folder_target(work_dir_of(cfg, args))  # before its lock file is made beside it
    from vpn_plugin.compat import shutdown_distributed
    from vpn_plugin.runner import build_runner, evaluator_output_locks
    with work_dir_lock(work_dir_of(cfg, args), args.launcher), evaluator_output_locks(cfg):
        runner = build_runner(apply_args(cfg, args))
        with runner.nothing_left_if_refused('before_train'):  # no log folder of a refusal
            require_trainable(runner.model, args.config)
        runner.train()
    shutdown_distributed()


if __name__ == '__main__':
    main()
    from vpn_plugin.compat import exit_distributed_rank
    exit_distributed_rank()
