"""Print predicted plans with action names, for dataset samples or for your own video file.

Dataset samples are shown next to their ground truth; a video's S3D features are extracted as
the datasets' were.

    python tools/plan.py CONFIG CHECKPOINT [--indices 0 5 9] [--split test|val|train]
    python tools/plan.py [CONFIG] --checkpoint CKPT --video my.mp4 --start-time 12 \\
        --goal-time 95 --s3d-weights s3d_howto100m.pth
    python tools/plan.py [CONFIG] --checkpoint CKPT --features my.npz --start-time 12 \\
        --goal-time 95         # features already extracted (extract_features.py, --save-features)

With ``--video``, CONFIG may be left out: the config stored in a checkpoint of
tools/train.py is used. The frame recipe defaults to that of the public features (P3IV's);
change it (``--fps``, ``--size``, ...) only for a planner trained on features extracted with
the same options. ``--random-weights`` (instead of ``--s3d-weights``) runs the pipeline with
random S3D weights, for checks only: its plans are marked UNUSABLE. ``--features FILE`` plans
from one video's features already extracted (a file of ``extract_features.py`` or
``--save-features``, or any per-video layout the datasets read): no S3D, no video; a file
written with random weights (``usable`` false) is marked UNUSABLE as well; a file of the
config's ``--split`` feature folder at the times of one of its windows is planned as its test
planned it (the window index seeds a stochastic planner's noise: PDPP, KEPP). Each plan says where
its task comes from (the planner's classifier with its probability, the ground truth, or
``--task NAME``: the task the video shows) and warns when its actions leave that task.
"""
import argparse
import os
import sys

from vpn_plugin.data_paths import (add_cfg_options, add_data_arguments, check_flags_agree,
                                  data_path_args, load_config)
from vpn_plugin.errors import (NON_NEGATIVE_FLOAT, NON_NEGATIVE_INT, parse_once, path_argument,
                               plain_text, text_argument, tool_main)
from vpn_plugin.outputs import add_overwrite_argument, check_output
from vpn_plugin.video.recipe import add_recipe_arguments, recipe_from_args


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('config', type=path_argument, nargs='?')
    parser.add_argument('checkpoint', type=path_argument, nargs='?')
    parser.add_argument('--checkpoint', type=path_argument, dest='checkpoint_option',
                        metavar='CHECKPOINT',
                        help='the planner checkpoint (instead of the second positional)')
    parser.add_argument('--indices', type=NON_NEGATIVE_INT, nargs='+',
                        help='dataset sample indices (default: 0 1 2)')
    parser.add_argument('--split', choices=('test', 'val', 'train'), default='test',
                        help='which dataloader of the config to take samples from')
    parser.add_argument('--decode', type=text_argument,
                        help='override model.decode (e.g. emission_argmax)')
    add_cfg_options(parser, 'override config keys, e.g. model.cross_horizon=repeat_last',
                    default={})
    video = parser.add_argument_group('your own video (instead of dataset samples)')
    video.add_argument('--video', type=path_argument, help='a video file to plan for')
    video.add_argument('--start-time', type=NON_NEGATIVE_FLOAT,
                       help='second of the start state (where the first step starts)')
    video.add_argument('--goal-time', type=NON_NEGATIVE_FLOAT,
                       help='second of the goal state (where the last step ends)')
    video.add_argument('--s3d-weights', type=path_argument, metavar='PTH',
                       help='s3d_howto100m.pth (S3D_HowTo100M README)')
    video.add_argument('--random-weights', action='store_true',
                       help='random S3D weights, ONLY for pipeline checks (output UNUSABLE)')
    video.add_argument('--features', type=path_argument, metavar='FILE',
                       help="plan from a video's features already extracted (the .npz of "
                       'extract_features.py or --save-features) instead of --video')
    video.add_argument('--task', metavar='NAME',
                       help='the task the video shows (name, key or index of the taxonomy): '
                       'the plan is checked against it, and a planner of the true task '
                       "(CEFITO's task_source=ground_truth) plans within it")
    video.add_argument('--save-features', type=path_argument, metavar='NPZ',
                       help="also write the video's features (frames_features) there")
    add_overwrite_argument(video, '--save-features')
    add_recipe_arguments(parser)
    add_data_arguments(parser)
    args = parse_once(parser, argv)
    check_flags_apply(parser, args)
    if args.checkpoint_option:
        if args.checkpoint and args.checkpoint != args.checkpoint_option:
            parser.error('the checkpoint is given twice (positional and --checkpoint)')
        args.checkpoint = args.checkpoint_option
    if args.video and args.features:
        parser.error('--video and --features exclude each other (--features: its features, '
                     'already extracted)')
    if (args.video or args.features) and not args.checkpoint:
        mode = '--video' if args.video else '--features'
        read_as_config = (f' (the one positional, {args.config}, is read as CONFIG: give the '
                          f'checkpoint as --checkpoint {args.config}, or as CONFIG CHECKPOINT)'
                          if args.config else '')
        parser.error(f'{mode} needs --checkpoint CKPT{read_as_config}')
    if (args.video or args.features) and args.indices is not None:
        parser.error(f'--indices: dataset samples; {"--video" if args.video else "--features"} '
                     'plans one video of your own (leave --indices out)')
    if args.features:
        if args.start_time is None or args.goal_time is None:
            parser.error('--features needs --start-time and --goal-time (seconds)')
        given = [flag for flag, value in (('--s3d-weights', args.s3d_weights),
                                          ('--random-weights', args.random_weights),
                                          ('--save-features', args.save_features)) if value]
        if given:
            parser.error(f'{", ".join(given)}: for --video only (--features are extracted)')
    elif args.video is None:
        if args.save_features is not None:
            parser.error('--save-features needs --video (the features of your own video)')
        if not (args.config and args.checkpoint):
            parser.error('CONFIG and CHECKPOINT are required (or --video / --features with '
                         '--checkpoint)')
        if args.task is not None:
            parser.error('--task is for --video / --features (dataset samples carry their '
                         'true task)')
        given = [flag for flag, value in (('--start-time', args.start_time),
                                          ('--goal-time', args.goal_time),
                                          ('--s3d-weights', args.s3d_weights),
                                          ('--random-weights', args.random_weights))
                 if value is not None and value is not False]
        if given:  # were ignored: the samples' own annotated times were planned
            parser.error(f'{", ".join(given)}: for --video / --features only (dataset samples '
                         'carry their annotated start and goal)')
        args.indices = [0, 1, 2] if args.indices is None else args.indices
    else:
        if args.start_time is None or args.goal_time is None:
            parser.error('--video needs --start-time and --goal-time (seconds)')
        if args.s3d_weights and args.random_weights:
            parser.error('--s3d-weights and --random-weights exclude each other')
    return args


