"""Evaluate an LLM or VLM prompting baseline on a config's test windows.

A command line over ``LLMPlanner``, the model that ``configs/llm/*`` run through
``tools/test.py``: this tool adds stratified ``--limit`` samples, step-model anchors, the VLM
mode's clips and protocol results rows.

    .venv/bin/python tools/llm_eval.py --config configs/vpn_crosstask_t3.py \
        --base-url https://api.openai.com/v1 --model gpt-4o-mini --api-key-env OPENAI_API_KEY \
        [--with-pkg] [--vlm --video-root videos/] [--limit 100] [--concurrency 8] \
        [--step-config CFG --step-checkpoint CKPT | --anchors-file preds.json]

Without a step model the first/last actions are the ground truth: the ORACLE setting, labelled
so in the results (variant ``anchors=oracle``). Replies are cached under ``--cache-dir`` (keyed
by base URL, model, prompt and sampling parameters): a repeated or interrupted run never pays
twice for a request that succeeded.
Writes a protocol results row (``--out``, JSON Lines; a rerun replaces its own row), per-window
outcomes and a summary. A request that still fails after the retries is printed with its cause
and the run exits with status 1 writing nothing, unless ``--allow-failures`` (the row then
counts the failures by kind). The windows come from the annotations alone: no feature file is
read, except by a ``--step-config`` step model.
"""
import argparse
import json
import re
import sys
from pathlib import Path

# vpn_plugin.mm (torch, OpenMMLab: compat + registries) is imported after the arguments are
# parsed (--help and refusals answer in ~0.1 s; tests/test_import_purity.py)
from vpn_plugin.data_paths import (PATH_VARIABLES, add_cfg_options, add_data_arguments,
                                   data_path_args, load_config, row_config_path,
                                   row_options)
from vpn_plugin.outputs import add_overwrite_argument, check_output, has_suffix
from vpn_plugin.errors import (NON_NEGATIVE_FLOAT, NON_NEGATIVE_INT, POSITIVE_FLOAT, POSITIVE_INT,
                               parse_once, path_argument, seed_argument, text_argument, tool_main,
                               write_text_atomically)


VLM_DEFAULTS = {'num_frames': 4, 'frames_fps': 1.0}  # options of --vlm alone


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--config', type=path_argument,
                        required=True, help='config with train/test dataloaders')
    parser.add_argument('--base-url', type=text_argument,
                        help='OpenAI-compatible endpoint, e.g. http://localhost:8000/v1')
    parser.add_argument('--model', type=text_argument,
                        required=True, help='model name (a local path with '
                        '--backend transformers)')
    parser.add_argument('--api-key-env', type=text_argument,
                        help='environment variable holding the API key '
                        '(default OPENAI_API_KEY, or "EMPTY" for local servers)')
    parser.add_argument('--backend', choices=['openai', 'transformers'], default='openai')
    parser.add_argument('--with-pkg', action='store_true', help='put the PKG in the prompt')
    parser.add_argument('--prompt-set', choices=('ours', 'paper'), default='ours',
                        help="prompt templates: ours (prompts/) or the paper's printed prompts "
                        '(prompts/paper/, README there)')
    parser.add_argument('--vlm', action='store_true', help='two-stage VLM mode from video clips')
    parser.add_argument('--video-root', type=path_argument,
                        help='VLM: folder of <vid>.mp4 files or <vid>/ frames')
    parser.add_argument('--num-frames', type=POSITIVE_INT,
                        help=f'VLM: frames per clip (default {VLM_DEFAULTS["num_frames"]})')
    parser.add_argument('--frames-fps', type=POSITIVE_FLOAT,
                        help='VLM: frame rate of frames folders (default '
                        f'{VLM_DEFAULTS["frames_fps"]})')
    parser.add_argument('--limit', type=POSITIVE_INT, help='plan N test windows drawn with --seed, '
                        'stratified over tasks (the results row is marked shortened)')
    parser.add_argument('--concurrency', type=POSITIVE_INT, default=4, help='requests in flight')
    parser.add_argument('--anchors-file', type=path_argument,
                        help='step-model first/last predictions (JSON/npz)')
    parser.add_argument('--step-config', type=path_argument,
                        help='config whose model is the step model '
                        '(e.g. PKGBeamSearchPlanner)')
    parser.add_argument('--step-checkpoint', type=path_argument, help='checkpoint of --step-config')
    parser.add_argument('--save-anchors', type=path_argument,
                        help='write the step-model anchors to this JSON file')
    parser.add_argument('--scope', choices=['task', 'dataset'], default='task',
                        help="taxonomy in the prompt: the window's task or the whole dataset")
    parser.add_argument('--num-examples', type=NON_NEGATIVE_INT, default=5)
    parser.add_argument('--seed', type=seed_argument, default=0, help='example sampling seed')
    parser.add_argument('--temperature', type=NON_NEGATIVE_FLOAT, default=0.0)
    parser.add_argument('--max-tokens', type=POSITIVE_INT, help='reply length limit')
    parser.add_argument('--timeout', type=POSITIVE_FLOAT, default=60.0, help='seconds per request')
    parser.add_argument('--max-retries', type=NON_NEGATIVE_INT, default=5)
    parser.add_argument('--backoff', type=NON_NEGATIVE_FLOAT, default=1.0, help='first retry wait (s)')
    parser.add_argument('--allow-failures', action='store_true',
                        help='write the results row even when requests failed after the '
                        'retries (scored as wrong plans; the row counts them by kind)')
    parser.add_argument('--cache-dir', type=path_argument, default='work_dirs/llm_cache')
    parser.add_argument('--out', type=path_argument, default='work_dirs/llm_eval/results.jsonl',
                        help='protocol results file (.jsonl); a rerun replaces its own row')
    parser.add_argument('--method', type=text_argument,
                        help='method name in the results (default: from the model)')
    parser.add_argument('--price-per-1k', nargs='+', type=NON_NEGATIVE_FLOAT, metavar='PRICE',
                        help='price per 1000 tokens (one for all, or PROMPT COMPLETION): the '
                        "results row's usage gets cost_of_answers (every answer used, cached ones "
                        'included) and cost_paid (the requests of this run); tools/report.py: '
                        'Cost and Paid columns')
    parser.add_argument('--no-progress', action='store_true')
    add_overwrite_argument(parser, '--save-anchors and the files beside --out')
    add_cfg_options(parser, 'override config keys (only those llm_eval reads)')
    add_data_arguments(parser)
    args = parse_once(parser, argv)
    check_args(parser, args)
    return args


