"""Ninth hostile pass (issue 37), the tools around training (hostile22).

Each test is a case that was wrong, silent or vague on f24bbf3 (case ids of
/tmp/hostile22_log.md; the eighth pass's leftovers are named by what they were).
"""
import json
import re
from pathlib import Path

import pytest
import torch

from tool_modules import load_tool

REPO = Path(__file__).resolve().parents[1]


def user_error(tool: str, argv) -> str:
    """The message ``tool`` stops with (exit status 1 or argparse's 2, with a text)."""
    with pytest.raises(SystemExit) as stopped:
        load_tool(tool).main([str(a) for a in argv])
    assert stopped.value.code != 0, f'{tool}: exit code {stopped.value.code!r}'
    return str(stopped.value.code)


# ------------------------------------------------------------------- leftovers of pass 8
def test_text_cache_dir_that_cannot_be_written_names_the_option(shared_data, tmp_path,
                                                                monkeypatch):
    """hostile20 L9: text_embeddings.cache_dir='/proc/x' stopped with FileNotFoundError
    "[Errno 2] No such file or directory: '/proc/x'" (the path, not the option to change)."""
    from vpn_plugin.models import text_embeddings
    monkeypatch.setattr(text_embeddings, 'encode_texts',
                        lambda texts, encoder, pooling: torch.zeros(len(texts), 4))
    blocker = tmp_path / 'a_file'
    blocker.write_text('x')
    with pytest.raises(OSError, match=r"model.text_embeddings.cache_dir='.*a_file/x': .*"
                                      r'a_file is a file, not a folder; expected a writable '
                                      r'folder for the text-feature cache'):
        text_embeddings.load_action_features(taxonomy=shared_data / 'niv' / 'taxonomy.json',
                                             cache_dir=str(blocker / 'x'))
    assert blocker.read_text() == 'x'


@pytest.mark.parametrize('argv, pattern', [
    (['--size', 'unet_dim=0'], r'--size unet_dim=0: expected an integer >= 1'),
    (['--size', 'batch_size=-4'], r'--size batch_size=-4: expected an integer >= 1'),
    (['--official-python', '/nonexistent/python'],
     r'--official-python /nonexistent/python: does not exist'),
])
def test_compare_official_training_checks_options_before_writing(tmp_path, capsys, argv,
                                                                 pattern):
    """hostile20: --size unet_dim=0 and a missing --official-python were found only after
    ~45 s and 50 MB of synthetic features had been written into --out."""
    official = tmp_path / 'PDPP'
    from vpn_plugin.protocol.official.pdpp import METHOD
    for name in METHOD.required:
        (official / name).parent.mkdir(parents=True, exist_ok=True)
        (official / name).write_text('')
    out = tmp_path / 'out'
    message = user_error('compare_official_training',
                         ['--method', 'pdpp', '--official-dir', official, '--epochs', 5,
                          '--out', out, *argv])
    assert re.search(pattern, message + capsys.readouterr().err), message
    assert not out.exists()


# ------------------------------------------------------------------- export_windows
def test_export_windows_feature_prefix_is_a_folder(shared_data, tmp_path):
    """C17: --feature-prefix 'feats' (a folder without its trailing '/') wrote
    "featschanging_tire_0001.npy", a file of no folder, without a word."""
    out = tmp_path / 'w.json'
    load_tool('export_windows').main(['--dataset', 'niv', '--data-root', str(shared_data),
                                      '--split', 'test', '--horizon', '3', '--out', str(out),
                                      '--feature-prefix', 'feats'])
    records = json.loads(out.read_text())
    assert records[0]['id']['feature'] == 'feats/changing_tire_0001.npy'


# ------------------------------------------------------------------- plan.py
@pytest.mark.parametrize('argv, pattern', [
    (['--start-time', '0', '--goal-time', '5'],
     r'--start-time, --goal-time: for --video / --features only'),
    (['--random-weights'], r'--random-weights: for --video / --features only'),
    (['--features', 'x.npz', '--start-time', '1', '--goal-time', '5', '--indices', '3'],
     r'--indices: dataset samples; --features plans one video'),
])
def test_plan_flags_of_the_other_mode_are_refused(tmp_path, capsys, argv, pattern):
    """E46, E27: dataset samples planned with --start-time/--goal-time given (the samples'
    annotated times were used, the flags ignored), and --features with --indices 3 (ignored),
    both exit 0 without a word."""
    user_error('plan', ['cfg.py', tmp_path / 'epoch_1.pth', *argv])
    message = capsys.readouterr().err
    assert re.search(pattern, message), message


