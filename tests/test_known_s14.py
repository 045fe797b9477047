"""Issue 37, the known items closing13 left (fixKnown, session 14), each failing on ab2cb94."""
import json
import random
from pathlib import Path

import pytest
from mmaction.registry import DATASETS

REPO = Path(__file__).resolve().parents[1]
SAMPLE_DRAW = 'window_identity_v2'  # what rows and records say of the identity draw
UNIFORM = REPO / 'configs/baselines/uniform_emissions_crosstask_t3.py'


def identities(dataset) -> list:
    return [(w.vid, w.times, w.steps) for w in dataset.windows]


def protocol_runner(tmp_path, **options):
    from mmengine.config import Config
    from vpn_plugin.protocol.runner import ProtocolRunner
    return ProtocolRunner(Config(dict(protocol='p', dataset='crosstask')), tmp_path, **options)


# ------------------------------------ 1: subset_fraction drawn by the windows' identity, recorded
def test_subset_fraction_draws_the_same_windows_from_a_shuffled_video_list(tiny_crosstask,
                                                                           tmp_path):
    """Before: ``PlanningDataset(subset_fraction=)`` (the sample-efficiency study's training
    subsets) kept the windows at randomly drawn list positions: the same videos listed in
    another order trained on other windows. Now the same windows whatever the order."""
    train = tiny_crosstask['train_dataset']
    videos = json.loads(Path(train['video_list']).read_text())
    random.Random(7).shuffle(videos)
    (tmp_path / 'train_s.json').write_text(json.dumps(videos))
    shuffled = dict(train, video_list=str(tmp_path / 'train_s.json'))
    plain = DATASETS.build(dict(train, subset_fraction=0.3, subset_seed=2))
    other = DATASETS.build(dict(shuffled, subset_fraction=0.3, subset_seed=2))
    assert identities(plain) != identities(other)  # the lists' order is another
    assert sorted(identities(plain)) == sorted(identities(other))
    seeded = DATASETS.build(dict(train, subset_fraction=0.3, subset_seed=3))
    assert sorted(identities(seeded)) != sorted(identities(plain))  # the seed still draws
    every = DATASETS.build(dict(train))
    assert len(plain) == round(0.3 * len(every)) and set(identities(plain)) < set(
        identities(every))


def test_protocol_records_the_subset_draw_of_subset_runs_only(tmp_path):
    """A unit training on a ``subset_fraction`` records ``subset_draw`` in its rows' settings
    and its work dir's identity (a work dir or row of the list position draw is never taken
    for it); a unit of every training window records nothing new."""
    from vpn_plugin.protocol.runner import TestSpec, TrainUnit
    config = str(UNIFORM)
    spec = TestSpec('PKG_uniform_emissions', config, 3)
    full = TrainUnit('u', config, 3, 0, {}, {}, False, [spec])
    subset = TrainUnit('u', config, 3, 0, {'train_dataloader.dataset.subset_fraction': 0.25},
                       {}, False, [spec])
    whole = TrainUnit('u', config, 3, 0, {'train_dataloader.dataset.subset_fraction': 1.0},
                      {}, False, [spec])  # every window, whichever the draw
    runner = protocol_runner(tmp_path)
    for unit in (full, whole):
        assert 'subset_draw' not in runner.settings(unit, spec)
        assert 'subset_draw' not in runner.identity(unit)
    assert runner.settings(subset, spec)['subset_draw'] == SAMPLE_DRAW
    assert runner.identity(subset)['subset_draw'] == SAMPLE_DRAW
    assert runner.row_for(subset, spec).key() != runner.row_for(full, spec).key()
    from vpn_plugin.protocol.runner import claim_work_dir
    before = {k: v for k, v in runner.identity(subset).items() if k != 'subset_draw'}
    claim_work_dir(tmp_path / 'w', before)  # a work dir of the list position draw
    with pytest.raises(ValueError, match=r"holds a run made with other settings \(subset_draw: "
                       r"absent there, 'window_identity_v2' now\); it is never reused"):
        claim_work_dir(tmp_path / 'w', runner.identity(subset))