def check_args(parser, args):
    if args.backend == 'openai' and not args.base_url:
        parser.error('--base-url is required with the openai backend')
    if args.base_url:  # http://h/v1/ is http://h/v1: one endpoint, one cache, one results row
        args.base_url = args.base_url.rstrip('/') or args.base_url
    if args.backend == 'transformers' and (args.base_url or args.api_key_env):
        given = '--base-url' if args.base_url else '--api-key-env'  # unread, yet in the row
        parser.error(f'{given} is for the openai backend; --backend transformers runs the local '
                     f'model {args.model} in this process: drop {given}')
    if args.vlm and not args.video_root:
        parser.error('--vlm needs --video-root (videos or frames folders of the test windows)')
    given = [f'--{name.replace("_", "-")}' for name in ('video_root', *VLM_DEFAULTS)
             if getattr(args, name) is not None]
    if given and not args.vlm:  # read by nothing: the run would plan from text alone
        parser.error(f'{" and ".join(given)} {"is" if len(given) == 1 else "are"} for the VLM '
                     'mode: add --vlm, or drop ' + ' and '.join(given))
    for name, default in VLM_DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    if bool(args.step_config) != bool(args.step_checkpoint):
        parser.error('--step-config and --step-checkpoint go together')
    if args.anchors_file and args.step_config:
        parser.error('give either --anchors-file or --step-config/--step-checkpoint')
    if args.save_anchors and not args.step_config:  # it would write nothing, without a word
        parser.error('--save-anchors writes the step model\'s first/last actions: it needs '
                     '--step-config/--step-checkpoint')
    if args.vlm and (args.anchors_file or args.step_config):
        parser.error('--vlm identifies the first/last actions itself; drop the step model')
    if args.price_per_1k and (len(args.price_per_1k) > 2 or min(args.price_per_1k) < 0):
        parser.error(f'--price-per-1k {args.price_per_1k}: expected one price, or a prompt and '
                     'a completion price, each >= 0')
    if not has_suffix(args.out, ('.jsonl',)):
        parser.error(f'--out {args.out}: results rows go to a JSON Lines file (.jsonl)')