# ------------------------------------------------------------------- extract_features
def test_an_absurd_frame_rate_is_refused_before_decoding():
    """G37c: extract_features --fps 1e9 on a 3 s clip ran (187,500,000 chunks, ETA 1747 h), and
    the ffmpeg it started outlived the run when it was terminated."""
    from vpn_plugin.video.recipe import FrameRecipe
    with pytest.raises(ValueError, match=r'fps=1e\+09: expected a positive number of frames per '
                                         r'second up to 1000'):
        FrameRecipe(fps=1e9)
    assert FrameRecipe(fps=1000).fps == 1000


def test_files_of_a_video_folder_that_are_not_extracted_are_named(tmp_path, capsys):
    """G31: a folder holding a.mp4, c.wmv and README.txt extracted a.mp4 alone; the .wmv video
    and the README were left out without a word."""
    from test_extract_features import write_video
    videos = tmp_path / 'videos'
    videos.mkdir()
    write_video(videos / 'a.mp4', 4)
    (videos / 'c.wmv').write_bytes((videos / 'a.mp4').read_bytes())
    (videos / 'README.txt').write_text('notes')
    load_tool('extract_features').main([str(videos), '--out', str(videos / 'features'),
                                        '--random-weights', '--size', '16', '--num-workers', '0'])
    err = capsys.readouterr().err
    assert re.search(r'skipped 2 file\(s\) not named as videos \(.mp4, .*\): README.txt, c.wmv '
                     r'\(rename a video', err), err
    assert sorted(p.name for p in (videos / 'features').glob('*.npz')) == ['a.npz']


def test_plan_save_features_does_not_replace_a_video_of_a_feature_folder(tmp_path, capsys):
    """P9: plan.py --video a.mp4 --random-weights --save-features <extraction>/x.npz replaced
    that extraction's x.npz with random-weights features, without --overwrite (the file was
    taken for an earlier --save-features)."""
    import numpy as np
    folder = tmp_path / 'extracted'
    folder.mkdir()
    (folder / 'extraction.json').write_text('{}')
    np.savez(folder / 'x.npz', frames_features=np.ones((3, 512), np.float32),
             usable=np.bool_(True))
    before = (folder / 'x.npz').read_bytes()
    message = user_error('plan', ['cfg.py', tmp_path / 'epoch_1.pth', '--video', 'a.mp4',
                                  '--start-time', '0', '--goal-time', '2', '--random-weights',
                                  '--save-features', folder / 'x.npz'])
    assert re.search(r'the file exists in a feature folder \(beside its extraction.json\).*'
                     r'pass --overwrite', message + capsys.readouterr().err)
    assert (folder / 'x.npz').read_bytes() == before


# ------------------------------------------------------------------- check_reference
@pytest.mark.parametrize('edit, pattern', [
    (lambda text: text[:100], r'CEFITO loader annotations .*loader_annotations.json: line 7 '
                              r'column 4: Unterminated string'),
    (lambda text: text.replace('"vid"', '"video"', 1),
     r"loader_annotations.json: record 0: no 'vid' \(of the record"),
])
def test_cefito_loader_fixture_errors_name_the_file_and_record(tmp_path, edit, pattern):
    """H14, H14b: check_reference.py on a copy of cefito_small_t3 whose
    loader_annotations.json was truncated stopped with "Unterminated string starting at: line
    7 column 4 (char 92)" (no file), one without a record's "vid" with "error: vid"."""
    from reference_fixtures import copy_fixture, reference_dir
    from vpn_plugin.oracles import cefito
    fixture = copy_fixture(reference_dir('cefito_small_t3'), tmp_path)
    path = fixture / 'loader_annotations.json'
    path.write_text(edit(path.read_text()))
    meta = json.loads((fixture / 'meta.json').read_text())
    with pytest.raises(ValueError, match=pattern):
        cefito.loader_outputs(fixture, meta)


def test_cefito_fixture_without_its_training_step_file_fails(tmp_path, capsys):
    """H19: check_reference.py on a copy of cefito_small_t3 without train_step.npz printed
    PASS, exit 0: the AdamW + EMA step was left unchecked without a word."""
    from reference_fixtures import copy_fixture, reference_dir
    fixture = copy_fixture(reference_dir('cefito_small_t3'), tmp_path)
    (fixture / 'train_step.npz').unlink()
    assert load_tool('check_reference').main([str(fixture), '--no-sensitivity']) == 1
    out = capsys.readouterr().out
    assert re.search(r'train_step.npz:\* \(the file; the AdamW \+ EMA step\) \(not recorded: '
                     r'the fixture lacks', out), out


