"""Evaluate a checkpoint on a config's test split with the mmengine Runner.

    .venv/bin/python tools/test.py configs/vpn_crosstask_t3.py work_dirs/.../epoch_50.pth \
        [--out predictions.pkl] [--out-metrics metrics.json]
    .venv/bin/python tools/test.py CONFIG CKPT --limit 100   # 100 test windows, marked
    tools/dist_test.sh CONFIG CHECKPOINT NPROC [test.py args...]      # torchrun, CPU or GPU

As in MMAction2/mmdet, ``--out`` (alias ``--dump``) pickles the predictions (one dict per test
sample: ``pred_plan``, ``gt_plan``, ``soft_plan``, ``emissions``, ...) through mmengine's
``DumpResults``, written atomically (``AtomicDumpResults``); the metrics go to ``--out-metrics``,
by default ``<log dir>/test_metrics.json``. Without ``--work-dir`` the log dir is a timestamped
folder beside the checkpoint (its run's work dir), never ``work_dirs/<config name>``, which may
be another run's. ``--limit N`` scores N test windows stratified over tasks (those
``llm_eval.py --limit N`` plans) and ``--smoke`` the smoke run's (``vpn_plugin/smoke.py``); such
metrics, and those of a shortened run's checkpoint (``meta['shortened']``, e.g. ``train.py
--smoke``), and of a checkpoint whose EMA weights are not the trained ones its config's EMA
hook asks for (``PlanningRunner.tested_ema_mark``: an EMA that never took the model, a
checkpoint without EMA state), are marked: a warning line and ``"shortened"`` in
``test_metrics.json``.
"""
import argparse
import contextlib
import json
import os
import os.path as osp

# torch and OpenMMLab are imported after the arguments are parsed (--help and refusals answer
# in ~0.1 s; tests/test_import_purity.py): load_config applies vpn_plugin.compat first
from vpn_plugin.data_paths import (add_runner_arguments, check_flags_agree, data_path_args,
                                  check_work_dir_option,
                                  load_config as read_config, set_launcher)
from vpn_plugin.errors import (POSITIVE_INT, check_file, parse_once, path_argument, tool_main,
                               write_text_atomically)
from vpn_plugin.outputs import (add_overwrite_argument, check_output,
                                check_spares_config_inputs)
from vpn_plugin.smoke import SMOKE, limit_test_windows

UNCHECKED_METRIC = 'checkpoint/unchecked'  # in the metrics of an unchecked_checkpoint=True test


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description='Test a vpn_plugin checkpoint')
    parser.add_argument('config', type=path_argument, help='config file path')
    parser.add_argument('checkpoint', nargs='?', type=path_argument,
                        help='checkpoint file (.pth); may be omitted only for models without '
                        'trainable parameters (e.g. LLMPlanner, UniformEmissionPlanner)')
    parser.add_argument('--work-dir', type=path_argument,
                        help='where logs and test_metrics.json go (default: the '
                        "checkpoint's folder, i.e. its run's work dir; without a checkpoint "
                        'work_dirs/<config name>)')
    parser.add_argument('--out', '--dump', type=path_argument, dest='out', metavar='FILE.pkl',
                        help='pickle the predictions (list of per-sample dicts) to this file')
    parser.add_argument('--out-metrics', type=path_argument, metavar='FILE.json',
                        help='write the test metrics here (default: <log dir>/test_metrics.json)')
    parser.add_argument('--limit', type=POSITIVE_INT, metavar='N',
                        help='score N test windows drawn stratified over tasks (the windows '
                        'llm_eval.py --limit N plans); the metrics are marked shortened')
    parser.add_argument('--smoke', action='store_true',
                        help=f'the smoke run\'s test: --limit {SMOKE["test_windows"]} '
                        '(vpn_plugin/smoke.py)')
    add_overwrite_argument(parser, '--out / --out-metrics files')
    add_runner_arguments(parser, 'test_dataloader.batch_size=64')
    args = parse_once(parser, argv)
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    return args