# top-level config keys llm_eval reads: the datasets and what they are built from
USED_CONFIG_KEYS = ('train_dataloader', 'test_dataloader', 'horizon', 'test_horizon',
                    *PATH_VARIABLES)


def check_used_options(cfg_options) -> None:
    """``--cfg-options`` may only change what llm_eval reads (:data:`USED_CONFIG_KEYS`);
    ``model.prompt_set=foo`` would be ignored: refused."""
    unused = sorted(k for k in cfg_options or {} if str(k).split('.')[0] not in USED_CONFIG_KEYS)
    if unused:
        raise SystemExit(f'--cfg-options {", ".join(unused)}: llm_eval reads only the config\'s '
                         f'{", ".join(USED_CONFIG_KEYS)}; the prompt, model and endpoint are '
                         'set by flags (see --help), so these options would be ignored')


def changing_options(args, cfg) -> tuple:
    """The ``--cfg-options`` and the data flags (``--data-root``, ``--feature-dir``) that change
    the datasets llm_eval reads (``cfg``: the config with all of them), as two dicts: an option
    or flag restating the config's own value (``horizon=3`` on a T=3 config,
    ``test_dataloader.dataset.split=test``, ``--data-root`` of the config's own data root) is
    the same run, never another results row beside it. One whose removal the config cannot
    load without is kept."""
    def datasets(config):
        return [config.get(key) for key in ('train_dataloader', 'test_dataloader')]

    def changes(options, paths) -> bool:
        try:
            return datasets(load_config(args.config, options or None, **paths)) != datasets(cfg)
        except (ValueError, TypeError, KeyError, OSError, SystemExit):
            return True
    options, paths = dict(args.cfg_options or {}), data_path_args(args)
    changing = {key: value for key, value in options.items()
                if changes({k: v for k, v in options.items() if k != key}, paths)}
    changing_paths = {name: folder for name, folder in paths.items() if folder is not None
                      and changes(options, dict(paths, **{name: None}))}
    return changing, changing_paths


def load_datasets(args):
    """(config, test windows), from the annotations alone; the test set has its observations
    (feature files) only when a ``--step-config`` model reads them."""
    from mmaction.registry import DATASETS
    from vpn_plugin.baselines.llm.windows import annotation_windows
    from vpn_plugin.datasets.planning_dataset import check_split_disjoint
    check_used_options(args.cfg_options)
    cfg = load_config(args.config, args.cfg_options, **data_path_args(args))
    args.cfg_options, args.changing_data_paths = changing_options(args, cfg)
    for key in ('train_dataloader', 'test_dataloader'):
        if not isinstance(cfg.get(key), dict) or 'dataset' not in cfg[key]:
            raise SystemExit(f'{args.config}: {key} = {cfg.get(key)!r}; needs {key}.dataset '
                             '(training windows give the examples and the PKG, test windows are '
                             'planned): give a dataset config such as configs/vpn_crosstask_t3.py '
                             '(an LLM config of configs/llm/ runs through tools/test.py)')
    check_split_disjoint(cfg)  # the examples and the PKG never come from test videos
    print('loading the test windows ...', file=sys.stderr)
    if args.step_config:
        return cfg, DATASETS.build(cfg.test_dataloader.dataset)
    return cfg, annotation_windows(cfg.test_dataloader.dataset)


def anchor_setting(args, test_set):
    """('oracle' | 'step_model' | 'vlm', anchors for build_queries)."""
    from vpn_plugin.apis import step_model_anchors
    from vpn_plugin.baselines.llm import ORACLE, load_anchor_predictions, save_anchor_predictions
    if args.vlm:
        return 'vlm', None  # the VLM identifies them from the clips (stage 1)
    if args.anchors_file:
        return 'step_model', load_anchor_predictions(args.anchors_file, len(test_set),
                                                     test_set.taxonomy.num_actions)
    if args.step_config:
        anchors = step_model_anchors(args.step_config, args.step_checkpoint, test_set,
                                     data_path_args(args))
        if args.save_anchors:
            save_anchor_predictions(args.save_anchors, *anchors)
        return 'step_model', anchors
    print('ORACLE setting: first/last actions are the ground truth (no step model given)',
          file=sys.stderr)
    return ORACLE, ORACLE