def efficiency_row(method, seed, fraction, draw):
    from vpn_plugin.protocol.results import ResultRow
    options = {'train_dataloader.dataset.subset_fraction': fraction}
    return ResultRow(method=method, seed=seed, horizon=3, metrics={'success_rate': 10.0 + seed},
                     dataset='crosstask', variant={'train_fraction': fraction},
                     settings=dict(cfg_options=options, **({'subset_draw': draw} if draw
                                                            else {})))


def test_the_efficiency_figure_never_joins_subsets_of_two_draws():
    """A sample-efficiency line through a 10% point drawn by list position (a row without
    ``subset_draw``) and a 50% point drawn by identity is refused, naming both; 100% points
    (every window, whichever the draw) join either."""
    from vpn_plugin.protocol.plots import efficiency_values
    mixed = [efficiency_row('VPN', s, 0.1, None) for s in (0, 1)] + \
        [efficiency_row('VPN', s, 0.5, SAMPLE_DRAW) for s in (0, 1)]
    with pytest.raises(ValueError, match=r"drawn in different ways \(list position .*VPN "
                       r"seed 0 train_fraction=0\.1.*; window_identity_v2: VPN seed 0 "
                       r"train_fraction=0\.5"):
        efficiency_values(mixed)
    one = [efficiency_row('VPN', s, f, SAMPLE_DRAW) for s in (0, 1) for f in (0.1, 0.5)]
    whole = [efficiency_row('VPN', s, 1.0, None) for s in (0, 1)]
    assert sorted(efficiency_values(one + whole)[('VPN', 3)]) == [10.0, 50.0, 100.0]


# ------------------------------------------ 2: a protocol test config's own limit, recorded
def test_a_test_config_that_limits_its_own_windows_records_the_draw(tmp_path):
    """Before: only ``--smoke`` and ``...limit`` options were seen; a test config whose own
    file sets ``test_dataloader.dataset.limit`` wrote rows without ``sample_draw`` (pooled
    with rows drawn by list position). Now its rows record it; the config without is
    unchanged."""
    from vpn_plugin.protocol.runner import TestSpec, TrainUnit
    limited = tmp_path / 'limited.py'
    limited.write_text(f'_base_ = [{str(UNIFORM)!r}]\n'
                       'test_dataloader = dict(dataset=dict(limit=5))\n')
    runner = protocol_runner(tmp_path)
    for config, expected in ((str(limited), SAMPLE_DRAW), (str(UNIFORM), None)):
        spec = TestSpec('PKG_uniform_emissions', config, 3)
        unit = TrainUnit('u', config, 3, 0, {}, {}, False, [spec])
        assert runner.settings(unit, spec).get('sample_draw') == expected


# ------------------------------------------------------------ 3: one JSON-lines reader
def test_expected_rows_and_submission_records_keep_a_line_separator_inside_a_string(tmp_path):
    """Before: protocol/expected.py and status.py split their records with ``splitlines()``,
    which also breaks at U+2028 / U+0085 (JSON allows them raw in a string): a valid record
    was cut and refused. Now they read as ``results`` reads (``errors.json_lines``)."""
    from vpn_plugin.protocol.expected import IDENTITY, expected_file, read_expected
    from vpn_plugin.protocol.results import ResultRow
    from vpn_plugin.protocol.status import RECORDS, read_submissions, recorded_arrays
    method = 'VPN\u2028(new\u0085line)'
    row = ResultRow(method=method, seed=0, horizon=3, metrics={}, protocol='p')
    results = tmp_path / 'results.jsonl'
    expected_file(results).write_text(json.dumps(
        {name: getattr(row, name) for name in IDENTITY}, ensure_ascii=False) + '\n',
        encoding='utf-8')
    (found,) = read_expected(results)
    assert found.method == method and found.key() == row.key()
    slurm = tmp_path / 'slurm'
    slurm.mkdir()
    log = str(tmp_path / 'logs' / 'x.out')  # <protocol>/logs: as recorded, not moved
    record = dict(array='41', tasks=[dict(job='41_0', log=log, units=[f'{tmp_path}/u\u2028v'])])
    (slurm / RECORDS).write_text(json.dumps(record, ensure_ascii=False) + '\n',
                                 encoding='utf-8')
    assert read_submissions(slurm) == {f'{tmp_path}/u\u2028v': ('41_0', log)}
    assert recorded_arrays(slurm) == {'41'}
    expected_file(results).write_text('{"method": "a", "method": "b"}\n')  # the one key rule
    with pytest.raises(ValueError, match=r"^expected row .*results.expected:1: the key 'method' "
                       r"is given twice in one object: 'a' and 'b'"):
        read_expected(results)