def check_outputs(args) -> None:
    """``--out`` and ``--out-metrics`` may replace neither an input (the config, the
    checkpoint) nor a file of another kind (vpn_plugin/outputs.py), before the test runs."""
    inputs = (args.config, args.checkpoint)
    if args.out is not None:
        args.out = str(check_output(args.out, 'predictions', '--out', inputs, args.overwrite))
    if args.out_metrics is not None:
        args.out_metrics = str(check_output(args.out_metrics, 'metrics', '--out-metrics',
                                            inputs, args.overwrite))


def add_dump(cfg, dump_path):
    evaluators = cfg.test_evaluator
    if not isinstance(evaluators, (list, tuple)):
        evaluators = [evaluators]
    cfg.test_evaluator = [*evaluators, dict(type='AtomicDumpResults', out_file_path=dump_path)]


def load_config(args):
    if 'load_from' in (args.cfg_options or {}):
        raise SystemExit(f"--cfg-options load_from={args.cfg_options['load_from']}: test.py "
                         'scores the CKPT argument (given: '
                         f'{args.checkpoint or "none"}); give the checkpoint to test as CKPT, '
                         'not as load_from')
    check_work_dir_option(args, 'the test writes beside its checkpoint'
                          if args.checkpoint is not None else '')
    if args.checkpoint is not None:
        check_file(args.checkpoint, 'checkpoint')
    cfg = read_config(args.config, args.cfg_options, horizon=args.horizon,
                      **data_path_args(args))
    set_launcher(cfg, args)
    cfg.work_dir = test_work_dir(args, cfg)
    if args.limit and args.smoke:  # --smoke --limit 5 scored 5 windows, --smoke unsaid
        raise SystemExit(f'--smoke scores the smoke run\'s {SMOKE["test_windows"]} test windows '
                         f'and --limit {args.limit} scores {args.limit}: give one of the two')
    if args.limit or args.smoke:
        # --limit 10 with --cfg-options test_dataloader.dataset.limit=20 scored 10, unsaid
        check_flags_agree(args.cfg_options, {
            '--limit' if args.limit else '--smoke': ('test_dataloader.dataset.limit',
                                                     args.limit or SMOKE['test_windows'])})
        limit_test_windows(cfg, args.limit or SMOKE['test_windows'])
    cfg.load_from = args.checkpoint
    cfg.resume = False
    if cfg.get('load_partial'):
        raise SystemExit(f'{args.config}: load_partial=True is for starting a fine-tuning '
                         '(tools/train.py); a test scores a checkpoint that fits the model '
                         'exactly: drop load_partial')
    check_distinct_outputs(args, cfg)
    if args.out:
        add_dump(cfg, args.out)
    return cfg


def check_distinct_outputs(args, cfg) -> None:
    """``--out`` / ``--out-metrics`` and an evaluator's ``out_file`` name different files (the
    metrics JSON would replace the per-sample dump just written)."""
    evaluators = cfg.get('test_evaluator')
    for evaluator in evaluators if isinstance(evaluators, (list, tuple)) else [evaluators]:
        out_file = evaluator.get('out_file') if isinstance(evaluator, dict) else None
        for flag, path in (('--out-metrics', args.out_metrics), ('--out', args.out)):
            if out_file and path and os.path.abspath(out_file) == os.path.abspath(path):
                raise SystemExit(f'{flag} {path} is also test_evaluator.out_file (the per-sample '
                                 'dump): one would replace the other; give two file names')


def test_work_dir(args, cfg) -> str:
    """Where the test's timestamped log dir goes: ``--work-dir``; else the checkpoint's folder
    (the run that wrote it: its test sits beside its training, never in another run's folder
    that happens to bear the config's name), refused when not writable; else (no checkpoint)
    the config's ``work_dir`` or ``work_dirs/<config name>``."""
    if args.work_dir:
        return args.work_dir
    if args.checkpoint is not None:
        folder = osp.dirname(osp.abspath(args.checkpoint))
        if not os.access(folder, os.W_OK):
            raise SystemExit(f'the test log and test_metrics.json go beside the checkpoint, in '
                             f'{folder}, which is not writable; give --work-dir DIR')
        return folder
    return cfg.get('work_dir') or osp.join('work_dirs',
                                           osp.splitext(osp.basename(args.config))[0])