def backend_config(args) -> dict:
    params = {'temperature': args.temperature}
    if args.max_tokens:
        params['max_tokens'] = args.max_tokens
    if args.backend == 'transformers':
        return dict(type='transformers', model=args.model, params=params,
                    cache_dir=args.cache_dir)
    return dict(type='openai', base_url=args.base_url, model=args.model,
                api_key_env=args.api_key_env, params=params, timeout=args.timeout,
                max_retries=args.max_retries, backoff=args.backoff, cache_dir=args.cache_dir)


def build_planner(args, cfg):
    """The ``LLMPlanner`` that ``configs/llm/*`` run through tools/test.py, with this command
    line's settings; failures are reported here (:func:`check_failures`), not raised."""
    from mmaction.registry import MODELS
    return MODELS.build(dict(
        type='LLMPlanner', backend=backend_config(args),
        train_dataset=cfg.train_dataloader.dataset, with_pkg=args.with_pkg,
        num_examples=args.num_examples, scope=args.scope, seed=args.seed,
        concurrency=args.concurrency, allow_failures=True, vlm=args.vlm,
        prompt_set=args.prompt_set,
        **({'pkg': cfg.model.pkg} if cfg.get('model', {}).get('pkg') else {})))


def recorded_model(args) -> str:
    """The model a row names: a local model folder (``--backend transformers``) as the config
    path is recorded (:func:`row_config_path`: ``A/``, ``./A`` and ``A`` are one model), else
    the name as given (an endpoint's model name, a hub id)."""
    if args.backend == 'transformers' and Path(args.model).exists():
        return row_config_path(args.model)
    return args.model


def method_name(args, anchors: str) -> str:
    from vpn_plugin.baselines.llm import ORACLE
    if args.method:
        return args.method
    name = f'{recorded_model(args)} (VLM)' if args.vlm else recorded_model(args)
    name += ' + PKG' if args.with_pkg else ''
    name += " [paper's prompts]" if args.prompt_set == 'paper' else ''
    return name + (' [oracle first/last]' if anchors == ORACLE else '')


def output_files(args, run: 'RunRecord') -> dict:
    """Files next to ``--out``, named by the method and the run (a digest of the results row's
    identity, :meth:`ResultRow.key`): per-window outcomes, PlanningMetric's per-sample dump (the
    row's ``per_sample_file``) and a summary. Another run of the same method into the same
    ``--out`` (another seed, ``--limit``, temperature, ...) keeps its own files, so no row
    points at another run's windows; rerunning a command replaces its own files."""
    out = Path(args.out)
    stem = f'{out.stem}.{method_slug(args, run.anchors)}.{run.digest()}'
    return {'outcomes': out.with_name(f'{stem}.outcomes.jsonl'),
            'per_sample': out.with_name(f'{stem}.per_sample.json'),
            'summary': out.with_name(f'{stem}.summary.json')}

def setting(args, anchors: str) -> dict:
    """The study settings (the row's ``variant``)."""
    # the task named in the prompt: the ground truth, except with a step model (the task of
    # its predicted first action)
    task_source = 'step_model' if anchors == 'step_model' else 'ground_truth'
    return {'model': recorded_model(args), 'anchors': anchors, 'task_source': task_source,
            'with_pkg': args.with_pkg, 'vlm': args.vlm, 'scope': args.scope,
            'num_examples': args.num_examples, 'prompt_set': args.prompt_set}


def run_settings(args, num_windows: int, num_test_windows: int, examples=()) -> dict:
    """Everything else that changes the replies or the score (the row's ``settings``);
    ``examples``: the number of examples of each prompt (``examples_per_prompt`` [fewest,
    most] when some prompt holds fewer than --num-examples); ``data_root`` / ``feature_dir``
    when given (other annotations are other windows: a run on them is another row)."""
    from vpn_plugin.baselines.llm.prompting import EXAMPLE_DRAW
    from vpn_plugin.core.stats import SAMPLE_DRAW
    settings = {'backend': args.backend, 'base_url': args.base_url,
                'temperature': args.temperature, 'max_tokens': args.max_tokens,
                'limit': args.limit if num_windows < num_test_windows else None,
                'sample_seed': args.seed, 'num_windows': num_windows,
                'anchors_file': args.anchors_file, 'step_checkpoint': args.step_checkpoint,
                'cfg_options': row_options(args.cfg_options or {}),
                'example_draw': EXAMPLE_DRAW}
    if settings['limit'] is not None:  # which windows a limit draws (core.stats.SAMPLE_DRAW)
        settings['sample_draw'] = SAMPLE_DRAW
    # other data: other windows, another run (a run on its own config's data records none)
    for name, folder in getattr(args, 'changing_data_paths', {}).items():
        settings[name] = row_config_path(folder)
    if examples and min(examples) < args.num_examples:
        settings['examples_per_prompt'] = [min(examples), max(examples)]
    if args.vlm:
        settings.update(num_frames=args.num_frames, frames_fps=args.frames_fps)
    return settings