def test_earlier_results_with_a_line_separator_are_recognised_as_results(tmp_path):
    """The output guard's recognisers read JSON lines by the same rule: a results file whose
    row holds a raw U+2028 is an earlier results file (before: "not ours")."""
    from vpn_plugin.outputs import json_objects, results_rows
    path = tmp_path / 'r.jsonl'
    path.write_text(json.dumps({'method': 'a\u2028b', 'metrics': {}}, ensure_ascii=False)
                    + '\n', encoding='utf-8')
    assert results_rows(path) and json_objects(path)


# ------------------------------------------------------ 4: one duplicate-key hook, replies too
def test_a_reply_giving_a_key_twice_is_named_by_the_one_duplicate_key_rule():
    """Before: baselines/llm/parsing had its own hook and wording. Now errors.unique_keys
    names the reply (no file), the key and both values; the same value twice is read."""
    from vpn_plugin.baselines.llm.parsing import ActionMatcher, ReplyParseError, parse_plan
    from vpn_plugin.errors import unique_keys
    matcher = ActionMatcher(['a', 'b', 'c', 'd'], [0, 1, 2, 3])
    with pytest.raises(ReplyParseError, match=r"^reply: the key 'plan' is given twice in one "
                       r"object: \[3, 3, 3\] and \[0, 1, 2\]; JSON would keep only the last"):
        parse_plan('```json\n{"plan": [3, 3, 3], "plan": [0, 1, 2]}\n```', matcher, 3)
    assert parse_plan('{"plan": [0, 1, 2], "plan": [0, 1, 2]}', matcher, 3) == [0, 1, 2]
    with pytest.raises(ValueError, match=r"^JSON file f.json: the key 'a' is given twice"):
        json.loads('{"a": 1, "a": 1}', object_pairs_hook=unique_keys('f.json'))


# ------------------------------------------------- 5: an output that is a symbolic link
def test_an_output_through_a_symbolic_link_is_refused_unless_overwrite(tmp_path):
    """Before: ``report --out link`` with link.md a link to an earlier report wrote that
    report's .md through the link and link.tex beside it (the earlier .tex then disagreed with
    its .md), without a word. Now refused, naming the link and its target (every tool's output
    flags: outputs.check_output); --overwrite writes through it, the link kept."""
    from vpn_plugin.outputs import REPORT_MARKDOWN_MARKER, check_output
    earlier = tmp_path / 'standard.md'
    earlier.write_text(f'{REPORT_MARKDOWN_MARKER}\n| a |\n')
    (tmp_path / 'link.md').symlink_to(earlier)
    with pytest.raises(ValueError, match=rf'^--out {tmp_path}/link.md: a symbolic link to '
                       rf'{earlier}; an output is written through a link only when asked.*'
                       r'or pass --overwrite to write into '):
        check_output(tmp_path / 'link.md', 'report_markdown', '--out')
    assert check_output(tmp_path / 'link.md', 'report_markdown', '--out',
                        overwrite=True) == earlier
    assert check_output(earlier, 'report_markdown', '--out') == earlier  # its own name: ours