RECIPE_FLAGS = ('fps', 'native_fps', 'crop', 'size', 'jpeg_quality', 'chunk')


def check_flags_apply(parser, args) -> None:
    """A frame-recipe flag reads a video: refused without --video (features already extracted,
    dataset samples), never ignored; --decode and --cfg-options model.decode must not differ."""
    given = [f'--{name.replace("_", "-")}' for name in RECIPE_FLAGS
             if getattr(args, name) != parser.get_default(name)]
    if given and args.video is None:
        parser.error(f'{", ".join(given)}: the frame recipe of --video; '
                     + ('--features are extracted already' if args.features else
                        'dataset samples are read from the config\'s feature files'))
    try:
        check_flags_agree(args.cfg_options, {'--decode': ('model.decode', args.decode or None)})
    except ValueError as error:
        parser.error(str(error))


def plan_video(args, cfg) -> None:
    from vpn_plugin.apis import init_planner, plan_from_video
    from vpn_plugin.apis.video import (RANDOM_WEIGHTS_WARNING, config_taxonomy,
                                       format_video_plan, load_s3d_for_tool)
    taxonomy = config_taxonomy(cfg, args.split)
    task = None if args.task is None else taxonomy.task_index(args.task)
    s3d = load_s3d_for_tool(args.s3d_weights, args.random_weights)
    model = planner(init_planner, cfg, args.checkpoint, files=False)
    sample, features = plan_from_video(model, s3d, args.video, args.start_time,
                                       args.goal_time, recipe_from_args(args), args.split,
                                       return_features=True, task=task)
    print_features_note([sample])
    print_draw_note(model, None)
    damage = sample.metainfo.get('damage', '')
    if damage:  # as extract_features says it (and records it in the features file)
        print(f'WARNING: {plain_text(args.video)}: {damage}')
    print('\n'.join(format_video_plan(sample, taxonomy, args.video, args.start_time,
                                      args.goal_time)))
    if args.save_features:
        save_features(args.save_features, features, s3d, RANDOM_WEIGHTS_WARNING,
                      args.save_features_existed, damage)