class RunRecord:
    """What identifies one run of this tool: its results row without the measurement
    (:meth:`row`); ``examples``: :func:`run_settings`."""

    def __init__(self, args, cfg, test_set, queries, anchors: str, examples=()):
        self.args, self.cfg, self.test_set, self.queries = args, cfg, test_set, queries
        self.anchors, self.examples = anchors, examples
        self.variant = setting(args, anchors)
        self.settings = run_settings(args, len(queries), len(test_set), examples)

    def row(self, metrics=None, **fields):
        """The results row (a ``ResultRow``) of this run."""
        from vpn_plugin.protocol.results import ResultRow
        args, test_set = self.args, self.test_set
        data_root = Path(self.cfg.test_dataloader.dataset.get('data_root', '')).name
        shortened = (f"limit={args.limit} of {len(test_set)} windows"
                     if self.settings['limit'] is not None else '')
        return ResultRow(
            method=method_name(args, self.anchors), seed=args.seed, horizon=test_set.horizon,
            metrics=metrics or {}, params=None, dataset=data_root,
            config=row_config_path(args.config),
            protocol='llm', variant=self.variant, shortened=shortened, settings=self.settings,
            features=features_read(args, test_set), **fields)

    def digest(self) -> str:
        """8 hex digits of the row's identity (:meth:`ResultRow.key`)."""
        import hashlib
        key = json.dumps(self.row().key(), default=str, ensure_ascii=False)
        return hashlib.sha256(key.encode('utf-8')).hexdigest()[:8]


def write_results(run: RunRecord, outcomes, summary, usage, files) -> int:
    """Outcomes, summary and the results row; ``usage``: :func:`usage_record` (the answers
    used and what this run paid, apart). The summary names the annotations scored
    (``data_root``: the test set's root after ``--data-root`` / the config / the environment,
    ``provenance.data_root_record``)."""
    from vpn_plugin.baselines.llm.evaluate import write_outcomes
    from vpn_plugin.datasets.provenance import data_root_record
    from vpn_plugin.protocol.results import replace_result
    write_outcomes(files['outcomes'], run.queries, outcomes, run.variant)
    write_text_atomically(files['summary'], json.dumps(dict(
        summary, usage=usage, setting=run.variant, settings=run.settings,
        data_root=data_root_record(run.test_set)), indent=2), 'LLM summary')
    return replace_result(run.args.out, run.row(
        summary['metrics'], per_sample_file=str(files['per_sample']),
        failures=summary['failures'], usage=usage))

def features_read(args, test_set) -> dict:
    """The row's ``features``: the step model's feature folder when one read them (its
    provenance record), else kind ``none`` saying what the prompts were made from."""
    if args.step_config:
        from vpn_plugin.datasets.provenance import dataset_feature_dirs, folders_provenance
        return folders_provenance(dataset_feature_dirs(test_set))
    if args.vlm:
        return dict(kind='none', label=f'no feature files: video frames of {args.video_root}')
    if args.anchors_file:
        return dict(kind='none', label=f'no feature files read here: first/last actions from '
                                       f'{args.anchors_file}')
    return dict(kind='none', label='no features: prompts from the annotations')


METHOD_SLUG_CHARS = 60  # of the side files' names; the row's digest beside it tells apart


def method_slug(args, anchors: str) -> str:
    """The method name in the side files' names: lower-case letters, digits and dots, at most
    :data:`METHOD_SLUG_CHARS` (a long --method made a name the file system refuses)."""
    slug = re.sub(r'[^a-z0-9.]+', '-', method_name(args, anchors).lower()).strip('-')
    return slug[:METHOD_SLUG_CHARS].strip('-')