# ------------------------------------------------------------------- 6: passV leftovers
def test_convert_features_names_a_loop_of_links_a_loop(tmp_path, capsys):
    """Before: a skipped ``x.npy -> y.npy -> x.npy`` was listed as "(dangling link)"."""
    import os
    from tool_modules import load_tool
    tool = load_tool('convert_features')
    os.symlink('y.npy', tmp_path / 'x.npy')
    os.symlink('x.npy', tmp_path / 'y.npy')
    os.symlink('gone.npy', tmp_path / 'z.npy')
    loop = 'x.npy (a symbolic link to y.npy, which leads back to itself (a loop of links))'
    dangling = 'z.npy (a symbolic link to gone.npy, which leads to no file (a dangling link))'
    assert tool.entry_kind(tmp_path / 'x.npy') == loop
    assert tool.entry_kind(tmp_path / 'z.npy') == dangling
    tool.skipped_listing([tmp_path / 'x.npy', tmp_path / 'z.npy'])
    assert ('skipped 2 entries that are not files (a subfolder is not read; a dangling link or '
            f'a loop of links has no file): {loop}, {dangling}') in capsys.readouterr().out


def test_every_reader_tells_a_loop_of_links_from_a_dangling_one(tmp_path):
    """The one test (errors.link_loop) in check_file and the annotation paths' why_absent
    (before: "broken, or a loop of links" / "dangling, or a loop of links")."""
    import os
    from vpn_plugin.datasets.sources import why_absent
    from vpn_plugin.errors import check_file
    os.symlink('y.json', tmp_path / 'x.json')
    os.symlink('x.json', tmp_path / 'y.json')
    os.symlink('gone.json', tmp_path / 'z.json')
    with pytest.raises(FileNotFoundError, match=r'x.json is a symbolic link to y.json, which '
                       r'leads back to itself \(a loop of links\)'):
        check_file(tmp_path / 'x.json', 'taxonomy')
    with pytest.raises(FileNotFoundError, match=r'z.json is a symbolic link to gone.json, which '
                       r'leads to no file \(a dangling link\)'):
        check_file(tmp_path / 'z.json', 'taxonomy')
    assert why_absent(tmp_path / 'z.json') == ('is a symbolic link to gone.json, which leads to '
                                               'no file (a dangling link)')


def test_the_extraction_progress_line_escapes_a_file_name_as_printed_lines_do():
    """Before: the progress line printed a tab (or an escape sequence) of a video's name raw;
    now escaped by the one rule of names in printed lines (``plain_text``; session 15: no
    longer the TSV escape, which stays the failures.tsv field's)."""
    import io
    from vpn_plugin.errors import plain_text
    from vpn_plugin.video.extract import Progress, tsv_field
    stream = io.StringIO()
    progress = Progress(1, 0, stream, interval=0.0)
    progress.steps.quiet = 0.0
    progress.expect(0, 2)
    progress.chunks(2, 'a\tb\x1b[31mc\u2028d\\e')
    line = stream.getvalue()
    assert 'in flight: ' + plain_text('a\tb\x1b[31mc\u2028d\\e') in line
    assert 'in flight: a\\tb\\x1b[31mc\\u2028d\\e' in line  # a backslash as it is
    assert '\t' not in line and '\x1b' not in line and '\u2028' not in line
    assert tsv_field('a\\b\nc') == 'a\\\\b\\nc'  # failures.tsv as before


def test_an_extraction_record_mismatch_names_the_differing_fields_only(tmp_path):
    """Before: "extracted with {...every setting...}; this run asks for {...}". Now the
    fields that differ, with both values."""
    from vpn_plugin.video.extract import check_manifest, write_manifest
    recorded = dict(recipe=dict(size=16, fps=1.0, chunk=8), weights='s3d.pth', naming='stem',
                    weights_sha256='ab' * 8)
    write_manifest(tmp_path, recorded)
    check_manifest(tmp_path, recorded)
    asked = dict(recorded, recipe=dict(recorded['recipe'], size=32))
    with pytest.raises(ValueError) as error:
        check_manifest(tmp_path, asked)
    assert str(error.value) == (
        f'{tmp_path}/extraction.json: the features in {tmp_path} were extracted with other '
        'settings than this run asks for (recipe.size: 16 there, 32 asked now). Use another '
        '--out folder (or remove that one)')