def plan_features(args, cfg) -> None:
    """``--features``: the plan between two moments of a video's features file (a file of
    random S3D weights is planned from, its plans marked UNUSABLE as the CLI marks videos)."""
    from vpn_plugin.apis import init_planner, plan_from_features, video_observations
    from vpn_plugin.apis.inference import feature_file_note, window_index
    from vpn_plugin.apis.video import config_taxonomy, format_video_plan, goal_note
    from vpn_plugin.datasets.features import damage_note, read_feature_record
    record = read_feature_record(args.features)
    taxonomy = config_taxonomy(cfg, args.split)
    task = None if args.task is None else taxonomy.task_index(args.task)
    model = planner(init_planner, cfg, args.checkpoint)
    start, goal = video_observations(model.cfg, args.features, args.start_time, args.goal_time,
                                     args.split, allow_unusable=True)
    # a window of the config's split: its index seeds a stochastic planner's noise as the
    # test runner does (PDPP's x_T, KEPP's draws), so the plan is the one the test scored
    index = window_index(model.cfg, args.split, args.features, start, goal)
    sample = plan_from_features(model, start, goal, task=task, index=index)[0]
    if index is not None:
        print(f'{plain_text(args.features)} from {args.start_time:g} s to {args.goal_time:g} s is '
              f'window {index} of the {args.split} split: planned as its test planned it')
    print_features_note([sample])
    print_draw_note(model, index)
    note = feature_file_note(model, args.features)  # a training video's file of other content
    if note:
        print(f'WARNING: {note}')
    if damage_note(record):  # extract_features' note of a video decoded from damaged data
        print(f'WARNING: {plain_text(args.features)} records that its video was decoded from '
              f'damaged data: {damage_note(record)}')
    seconds = int(len(record['frames_features']))
    sample.set_field(seconds, 'num_seconds', field_type='metainfo')
    sample.set_field(goal_note(args.goal_time, seconds), 'goal_note', field_type='metainfo')
    print('\n'.join(format_video_plan(sample, taxonomy, args.features, args.start_time,
                                      args.goal_time, source='features')))


def planner(init_planner, cfg, checkpoint, files: bool = True):
    """``init_planner`` with its option-difference warning printed as a WARNING line (one per
    option) instead of Python's warning format; and the UNCHECKED mark. ``files=False``
    (``--video``: features extracted now, no feature file to compare with the training files):
    the training feature files are not listed as not compared."""
    import warnings
    with warnings.catch_warnings():
        warnings.filterwarnings('ignore', message='.*was trained with other options than this')
        warnings.filterwarnings('ignore', message='.* records too little to compare')
        model = init_planner(cfg, checkpoint)
    if not files:
        from vpn_plugin.engine.checkpoint import TRAINING_RECORDS
        model.not_compared = [entry for entry in model.not_compared
                              if entry != TRAINING_RECORDS['features_folder'][1]]
    # the features planned from, unlike the training features (their scale, their folder): a
    # WARNING line (print_features_note)
    warnings.filterwarnings('ignore', message='the features planned from ')
    print_unchecked(model, checkpoint)
    return model


def print_unchecked(model, checkpoint) -> None:
    """The mark of plans from a checkpoint scored with unchecked_checkpoint=True, the
    options of the config that differ from the checkpoint's training, and what the
    checkpoint records too little to compare (init_planner)."""
    from vpn_plugin.engine.checkpoint import not_compared_line
    for line in getattr(model, 'option_differences', []):
        print(f'WARNING: {checkpoint} was trained with other options: {line} (the plans use '
              'the config\'s)')
    if getattr(model, 'not_compared', None):
        print(f'WARNING: {not_compared_line(checkpoint, model.not_compared, "these plans")}')
    if model.unchecked_checkpoint:
        print(f'*** UNCHECKED checkpoint {checkpoint}: it records no '
              f'{", ".join(model.unchecked_checkpoint)} (unchecked_checkpoint=True) ***')


def print_draw_note(model, index) -> None:
    """A NOTE when a stochastic planner (PDPP, KEPP: ``apis.inference.draws_noise``) planned
    observations of no dataset window (``index`` None): its noise came from torch's unseeded
    global stream, so the plan printed is one draw and another run may print another."""
    from vpn_plugin.apis.inference import draws_noise
    if index is None and draws_noise(model):
        print(f'NOTE: {type(model).__name__} plans from random noise, drawn here from torch\'s '
              'global stream (unseeded): this plan is one draw, another run may print another; '
              'a file of the --split feature folder at the times of one of its windows is '
              'planned as its test planned it')


def print_features_note(samples) -> None:
    """The WARNING line of features unlike the checkpoint's training features (another scale or
    extractor: ``apis.inference.feature_scale_note``), once."""
    notes = {sample.metainfo.get('features_note') for sample in samples} - {None}
    for note in sorted(notes):
        print(f'WARNING: {note}')