@tool_main
def main(argv=None):
    args = parse_args(argv)
    import vpn_plugin.mm  # noqa: F401  (compat + registries)
    from vpn_plugin.baselines.llm import attach_frames, build_queries, stratified_sample, summarize
    from vpn_plugin.baselines.llm.evaluate import usage_record
    from vpn_plugin.protocol.results import read_results
    inputs = (args.config, args.anchors_file, args.step_config, args.step_checkpoint)
    args.out = str(check_output(args.out, 'results', '--out', inputs, args.overwrite))
    if Path(args.out).is_file():
        # a damaged results file stops the run before any request
        read_results(args.out, empty_ok=True)
    if args.save_anchors is not None:
        args.save_anchors = check_output(args.save_anchors, 'anchors', '--save-anchors',
                                         inputs, args.overwrite)
    cfg, test_set = load_datasets(args)
    anchors_label, anchors = anchor_setting(args, test_set)
    model = build_planner(args, cfg)
    keys = test_set.window_keys()
    queries = build_queries(test_set.plans, test_set.tasks, anchors=anchors,
                            indices=stratified_sample(test_set.tasks, args.limit, args.seed,
                                                      keys=keys),
                            action_task=test_set.taxonomy.action_task, keys=keys)
    sources = attach_frames(queries, test_set.windows, args.video_root,
                            num_frames=args.num_frames, folder_fps=args.frames_fps) \
        if args.vlm else None
    examples = [model.planner.prompts.example_count(q) for q in queries]
    run = RunRecord(args, cfg, test_set, queries, anchors_label, examples)
    if sources is not None:  # what the frames came from (folders read at --frames-fps)
        run.settings['video_sources'] = sources
    files = output_files(args, run)
    for name, path in files.items():  # before any request
        check_output(path, 'llm_side_file', f'--out (its {name} file)', inputs, args.overwrite)
    note_fewer_examples(args.num_examples, examples)
    outcomes = model.plan_queries(queries, progress=not args.no_progress)
    check_failures(outcomes, args.allow_failures, model.usage)
    files['per_sample'].parent.mkdir(parents=True, exist_ok=True)
    summary = summarize(queries, outcomes, per_sample_file=files['per_sample'])
    usage = usage_record(model.usage, args.price_per_1k)
    replaced = write_results(run, outcomes, summary, usage, files)
    report(summary, usage, anchors_label, args.out, files, replaced)
    return summary

def note_fewer_examples(asked: int, examples: list) -> None:
    """Say when some prompts hold fewer examples than --num-examples (their task has fewer
    training windows); the row records it (:func:`run_settings`)."""
    fewer = sum(count < asked for count in examples)
    if fewer:
        print(f'note: --num-examples {asked}: {fewer} of {len(examples)} prompts hold fewer '
              f'examples (as few as {min(examples)}): their task has no more training windows; '
              'the results row records examples_per_prompt [fewest, most]', file=sys.stderr)


def check_failures(outcomes, allow: bool, usage: dict) -> None:
    """Print every kind of request failure with its first cause; without ``allow`` stop with
    exit status 1 before any file is written."""
    from vpn_plugin.baselines.llm import failure_causes, token_summary
    causes = failure_causes(outcomes)
    if not causes:
        return
    print(f'{sum(c[1] for c in causes)} of {len(outcomes)} requests failed after the retries:',
          file=sys.stderr)
    for kind, count, cause in causes:
        print(f'  {kind}: {count} window(s), e.g. {cause}', file=sys.stderr)
    if not allow:
        print(token_summary(usage), file=sys.stderr)
        raise SystemExit('llm_eval: no results row written (failed requests would score as wrong '
                         'plans); fix the endpoint and rerun (replies that succeeded are cached), '
                         'or pass --allow-failures to record the row with its failure counts')


def report(summary, usage, anchors, out, files, replaced: int):
    from vpn_plugin.baselines.llm import token_summary
    from vpn_plugin.baselines.llm.evaluate import cost_summary
    counts = summary['counts']
    print(f"windows {summary['num_windows']} ({anchors} first/last actions): "
          + ', '.join(f'{k} {v}' for k, v in counts.items()))
    if summary['failures']:
        print('request failures by kind (--allow-failures): '
              + ', '.join(f'{k} {v}' for k, v in summary['failures'].items()))
    print('metrics: ' + ', '.join(f'{k} {v:.2f}' for k, v in summary['metrics'].items()))
    print(token_summary(usage))
    if cost_summary(usage):
        print(cost_summary(usage))
    action = f'replaced {replaced} earlier row(s) of this run in' if replaced else 'appended to'
    print(f'results row {action} {out}; ' + '; '.join(f'{k} {v}' for k, v in files.items()))


if __name__ == '__main__':
    main()