def require_parameter_free(model, config):
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    if trainable:
        raise SystemExit(f'{config}: the model has {trainable} trainable parameters; '
                         'pass the checkpoint to test')


def shortened_reasons(runner) -> str:
    """Why these metrics are not the full test of a full run ('' when they are): the loaded
    checkpoint's ``meta['shortened']``, EMA weights that are not the trained ones the config
    asks for (``PlanningRunner.tested_ema_mark``), the limited test windows and the test
    videos ``skip_bad_videos`` skipped."""
    reasons = [getattr(runner, 'loaded_shortened', ''), getattr(runner, 'tested_ema_mark', '')]
    limited = getattr(runner.test_dataloader.dataset, 'limited', None)
    if limited:
        reasons.append(f'limit={limited[0]} of {limited[1]} test windows')
    skipped = getattr(runner.test_dataloader.dataset, 'skipped', None)
    if skipped:  # skip_bad_videos=True: the windows of those videos are not scored
        reasons.append('skip_bad_videos: test videos skipped (' + ', '.join(
            f'{n} {reason}' for reason, n in sorted(skipped.items())) + ')')
    return '; '.join(reason for reason in reasons if reason)


def test_notes(runner) -> dict:
    """What the metrics JSON names beside the numbers: the test and training horizons
    (:func:`tested_horizons`), the options (and the training feature
    files) this test changed from the checkpoint's training (``changed_from_training``, a list
    of strings), what the checkpoint records too little to compare (``not_compared``, a list of
    strings: ``engine.checkpoint.not_compared``), the features whose statistics differ from the
    training features' (``feature_statistics``), and the test windows the window policy
    dropped (not scored) or relabelled (features shorter than the annotated steps: 267 of 270
    NIV windows dropped and the metrics said nothing), and the test feature files read that
    record a damaged video (``damaged_features``: '<file>: <note>' each), the checkpoint's
    tensors stored in a coarser float than the model's (``reduced_precision``: a float16 or
    bfloat16 file), how limited test windows were drawn (``sample_draw``:
    :data:`~vpn_plugin.core.stats.SAMPLE_DRAW`), a graph read from a released file
    (``test_set_pkg``: :func:`test_set_pkg_note`), and the annotations scored (``data_root``:
    the test set's root after ``--data-root`` / the config / the environment,
    ``provenance.data_root_record``)."""
    from vpn_plugin.core.stats import SAMPLE_DRAW
    from vpn_plugin.datasets.provenance import data_root_record
    dataset = getattr(getattr(runner, 'test_dataloader', None), 'dataset', None)
    dropped = 'dropped' in (getattr(dataset, 'window_counts', None) or {})
    return dict(changed_from_training=_strings(getattr(runner, 'changed_from_training', ())),
                not_compared=_strings(getattr(runner, 'not_compared', ())),
                feature_statistics=getattr(runner, 'feature_statistics_note', ''),
                test_windows=dataset.window_count_summary() if dropped else '',
                damaged_features=getattr(runner, 'damaged_test_files', list)(),
                reduced_precision=getattr(runner, 'reduced_precision_note', ''),
                sample_draw=SAMPLE_DRAW if getattr(dataset, 'limited', None) else '',
                test_set_pkg=test_set_pkg_note(getattr(runner, 'model', None)),
                data_root=data_root_record(dataset),
                **tested_horizons(getattr(runner, 'model', None), dataset))


def test_set_pkg_note(model) -> str:
    """'' unless the tested planner's graph was read from a released graph file (KEPP's
    ``test_set_pkg`` buffer, what a results row marks): then the log's warning, which the
    metrics file carries too (it said nothing of it)."""
    model = getattr(model, 'module', model)  # a distributed wrapper
    flag = getattr(model, 'test_set_pkg', None)
    if flag is None or not bool(flag):
        return ''
    from vpn_plugin.models.kepp import released_graph_note
    return released_graph_note(getattr(model, 'released_graph', None))