def print_damage(damaged) -> None:
    """The WARNING line of the feature files planned from that record a damaged video
    ('<file>: <note>' each; extract_features' ``damage`` note), as tools/test.py warns."""
    if damaged:
        print(f'WARNING: {len(damaged)} feature file(s) planned from record a damaged video '
              '(extract_features\' "damage" note: ffmpeg decoded it with errors, frames there '
              f'concealed or repeated): {"; ".join(damaged)}')


def save_features(path, features, s3d, warning: str, existed: bool = True,
                  damage: str = '') -> None:
    """The video's features in the datasets' layout, marked unusable for random weights
    (``damage``: ffmpeg's note of a damaged video, recorded as extract_features records it).
    ``existed``: the file was there when the run began (checked then, as check_output rules);
    else a file that another run wrote there meanwhile is kept and the run fails."""
    from pathlib import Path
    import numpy as np
    from vpn_plugin.datasets.features import DAMAGE_KEY
    from vpn_plugin.video.extract import write_features_atomically
    extra = {} if s3d.usable else dict(warning=np.str_(warning))
    if damage:
        extra[DAMAGE_KEY] = np.str_(damage)
    try:
        write_features_atomically(Path(path), dict(frames_features=features,
                                                   usable=np.bool_(s3d.usable), **extra),
                                  replace=existed, resumable=False)
    except FileExistsError:
        raise ValueError(f'--save-features {path}: another process wrote that file while this '
                         'run extracted its features (it did not exist when the run began); '
                         'it was kept and nothing was written: choose another name, or pass '
                         '--overwrite') from None
    unusable = '' if s3d.usable else ' (UNUSABLE: random S3D weights)'
    print(f'features: {plain_text(path)}{unusable}')


def check_not_in_a_feature_folder(path, overwrite: bool) -> None:
    """An existing ``--save-features`` file of a feature folder (extraction.json or
    provenance.json beside it: extract_features' or a dataset's) is one video of that folder,
    not an earlier --save-features: replaced only with --overwrite (its features were replaced
    by this video's, random-weights ones too, and the folder's record no longer held)."""
    from pathlib import Path
    from vpn_plugin.datasets.provenance import PROVENANCE_FILE
    from vpn_plugin.video.extract import MANIFEST
    path = Path(path)
    records = [name for name in (MANIFEST, PROVENANCE_FILE) if (path.parent / name).is_file()]
    if path.exists() and records and not overwrite:
        raise ValueError(f'--save-features {path}: the file exists in a feature folder (beside '
                         f'its {" and ".join(records)}): it is one video of that folder, not an '
                         'earlier --save-features; choose another name, or pass --overwrite to '
                         'replace it')


@tool_main
def main(argv=None):
    args = parse_args(argv)
    if args.save_features is not None:
        args.save_features = check_output(
            args.save_features, 'features', '--save-features',
            (args.video, args.checkpoint, args.config, args.s3d_weights), args.overwrite)
        check_not_in_a_feature_folder(args.save_features, args.overwrite)
        args.save_features_existed = args.overwrite or os.path.lexists(args.save_features)
    from vpn_plugin.apis import build_split_dataset, inference_planner, init_planner
    from vpn_plugin.models.plan_display import format_plan

    if args.config:
        cfg = load_config(args.config, args.cfg_options, **data_path_args(args))
    else:
        from vpn_plugin.apis.video import config_from_checkpoint
        cfg = config_from_checkpoint(args.checkpoint, args.cfg_options, **data_path_args(args))
    if args.decode:
        cfg.model.decode = args.decode
    from vpn_plugin.runner import check_config_entries
    # every entry's options, as train/test check them: --features and --video build no
    # dataset, whose own check would refuse window_policy='drop' (H8: planned without a word)
    check_config_entries(cfg, args.config or str(args.checkpoint))
    if args.video:
        return plan_video(args, cfg)
    if args.features:
        return plan_features(args, cfg)
    model = planner(init_planner, cfg, args.checkpoint)
    dataset = build_split_dataset(cfg, args.split)
    samples = inference_planner(model, dataset, args.indices)
    from vpn_plugin.datasets.provenance import dataset_data_roots
    print(f'{args.split} windows of the annotations in '  # which annotations: stderr, as a log
          f'{", ".join(map(plain_text, dataset_data_roots(dataset)))}', file=sys.stderr)
    print_features_note(samples)
    print_damage(dataset.damaged_files(args.indices))
    for sample in samples:
        print('\n'.join(format_plan(sample, dataset.taxonomy)))
        print()


if __name__ == '__main__':
    sys.exit(main())