# ------------------------------------------------------------------- 7: passT leftovers
def test_a_recount_under_another_val_fraction_names_the_option_and_both_values():
    """Before: "model.pkg.recount: ... recounted here: another graph than the checkpoint's:
    ..." without saying why. Now the training split's options that differ from the run's."""
    from types import MethodType, SimpleNamespace
    from mmengine.config import Config
    from vpn_plugin.models.pkg_hook import mark_recount
    trained = Config(dict(train_dataloader=dict(dataset=dict(
        type='PlanningDataset', horizon=3, val_fraction=0.1)))).pretty_text
    cfg = Config(dict(train_dataloader=dict(dataset=dict(
        type='PlanningDataset', horizon=3, val_fraction=0.3))))
    from vpn_plugin.runner import PlanningRunner
    runner = SimpleNamespace(cfg=cfg, trained_cfg_text=trained, changed_from_training=[])
    runner.training_split_changes = MethodType(PlanningRunner.training_split_changes, runner)
    mark_recount(runner, "another graph than the checkpoint's: 3 edge(s) added")
    (line,) = runner.changed_from_training
    assert line.endswith("3 edge(s) added (the training split is read with other options: "
                         "train_dataloader.dataset.val_fraction: 0.1 in training, 0.3 here)")


def test_a_missing_checkpoint_record_is_stated_not_guessed_at(tmp_path):
    """Before: a last_checkpoint naming a file that is not there was "a run killed while it
    rotated its checkpoints" (also when edited by hand). Now what is known."""
    import logging
    from mmengine.logging import MMLogger
    from vpn_plugin.engine.checkpoint import latest_checkpoint_in
    (tmp_path / 'last_checkpoint').write_text(str(tmp_path / 'epoch_9.pth'))
    logger = MMLogger.get_instance('known_s14_resume', log_level='WARNING')
    messages = []
    handler = logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())
    logger.addHandler(handler)
    try:
        assert latest_checkpoint_in(tmp_path, logger=logger) is None
    finally:
        logger.removeHandler(handler)
    assert messages == [f'{tmp_path}/last_checkpoint names {tmp_path}/epoch_9.pth, which does '
                        'not exist: the work dir holds no complete checkpoint: a fresh start']


# ---------------------------------------------- 8: training features rounded to float16
def test_a_float16_rounded_float32_copy_is_named_the_training_features_rounded(tmp_path):
    """Before: the training features rounded to float16 and stored as float32 were "other
    features (another seed or extractor?)". Now said as they are; values changed below
    float16 precision stay other features; an exact copy has no note."""
    import numpy as np
    from vpn_plugin.engine.checkpoint import features_folder_note, features_folder_record
    frames = np.random.default_rng(0).standard_normal((12, 512)).astype(np.float32)
    train = tmp_path / 'train'
    train.mkdir()
    np.savez(train / 'a_v1.npz', frames_features=frames)
    record = {'meta': {'features_folder': features_folder_record(train)}}
    rounded = frames.astype(np.float16).astype(np.float32)
    nudged = np.where(rounded == frames, frames, (frames + rounded) / 2)  # same float16
    assert np.array_equal(nudged.astype(np.float16), rounded.astype(np.float16))
    notes = {}
    for name, values in (('copy', frames), ('rounded', rounded), ('nudged', nudged)):
        (tmp_path / name).mkdir()
        np.savez(tmp_path / name / 'a_v1.npz', frames_features=values)
        notes[name] = features_folder_note(record, 'ck.pth', tmp_path / name)
    assert notes['copy'] == ''
    assert notes['rounded'].endswith(
        "1 of the 1 files read are the training features rounded to float16 (['a_v1.npz']): "
        'every '
        "value the float16 rounding of the training file's (about 3 significant digits), "
        'stored as a wider float')
    assert 'other features' not in notes['rounded']
    assert 'other features (another seed or extractor?)' in notes['nudged']