def tested_horizons(model, dataset) -> dict:
    """``{'horizon': T', 'train_horizon': T}`` of a planner's test ({} for a model without a
    horizon): the test windows' horizon and the one the model was built for, which a loaded
    checkpoint's recorded training horizon must equal (``engine.checkpoint.meta_mismatches``),
    as a results row names them (``configs/vpn_niv_t6_eval_t3.py``: 3 and 6)."""
    model = getattr(model, 'module', model)  # a distributed wrapper
    horizons = (getattr(dataset, 'horizon', None), getattr(model, 'horizon', None))
    if not all(isinstance(h, int) and not isinstance(h, bool) for h in horizons):
        return {}
    return dict(horizon=horizons[0], train_horizon=horizons[1])


def _strings(value) -> list:
    """A note as a JSON list of strings (one string stays one entry)."""
    if isinstance(value, str):
        return [value] if value else []
    return [str(item) for item in value or () if item]


def write_metrics(metrics, path, shortened: str = '', notes: dict = None):
    """The metrics as floats, and the marks of what they are not: ``shortened`` and the
    ``notes`` that are set (e.g. ``changed_from_training``)."""
    values = {key: float(value) for key, value in metrics.items()}
    if shortened:
        values['shortened'] = shortened
    values.update({key: note for key, note in (notes or {}).items() if note})
    write_text_atomically(path, json.dumps(values, indent=2), 'metrics file')


def output_locks(args) -> contextlib.ExitStack:
    """Rank 0 holds a lock on each output file given (``--out``, ``--out-metrics``) for the
    whole test: a second test writing there at the same time is refused at its start (two
    tests at once into one --out-metrics both exited 0, the first one's numbers replaced by
    the second's without a word). A refused test removes the lock files it made."""
    from vpn_plugin.locks import exclusive_lock, lock_path_of
    stack = contextlib.ExitStack()
    if os.environ.get('RANK', '0') != '0':  # torchrun's other ranks write nothing
        return stack
    for flag, path in (('--out', args.out), ('--out-metrics', args.out_metrics)):
        if path is not None:
            stack.enter_context(exclusive_lock(lock_path_of(path), wait=False,
                                               what=f'{flag} {path}', discard_if_refused=True))
    return stack


@tool_main
def main(argv=None):
    args = parse_args(argv)
    check_outputs(args)
    with output_locks(args):
        return run_test(args)


def run_test(args):
    from vpn_plugin.runner import evaluator_output_locks
    cfg = load_config(args)
    for flag, path, kind in (('--out', args.out, 'predictions'),
                             ('--out-metrics', args.out_metrics, 'metrics')):
        check_spares_config_inputs(path, kind, flag, cfg.to_dict())
    with evaluator_output_locks(cfg):
        return test_locked(args, cfg)


def test_locked(args, cfg):
    from vpn_plugin.compat import shutdown_distributed
    from vpn_plugin.runner import build_runner
    runner = build_runner(cfg)
    if args.checkpoint is None:
        with runner.nothing_left_if_refused('before_test'):  # no log folder of a refusal
            require_parameter_free(runner.model, args.config)
    metrics = runner.test()
    runner.logger.info(f"model selection: {runner.cfg.get('selection', 'unified')} "
                       '(unified: held-out training videos; authors: best test-window SR)')
    if runner.unchecked_checkpoint:  # unchecked_checkpoint=True: the metrics say so
        metrics = dict(metrics, **{UNCHECKED_METRIC: 1.0})
        runner.logger.warning(f'{UNCHECKED_METRIC}=1: {args.checkpoint} records no '
                              f'{", ".join(runner.unchecked_checkpoint)}; not checked')
    shortened = shortened_reasons(runner)
    if shortened:
        runner.logger.warning(f'SHORTENED: these metrics are not the full test of a full run '
                              f'({shortened})')
    if runner.rank == 0:
        path = args.out_metrics or osp.join(runner.log_dir, 'test_metrics.json')
        write_metrics(metrics, path, shortened, test_notes(runner))
        runner.logger.info(f'test metrics written to {path}' + (
            ' (marked shortened)' if shortened else ''))
    shutdown_distributed()
    return metrics


if __name__ == '__main__':
    main()
    from vpn_plugin.compat import exit_distributed_rank
    exit_distributed_rank()
