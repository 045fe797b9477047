"""Output flags as a hostile user gives them (issue 37, data loss 1-2): no tool replaces one of
its inputs, a file of another kind, a device or a folder, or writes a format under another
extension; each tool rewrites its own earlier output (vpn_plugin/outputs.py)."""
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from tool_modules import load_tool
from vpn_plugin.outputs import KINDS, check_output

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / 'configs/vpn_crosstask_t3.py'
NOT_OURS = 'it is not recognisably an earlier output of this kind'  # and needs --overwrite


def user_error(tool: str, argv) -> str:
    """The message ``tool`` stops with (exit status 1, SystemExit with a text)."""
    with pytest.raises(SystemExit) as stopped:
        load_tool(tool).main([str(a) for a in argv])
    assert isinstance(stopped.value.code, str), f'{tool}: exit code {stopped.value.code!r}'
    return stopped.value.code


def snapshot(folder: Path) -> dict:
    """{name: bytes} of every file under ``folder`` (what must stay as it was)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob('*'))
            if p.is_file() and not p.is_symlink()}


@pytest.fixture
def victim(tmp_path) -> Path:
    """A file that stands for an input (a checkpoint under test): its bytes must survive."""
    path = tmp_path / 'run' / 'victim.pth'
    path.parent.mkdir()
    path.write_bytes(b'PK\x03\x04 a checkpoint')
    return path


@pytest.fixture
def tiny_planner(tiny_crosstask, tmp_path) -> tuple:
    """(config, checkpoint) of a parameter-free planner on the tiny CrossTask: test.py runs."""
    from mmaction.registry import MODELS
    from test_pkg_builder import tiny_uniform_config
    from tiny_configs import save_recorded
    model = MODELS.build(dict(type='UniformEmissionPlanner', num_actions=133, horizon=3))
    model.set_pkg(np.full((133, 133), 1 / 133))
    (tmp_path / 'run').mkdir(exist_ok=True)
    checkpoint = save_recorded(model, tmp_path / 'run' / 'victim.pth',
                               tiny_crosstask['test_dataset'])
    return tiny_uniform_config(tiny_crosstask, tmp_path), checkpoint


# ------------------------------------------------------------------ the rule itself
def test_an_output_that_is_an_input_is_refused_through_every_alias(victim, monkeypatch):
    monkeypatch.chdir(victim.parent.parent)
    (victim.parent / 'link.json').symlink_to(victim)
    os.link(victim, victim.parent / 'hard.json')
    for alias in (str(victim), 'run/victim.pth', './run/../run/victim.pth',
                  str(victim.parent / 'link.json'), 'run/hard.json'):
        for overwrite in (False, True):
            with pytest.raises(ValueError, match='that is an input of this command'):
                check_output(alias, 'metrics', '--out-metrics', ['run/victim.pth'], overwrite)


@pytest.mark.parametrize('path,expected', [
    ('', 'an empty path'), ('   ', 'an empty path'), ('new/', "ends in '/'"),
    ('/dev/stdout', 'a device or process file'), ('/dev/null', 'a device or process file'),
    ('/proc/self/fd/1', 'a device or process file'),
])
def test_no_output_is_empty_a_folder_or_a_device(path, expected):
    with pytest.raises(ValueError, match=expected):
        check_output(path, 'metrics', '--out-metrics', overwrite=True)


def test_a_folder_a_fifo_and_a_wrong_extension_are_refused(tmp_path):
    (tmp_path / 'dir.json').mkdir()
    os.mkfifo(tmp_path / 'fifo.json')
    with pytest.raises(ValueError, match='is a folder'):
        check_output(tmp_path / 'dir.json', 'metrics', '--out-metrics', overwrite=True)
    with pytest.raises(ValueError, match='is a FIFO'):
        check_output(tmp_path / 'fifo.json', 'metrics', '--out-metrics', overwrite=True)
    with pytest.raises(ValueError, match=r'x\.txt: expected a file name ending in \.npz'):
        check_output(tmp_path / 'x.txt', 'features', '--save-features', overwrite=True)


def test_an_output_inside_a_file_or_a_stem_that_names_no_file_is_refused(tmp_path):
    from vpn_plugin.outputs import stem_files
    (tmp_path / 'notes.txt').write_text('mine')
    with pytest.raises(ValueError, match='notes.txt is a file, not a folder'):
        check_output(tmp_path / 'notes.txt' / 'sub' / 'm.json', 'metrics', '--out-metrics')
    for stem in ('', '.', 'figures/', '..'):
        with pytest.raises(ValueError, match='expected a file stem'):
            stem_files(stem, ('.png', '.pdf'))
    assert stem_files('docs/table.md', ('.md',)) == [Path('docs/table.md')]
    assert stem_files('docs/table.v2', ('.md',)) == [Path('docs/table.v2.md')]  # pass17 H01


def test_an_existing_file_of_another_kind_needs_overwrite_and_its_own_kind_does_not(tmp_path):
    foreign, ours = tmp_path / 'notes.json', tmp_path / 'metrics.json'
    foreign.write_text('{"mine": "do not lose"}')
    ours.write_text(json.dumps({'plan/success_rate': 57.1, 'plan/mean_accuracy': 60.0}))
    with pytest.raises(ValueError, match=re.escape(f'exists and {NOT_OURS} (metrics JSON')):
        check_output(foreign, 'metrics', '--out-metrics')
    assert check_output(foreign, 'metrics', '--out-metrics', overwrite=True) == foreign
    assert check_output(ours, 'metrics', '--out-metrics') == ours
    window_file = tmp_path / 'windows.json'
    window_file.write_text('[]')  # a format others' files share: never taken for ours
    with pytest.raises(ValueError, match='are never taken for an earlier output'):
        check_output(window_file, 'window_file', '--out')


def test_a_symlinked_output_is_written_through_to_its_target(tmp_path):
    """With --overwrite (without: refused, tests/test_known_s14.py)."""
    target = tmp_path / 'target.json'
    target.write_text('{"plan/success_rate": 1.0}')
    (tmp_path / 'link.json').symlink_to(target)
    assert check_output(tmp_path / 'link.json', 'metrics', '--out-metrics',
                        overwrite=True) == target
    (tmp_path / 'dangling.json').symlink_to(tmp_path / 'gone.json')
    assert check_output(tmp_path / 'dangling.json', 'metrics', '--out-metrics',
                        overwrite=True) == tmp_path / 'gone.json'


def test_every_kind_recognises_what_its_tool_writes(tmp_path):
    """The recognisers against the writers themselves (a recogniser that accepts nothing would
    make every rerun need --overwrite; one that accepts anything would lose files)."""
    import pickle
    import torch
    from mmengine.fileio import dump
    from vpn_plugin.video.extract import write_features_atomically
    dump([{'pred_plan': [1, 2, 3]}], str(tmp_path / 'p.pkl'), file_format='pkl')
    with open(tmp_path / 'p5.pkl', 'wb') as handle:
        pickle.dump([1], handle, protocol=5)
    write_features_atomically(tmp_path / 'f.npz', dict(frames_features=np.zeros((2, 3)),
                                                      usable=np.bool_(True)))
    np.savez(tmp_path / 'dataset.npz', frames_features=np.zeros((2, 3)))  # a dataset's file
    torch.save({'state_dict': {}}, tmp_path / 'trained.pth')
    torch.save({'state_dict': {}, 'meta': {'converted_by': 'tools/convert_authors_checkpoint.py'}},
               tmp_path / 'converted.pth')
    assert KINDS['predictions'].recognise(tmp_path / 'p.pkl')
    assert KINDS['predictions'].recognise(tmp_path / 'p5.pkl')
    assert not KINDS['predictions'].recognise(tmp_path / 'trained.pth')
    assert KINDS['features'].recognise(tmp_path / 'f.npz')
    assert not KINDS['features'].recognise(tmp_path / 'dataset.npz')
    assert KINDS['converted_checkpoint'].recognise(tmp_path / 'converted.pth')
    assert not KINDS['converted_checkpoint'].recognise(tmp_path / 'trained.pth')


# ------------------------------------------------------------------ tools: issue 37's two cases
def test_test_py_refuses_to_write_its_metrics_over_the_checkpoint_under_test(tiny_planner,
                                                                           tmp_path):
    """Today `test.py CFG run/victim.pth --out-metrics run/victim.pth` replaces the checkpoint
    by the metrics JSON (exit 0)."""
    config, victim = tiny_planner
    before = victim.read_bytes()
    for alias in (victim, victim.parent / '..' / 'run' / 'victim.pth'):
        message = user_error('test', [config, victim, '--work-dir', tmp_path / 'w',
                                      '--out-metrics', alias, '--overwrite'])
        assert f'--out-metrics {alias}: that is an input of this command' in message
    assert victim.read_bytes() == before
    other = victim.parent / 'notes.json'
    other.write_text('{"mine": 1}')
    message = user_error('test', [config, victim, '--out-metrics', other])
    assert f'the file exists and {NOT_OURS} (metrics JSON' in message and '--overwrite' in message
    renamed = victim.parent / 'other_run.pkl'  # a checkpoint someone named .pkl
    shutil.copy(victim, renamed)
    message = user_error('test', [config, victim, '--out', renamed])
    assert f'{NOT_OURS} (predictions pickle of tools/test.py' in message
    assert renamed.read_bytes() == before and other.read_text() == '{"mine": 1}'
    assert 'expected a file name ending in .pkl' in user_error(
        'test', [config, victim, '--out', victim.parent / 'p.json'])
    metrics, predictions = tmp_path / 'metrics.json', tmp_path / 'predictions.pkl'
    for _ in range(2):  # its own earlier outputs: replaced without --overwrite
        load_tool('test').main([str(config), str(victim), '--work-dir', str(tmp_path / 'w'),
                                '--out-metrics', str(metrics), '--out', str(predictions)])
    assert 'plan/success_rate' in json.loads(metrics.read_text())


def test_plan_py_refuses_to_save_features_over_the_video_or_under_another_extension(
        tiny_crosstask, tmp_path, capsys):
    """Today `plan.py --video clip.mp4 ... --save-features clip.mp4` replaces the video by an
    npz, and `--save-features x.txt` writes an npz named .txt."""
    import torch
    from test_apis import tiny_vpn_config
    from test_extract_features import SIZE, write_video
    from tiny_configs import save_recorded
    from vpn_plugin.apis import init_planner
    config = tiny_vpn_config(tiny_crosstask, tmp_path)
    torch.manual_seed(0)
    checkpoint = save_recorded(init_planner(str(config)), tmp_path / 'tiny.pth',
                               tiny_crosstask['test_dataset'])
    video = tmp_path / 'clip.mp4'
    write_video(video, 16 * 5)
    common = [config, '--checkpoint', checkpoint, '--video', video, '--start-time', 1,
              '--goal-time', 4, '--size', SIZE, '--random-weights']
    before = snapshot(tmp_path)
    for alias in (video, tmp_path / '.' / 'clip.mp4'):
        message = user_error('plan', common + ['--save-features', alias, '--overwrite'])
        assert f'--save-features {alias}: that is an input of this command' in message
    message = user_error('plan', common + ['--save-features', tmp_path / 'x.txt'])
    assert 'x.txt: expected a file name ending in .npz' in message
    (tmp_path / 'other.npz').write_bytes(b'PK\x03\x04 an archive of someone')
    assert f'the file exists and {NOT_OURS} (feature npz' in user_error(
        'plan', common + ['--save-features', tmp_path / 'other.npz'])
    assert snapshot(tmp_path) == dict(before, **{'other.npz': b'PK\x03\x04 an archive of someone'})
    for _ in range(2):  # its own earlier features: replaced without --overwrite
        load_tool('plan').main([str(a) for a in common + ['--save-features',
                                                          tmp_path / 'own.npz']])
    assert KINDS['features'].recognise(tmp_path / 'own.npz')
    capsys.readouterr()


# ------------------------------------------------------------------ tools: the rule for every one
def results_file(tmp_path) -> Path:
    rows = [dict(method=m, seed=s, horizon=3, metrics={'success_rate': 10.0 * s + i})
            for i, m in enumerate(('A', 'B')) for s in range(3)]
    path = tmp_path / 'results.jsonl'
    path.write_text(''.join(json.dumps(row) + '\n' for row in rows))
    return path


def test_report_refuses_someones_markdown_and_rewrites_its_own_table(tmp_path, capsys):
    """Today `report.py R --out mine` replaces mine.md (and writes mine.tex) without a word."""
    results = results_file(tmp_path)
    mine = tmp_path / 'mine.md'
    mine.write_text('# my notes\n')
    message = user_error('report', [results, '--metrics', 'success_rate', '--out',
                                    tmp_path / 'mine'])
    assert f'--out {mine}: the file exists and {NOT_OURS} (Markdown table' in message
    assert mine.read_text() == '# my notes\n' and not (tmp_path / 'mine.tex').exists()
    (tmp_path / 'link.md').symlink_to(results)
    assert 'that is an input of this command' in user_error(
        'report', [results, '--metrics', 'success_rate', '--out', tmp_path / 'link'])
    for _ in range(2):  # its own table: rewritten without --overwrite
        load_tool('report').main([str(results), '--metrics', 'success_rate', '--num-resamples',
                                  '20', '--num-diff-resamples', '20', '--out',
                                  str(tmp_path / 'table')])
    load_tool('report').main([str(results), '--metrics', 'success_rate', '--num-resamples', '20',
                              '--num-diff-resamples', '20', '--out', str(tmp_path / 'mine'),
                              '--overwrite'])
    assert (tmp_path / 'mine.md').read_text() != '# my notes\n'
    assert 'expected a file stem' in user_error(  # '<dir>/' wrote <dir>.md beside it
        'report', [results, '--metrics', 'success_rate', '--out', str(tmp_path) + '/'])
    capsys.readouterr()
    with pytest.raises(SystemExit) as stopped:  # '' wrote nothing without a word
        load_tool('report').main([str(results), '--metrics', 'success_rate', '--out', ''])
    assert stopped.value.code == 2 and '--out' in capsys.readouterr().err


def test_plots_refuses_a_foreign_figure_and_redraws_its_own(tmp_path, capsys):
    results = results_file(tmp_path)
    photo = tmp_path / 'fig.png'
    photo.write_bytes(b'\x89PNG\r\n\x1a\n a photo')
    argv = ['params', results, '--horizon', '3', '--out', tmp_path / 'fig']
    assert f'the file exists and {NOT_OURS} (figure of tools/plots.py' in user_error('plots',
                                                                                   argv)
    assert photo.read_bytes() == b'\x89PNG\r\n\x1a\n a photo'
    (tmp_path / 'in.png').symlink_to(results)
    assert 'that is an input of this command' in user_error(
        'plots', ['params', results, '--horizon', '3', '--out', tmp_path / 'in'])
    from vpn_plugin.protocol.plots import paper_style, save_figure
    for _ in range(2):
        with paper_style() as plt:
            paths = save_figure(plt.figure(), tmp_path / 'own')
        for path in paths:
            assert check_output(path, 'figure', '--out') == path  # recognised: its own
    capsys.readouterr()


def test_export_windows_never_writes_over_the_window_file_it_reads(tmp_path, shared_data):
    windows = tmp_path / 'test_T3_133.json'
    shutil.copy(shared_data / 'crosstask/splits/test_T3_133.json', windows)
    config = tmp_path / 'cfg.py'
    config.write_text(f"_base_ = [{str(REPO / 'configs/_base_/datasets/crosstask.py')!r}]\n"
                      f"data_root = {str(shared_data)!r}\n"
                      f"test_dataloader = dict(dataset=dict(window_file={str(windows)!r}))\n")
    before = windows.read_bytes()
    for extra in ([], ['--overwrite']):
        message = user_error('export_windows', ['--config', config, '--split', 'test',
                                                '--horizon', '3', '--out', windows, *extra])
        assert 'that is an input of this command' in message
    assert windows.read_bytes() == before
    other = tmp_path / 'other.json'
    other.write_text('{"mine": 1}')
    assert 'are never taken for an earlier output' in user_error(
        'export_windows', ['--config', config, '--split', 'test', '--horizon', '3', '--out',
                           other])


def test_convert_authors_checkpoint_never_writes_over_its_source_or_a_trained_checkpoint(
        tmp_path):
    import torch
    source = tmp_path / 'authors.pth'
    torch.save({'w': torch.zeros(1)}, source)
    trained = tmp_path / 'epoch_50.pth'
    torch.save({'state_dict': {}, 'meta': {'epoch': 50}}, trained)
    before = snapshot(tmp_path)
    assert 'that is an input of this command' in user_error(
        'convert_authors_checkpoint', [source, source, '--config', CONFIG, '--overwrite'])
    assert f'{NOT_OURS} (checkpoint of tools/convert_authors_checkpoint.py' in user_error(
        'convert_authors_checkpoint', [source, trained, '--config', CONFIG])
    assert snapshot(tmp_path) == before


def test_make_text_features_needs_overwrite_for_an_existing_array(tmp_path):
    existing = tmp_path / 'state_features.npy'
    np.save(existing, np.ones((2, 6, 4), np.float32))
    before = existing.read_bytes()
    message = user_error('make_text_features', ['--taxonomy', tmp_path / 't.json',
                                                '--state-descriptions', tmp_path / 's.json',
                                                '--out', existing])
    assert 'the file exists and files of its kind (text-feature array) are never' in message
    assert existing.read_bytes() == before


LLM = ['--config', CONFIG, '--model', 'm', '--base-url', 'http://127.0.0.1:9/v1']


def test_llm_eval_never_saves_anchors_over_a_file_it_reads(tmp_path):
    step_checkpoint = tmp_path / 'step.pth'
    step_checkpoint.write_bytes(b'weights')
    message = user_error('llm_eval', [*LLM, '--step-config', CONFIG, '--step-checkpoint',
                                      step_checkpoint, '--save-anchors', step_checkpoint,
                                      '--overwrite', '--out', tmp_path / 'r.jsonl'])
    assert f'--save-anchors {step_checkpoint}: that is an input of this command' in message
    assert step_checkpoint.read_bytes() == b'weights'
    # --save-anchors beside --anchors-file: refused by the parser (no step model to save),
    # tests/test_hostile_pass3.py::test_llm_eval_save_anchors_without_a_step_model_is_refused
    notes = tmp_path / 'notes.jsonl'
    notes.write_text('{"todo": "mine"}\n')
    assert f'{NOT_OURS} (results file' in user_error(
        'llm_eval', [*LLM, '--out', notes])
    assert notes.read_text() == '{"todo": "mine"}\n'


def test_convert_features_overwrite_never_replaces_a_source_file(tmp_path):
    folder = tmp_path / 'features'
    folder.mkdir()
    np.savez(folder / 'v1.npz', frames_features=np.ones((3, 8), np.float32))
    with open(folder / 'v2.npy', 'wb') as handle:  # a public raw pickle with an object field
        import pickle
        pickle.dump({'frames_features': np.ones((3, 8), np.float32), 'meta': {'a': 1}}, handle)
    np.savez(folder / 'v2.npz', frames_features=np.zeros((3, 8), np.float32))  # and its npz
    before = snapshot(tmp_path)
    message = user_error('convert_features', ['--src', folder, '--dst', folder, '--frame-dim',
                                              8, '--overwrite'])
    assert 'that is an input of this command' in message
    assert snapshot(tmp_path) == before


def test_convert_egoper_keeps_a_dataset_folder_it_did_not_write(tmp_path):
    out = tmp_path / 'my_dataset'
    out.mkdir()
    (out / 'taxonomy.json').write_text('{"0_mine": {"0": "a"}}')
    (tmp_path / 'splits').mkdir()
    annotation = tmp_path / 'annotation.json'
    annotation.write_text('{}')
    message = user_error('convert_egoper', [annotation, '--split-dir', tmp_path / 'splits',
                                            '--out', out, '--errors', 'drop'])
    assert f'--out {out / "taxonomy.json"}: the file exists' in message
    assert (out / 'taxonomy.json').read_text() == '{"0_mine": {"0": "a"}}'


def test_make_synthetic_features_keeps_a_configs_real_features(tmp_path, tiny_crosstask):
    """Today `--config CFG` writes synthetic features over the config's feature_dir."""
    real = tmp_path / 'real_features'
    shutil.copytree(tiny_crosstask['feature_dir'], real)
    config = tmp_path / 'cfg.py'
    splits = {split: dict(tiny_crosstask[f'{split}_dataset'], feature_dir=str(real))
              for split in ('train', 'test')}
    config.write_text(f"feature_dir = {str(real)!r}\n" + ''.join(
        f"{split}_dataloader = dict(dataset={dataset!r})\n" for split, dataset in splits.items()))
    before = snapshot(real)
    message = user_error('make_synthetic_features', ['--config', config, '--seed', 7])
    assert 'feature file(s) this tool would replace' in message and '--overwrite' in message
    assert snapshot(real) == before


def test_a_work_dir_below_a_file_names_the_file(tmp_path):
    """Before: check_folder_target let a --work-dir / --dst / --out below a file through (only
    extract_videos and convert_features said which part is a file, each with its own walk);
    tools/train.py then stopped at makedirs' "[Errno 20] Not a directory"."""
    from vpn_plugin.errors import check_folder_target
    (tmp_path / 'notes.txt').write_text('mine')
    with pytest.raises(NotADirectoryError, match=rf'work dir {tmp_path}/notes.txt/run: '
                       rf'{tmp_path}/notes.txt is a regular file, not a folder; expected a '
                       r'folder \(made when missing\) for the logs and checkpoints: give '
                       r'another --work-dir'):
        check_folder_target(tmp_path / 'notes.txt' / 'run')
    check_folder_target(tmp_path / 'new' / 'run')  # made when missing