# ------------------------------------------------------------------- check_authors_loader
def test_authors_loader_check_names_windows_of_one_side(tmp_path, capsys):
    """N11: a fixture whose windows.json has one window more than expected.npz printed "21
    mismatching windows" for every field and nothing about which window was extra."""
    from reference_fixtures import REFERENCE, copy_fixture
    if not (REFERENCE / 'authors_loader_small' / 'windows.json').is_file():
        pytest.skip(f'authors_loader_small not found in {REFERENCE}')
    fixture = copy_fixture(REFERENCE / 'authors_loader_small', tmp_path)
    windows = json.loads((fixture / 'windows.json').read_text())
    (fixture / 'windows.json').write_text(json.dumps(windows + windows[:1]))
    assert load_tool('check_authors_loader').main([str(fixture)]) == 1
    out = capsys.readouterr().out
    assert 'the dataset kept 21 windows, expected.npz holds 20: windows only the dataset kept ' \
           '[20], only the authors\' loader []' in out, out


# ------------------------------------------------------------------- convert_authors_checkpoint
def test_convert_authors_checkpoint_of_another_method_names_src_and_config(tmp_path, capsys):
    """L9: SCHEMA's state_dict.npz with a ViterbiPlanNet config stopped with "parameter
    'state_decoder.logit_scale' is not one of the official model's" (a KeyError, neither the
    file nor the config named)."""
    from reference_fixtures import reference_dir
    src = reference_dir('schema_crosstask_t3') / 'state_dict.npz'
    message = user_error('convert_authors_checkpoint', [
        src, tmp_path / 'out.pth', '--config', REPO / 'configs' / 'vpn_crosstask_t3.py'])
    assert re.search(rf"SRC {re.escape(str(src))} into the ViterbiPlanNet of --config .*"
                     r"vpn_crosstask_t3.py: parameter 'state_decoder.logit_scale' is not one",
                     message + capsys.readouterr().err)
    assert not (tmp_path / 'out.pth').exists()


# ------------------------------------------------------------------- model_stats
def test_cefito_heads_not_dividing_the_width_name_both_keys():
    """K18: model_stats configs/baselines/cefito_niv_t3.py model.num_heads=7 stopped with
    'hidden dim 384 is not divisible by num_heads=7' (neither key nor a valid value)."""
    from vpn_plugin.core.energy_field import Attention
    with pytest.raises(ValueError, match=r'hidden_dim=384 is not divisible by num_heads=7 '
                                         r'\(.*model.hidden_dim / model.num_heads\); expected '
                                         r'num_heads among \[1, 2, 3, 4, 6, 8,'):
        Attention(384, 7)


# ------------------------------------------------------------------- quickstart
def test_quickstart_names_the_dataset_of_its_config(tmp_path):
    """Q6: quickstart --config configs/vpn_niv_t3.py trained and tested NIV and printed the
    table under 'ViterbiPlanNet, CrossTask T=3'; with NIV data missing it said 'CrossTask
    annotations not found'."""
    tool = load_tool('quickstart')
    with pytest.raises(SystemExit, match=r'NIV annotations \(of --config .*vpn_niv_t3.py\) not '
                                         r'found in .*nowhere/niv'):
        tool.main(['--config', str(REPO / 'configs' / 'vpn_niv_t3.py'),
                   '--data-root', str(tmp_path / 'nowhere'), '--epochs', '1'])
    from vpn_plugin.data_paths import load_config
    assert tool.config_dataset(load_config(REPO / 'configs' / 'vpn_niv_t3.py')) == 'niv'
    assert tool.config_dataset(load_config(REPO / tool.CONFIG)) == 'crosstask'


# ------------------------------------------------------------------- benchmark_*
def test_benchmark_checked_arguments_sizes_name_the_entry():
    """J4: benchmark_checked_arguments --sizes abc stopped with "invalid literal for int()
    with base 10: 'abc'" (neither the option nor the form); benchmark_dvl named both."""
    with pytest.raises(SystemExit, match=r"--sizes entry 'abc': expected BxTxN"):
        load_tool('benchmark_checked_arguments').main(['--sizes', '1x3x4', 'abc'])


# ------------------------------------------------------------------- Python API
@pytest.mark.parametrize('device, pattern', [
    (3, r'init_planner\(\) argument device 3 is not a torch device|init_planner\(\) argument '
        r'device 3: this machine has'),
    ('cuda:7', r"init_planner\(\) argument device 'cuda:7': this machine has \d+ CUDA"),
])
def test_init_planner_device_is_checked_first(device, pattern):
    """F28: init_planner(cfg, ckpt, device=3) built the model and loaded the checkpoint, then
    stopped with torch's "Cannot access accelerator device when none is available" (no
    argument named)."""
    if torch.cuda.device_count() > 7:
        pytest.skip('a machine with 8 GPUs has cuda:7')
    from vpn_plugin.apis import init_planner
    with pytest.raises(ValueError, match=pattern):
        init_planner('no_such_config.py', device=device)
