"""Every tool ends a user error with one message and a non-zero exit (issue 25, item 7):
file, field, value, expectation and the fix; ``VPN_TRACEBACK=1`` keeps the traceback. Names
given on the command line (``--methods``) and top-level config keys are checked."""
import json
from pathlib import Path

import pytest

import vpn_plugin.mm  # noqa: F401  (registration)
from tool_modules import load_tool

REPO = Path(__file__).resolve().parents[1]
PROTOCOL = str(REPO / 'configs/protocol/standard_niv.py')


@pytest.fixture(autouse=True)
def no_traceback(monkeypatch):
    monkeypatch.delenv('VPN_TRACEBACK', raising=False)


def user_error(tool: str, argv) -> str:
    """The message tool ``tool`` stops with (exit status 1: SystemExit with a text)."""
    with pytest.raises(SystemExit) as stopped:
        load_tool(tool).main([str(a) for a in argv])
    assert isinstance(stopped.value.code, str), f'{tool}: exit code {stopped.value.code!r}'
    return stopped.value.code


def bad_results_file(tmp_path) -> Path:
    path = tmp_path / 'results.jsonl'
    path.write_text('{"method": "A", "seed": 0, "horizon": 3, "metrics": {"success_rate": 1}}\n'
                    '{"method": "A", "seed": 1, "horizon": 3, "metrics": {"success_rate": "x"}}\n')
    return path


def test_every_tool_ends_a_user_error_with_one_message(tmp_path, monkeypatch):
    results = bad_results_file(tmp_path)
    protocol = tmp_path / 'protocol.py'
    protocol.write_text("protocol = 'p'\nruns = [dict(method='A', config='missing_config.py')]\n")
    bad_config = tmp_path / 'bad_taxonomy.py'
    bad_config.write_text(
        f"_base_ = [{str(REPO / 'configs/vpn_niv_t3.py')!r}]\n"
        "train_dataloader = dict(dataset=dict(taxonomy='no_such_taxonomy.json'))\n")
    cases = {
        'report': ([results], r"results.jsonl:2: field metrics.success_rate='x'; expected a finite number"),
        'plots': (['curve', results, '--x', 'level', '--out', tmp_path / 'fig'],
                  r"results.jsonl:2: field metrics.success_rate='x'"),
        'run_protocol': ([protocol, '--dry-run'], r'missing_config.py'),
        'llm_eval': (['--config', bad_config, '--base-url', 'http://127.0.0.1:9/v1',
                      '--model', 'm', '--out', tmp_path / 'llm.jsonl'], r'no_such_taxonomy.json'),
        'model_stats': ([tmp_path / 'no_config.py'], r'no_config.py'),
        'convert_authors_checkpoint': ([tmp_path / 'theirs.pth', tmp_path / 'out.pth', '--config',
                                        REPO / 'configs/vpn_niv_t3.py', '--pkg',
                                        tmp_path / 'T3.npy'], r'theirs.pth'),
        'check_authors_loader': ([tmp_path / 'no_fixture'], r'no_fixture'),
    }
    for tool, (argv, expected) in cases.items():
        message = user_error(tool, argv)
        assert message.startswith('error: ') and 'VPN_TRACEBACK=1' in message, (tool, message)
        assert __import__('re').search(expected, message), (tool, message)
    monkeypatch.setenv('VPN_TRACEBACK', '1')
    with pytest.raises(ValueError, match="success_rate='x'; expected a finite number"):
        load_tool('report').main([str(results)])


def test_every_tool_main_runs_under_tool_main(tmp_path):
    """A tool whose ``main`` is not wrapped by ``errors.tool_main`` ends a user error with a
    traceback (benchmark_epoch.py did)."""
    tools = sorted(p.stem for p in (REPO / 'tools').glob('*.py')
                   if '\ndef main(' in p.read_text())
    assert len(tools) >= 20
    unwrapped = [t for t in tools if not hasattr(load_tool(t).main, '__wrapped__')]
    assert unwrapped == []
    message = user_error('benchmark_epoch', [tmp_path / 'no_config.py', '--epochs', '1'])
    assert 'no_config.py' in message


def results_rows(tmp_path) -> Path:
    path = tmp_path / 'ok.jsonl'
    rows = [dict(method=method, seed=seed, horizon=3, metrics=dict(success_rate=10.0 + seed),
                 variant=dict(level=0.1))
            for method in ('ViterbiPlanNet', 'Base Model') for seed in range(3)]
    path.write_text(''.join(json.dumps(row) + '\n' for row in rows))
    return path


def test_a_typo_in_methods_lists_the_valid_names(tmp_path):
    rows = results_rows(tmp_path)
    for tool, argv in (
            ('report', [rows, '--methods', 'ViterbiPlanNet', 'Base Modle']),
            ('plots', ['curve', rows, '--x', 'level', '--out', tmp_path / 'f', '--methods',
                       'ViterbiPlanNet', 'Base Modle']),
            ('run_protocol', [PROTOCOL, '--dry-run', '--methods', 'ViterbiPlanNet',
                              'Base Modle'])):
        message = user_error(tool, argv)
        assert "--methods: 'Base Modle' is not among the valid names" in message, (tool, message)
        assert "did you mean 'Base Model'?" in message and "'ViterbiPlanNet'" in message, tool
    assert not list(tmp_path.glob('f.*'))


def test_unknown_top_level_config_keys_are_refused_with_the_close_match(tmp_path, monkeypatch):
    monkeypatch.setenv('LOCAL_RANK', '0')
    config = REPO / 'configs/vpn_niv_t3.py'
    message = user_error('test', [config, '--cfg-options', 'horizn=4'])
    assert "horizn" in message and "did you mean 'horizon'?" in message
    message = user_error('train', [config, '--cfg-options', 'no_such_key=1'])
    assert "'no_such_key'" in message and 'top-level' in message
    typo = tmp_path / 'typo.py'
    typo.write_text(f"_base_ = [{str(config)!r}]\nhorizn = 4\n")
    message = user_error('train', [typo, '--work-dir', tmp_path / 'w'])
    assert "'horizn'" in message and "did you mean 'horizon'?" in message
    message = user_error('train', [config, '--cfg-options', 'model.dropuot=0.1'])
    assert "dropuot" in message and "did you mean 'dropout'?" in message
    protocol = tmp_path / 'protocol.py'
    protocol.write_text(f"_base_ = [{PROTOCOL!r}]\nseed = [0]\n")
    message = user_error('run_protocol', [protocol, '--dry-run'])
    assert "'seed'" in message and "did you mean 'seeds'?" in message


@pytest.mark.parametrize('tool, argv', [
    ('run_protocol', [PROTOCOL, '--dry-run', '--max-epochs', '0']),  # was ignored: 500 epochs
    ('run_protocol', [PROTOCOL, '--dry-run', '--batch-size', '0']),
    ('llm_eval', ['--config', 'c.py', '--model', 'm', '--base-url', 'u', '--max-retries', '-1']),
    ('report', ['r.jsonl', '--digits', '-1']),
])
def test_numbers_outside_their_range_are_refused_not_ignored(tool, argv, capsys):
    with pytest.raises(SystemExit) as stopped:
        load_tool(tool).parse_args([str(a) for a in argv])
    assert stopped.value.code == 2 and 'expected an integer >=' in capsys.readouterr().err


# ----------------------------------------------------------- issue 33: silent today, now refused
def argparse_error(tool: str, argv, capsys) -> str:
    """The usage error (exit status 2) of ``tool``'s argument parser."""
    with pytest.raises(SystemExit) as stopped:
        load_tool(tool).main([str(a) for a in argv])
    assert stopped.value.code == 2, (tool, stopped.value.code)
    return capsys.readouterr().err


@pytest.mark.parametrize('tool,flag', [('train', '--work-dir'), ('test', '--work-dir'),
                                       ('train', '--data-root'), ('test', '--feature-dir'),
                                       ('run_protocol', '--data-root')])
def test_an_empty_path_flag_is_refused_not_the_default(tool, flag, capsys):
    """Today `--data-root ''` (an unset shell variable) falls back to the config's folder."""
    config = REPO / 'configs/vpn_niv_t3.py'
    argv = [PROTOCOL if tool == 'run_protocol' else config, flag, '']
    assert f"argument {flag}: '' is an empty path" in argparse_error(tool, argv, capsys)


def test_test_py_refuses_load_from_in_cfg_options(tmp_path):
    """Today `test.py CFG CKPT --cfg-options load_from=OTHER` silently scores CKPT."""
    checkpoint = tmp_path / 'a.pth'
    checkpoint.write_bytes(b'')
    config = REPO / 'configs/vpn_niv_t3.py'
    for ckpt in ([checkpoint], []):
        message = user_error('test', [config, *ckpt, '--cfg-options',
                                      f'load_from={tmp_path / "other.pth"}'])
        assert 'other.pth: test.py scores the CKPT argument' in message, message
        assert 'give the checkpoint to test as CKPT' in message


def test_protocol_without_runs_or_with_a_syntax_error_is_refused(tmp_path):
    """Today `runs = []` writes an empty results file and exits 0."""
    empty = tmp_path / 'empty.py'
    empty.write_text("protocol = 'p'\nruns = []\n")
    message = user_error('run_protocol', [empty, '--out', tmp_path / 'out'])
    assert f'{empty}: runs = []; expected a list of at least one run' in message
    assert not list(tmp_path.rglob('*.jsonl'))
    broken = tmp_path / 'broken.py'
    broken.write_text("protocol = 'p'\nruns = [dict(method='A',\n")
    assert f'{broken}: line ' in user_error('run_protocol', [broken, '--dry-run'])


def test_make_text_features_refuses_an_out_name_numpy_would_change(tmp_path):
    """Today `--out x.txt` writes x.txt.npy and prints x.txt."""
    message = user_error('make_text_features', ['--taxonomy', tmp_path / 't.json',
                                                '--state-descriptions', tmp_path / 's.json',
                                                '--out', tmp_path / 'x.txt'])
    assert 'x.txt: expected a file name ending in .npy' in message
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize('argv,expected', [
    (['--sizes', '0x3x48'], "'0x3x48': B, T and N must be >= 1"),
    (['--sizes', '4x3x48', '4x3'], "'4x3': expected BxTxN"),
    (['--device', 'banana'], "--device 'banana' is not a torch device; expected cpu, cuda"),
])
def test_benchmark_dvl_refuses_bad_sizes_and_devices_before_running(argv, expected):
    """Today these exit 0 with errors inside the table cells."""
    message = user_error('benchmark_dvl', argv + ['--repeats', '1'])
    assert expected in message, message


def test_benchmark_dvl_refuses_zero_threads_and_cuda_without_a_gpu(capsys):
    assert 'argument --threads' in argparse_error('benchmark_dvl', ['--threads', '0'], capsys)
    import torch
    if not torch.cuda.is_available():
        assert "--device 'cuda': this machine has 0 CUDA device(s)" in user_error(
            'benchmark_dvl', ['--device', 'cuda'])


def test_llm_eval_refuses_cfg_options_it_does_not_read(tmp_path):
    """Today `--cfg-options model.prompt_set=foo` (a typo of --prompt-set) is ignored."""
    message = user_error('llm_eval', ['--config', REPO / 'configs/vpn_niv_t3.py', '--base-url',
                                      'http://127.0.0.1:9/v1', '--model', 'm', '--out',
                                      tmp_path / 'llm.jsonl', '--cfg-options',
                                      'model.prompt_set=foo'])
    assert "--cfg-options model.prompt_set: llm_eval reads only the config's train_dataloader" \
        in message, message
    assert not (tmp_path / 'llm.jsonl').exists()


@pytest.mark.parametrize('value', ['abc', -5, 0, 2.5])
def test_train_refuses_a_loop_count_of_the_wrong_type(tmp_path, value, monkeypatch):
    """Today `train_cfg.max_epochs=abc` ends in a TypeError deep in mmengine, 0 trains nothing."""
    monkeypatch.setenv('LOCAL_RANK', '0')
    message = user_error('train', [REPO / 'configs/vpn_niv_t3.py', '--work-dir', tmp_path / 'w',
                                   '--cfg-options', f'train_cfg.max_epochs={value}'])
    assert f"train_cfg.max_epochs={value!r}; expected an integer >= 1" in message, message


def test_train_refuses_a_config_without_training_and_synthetic_seed_is_checked(tmp_path,
                                                                              capsys):
    """Today configs/llm/llm_crosstask_t3.py (train_dataloader = None) ends in a TypeError."""
    message = user_error('train', [REPO / 'configs/llm/llm_crosstask_t3.py', '--work-dir',
                                   tmp_path / 'w'])
    assert 'train_dataloader / train_cfg = None' in message and 'tools/test.py' in message
    assert 'argument --seed' in argparse_error('make_synthetic_features', [
        '--dataset', 'niv', '--out', tmp_path / 'f', '--seed', '-1'], capsys)


def test_a_full_disk_leaves_no_truncated_per_sample_or_outcomes_file(tmp_path, monkeypatch):
    """Today a full disk left 0-byte or truncated per_sample.json / llm outcomes files and a
    bare errno: now the path is named and nothing is left there."""
    import errno
    import os
    from vpn_plugin.baselines.llm.evaluate import write_outcomes
    from vpn_plugin.errors import OutputWriteError
    from vpn_plugin.evaluation import PlanningMetric
    original = Path.write_text

    def disk_fills_up(self, text, *args, **kwargs):
        original(self, text[:len(text) // 2], *args, **kwargs)  # half reaches the disk
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))

    monkeypatch.setattr(Path, 'write_text', disk_fills_up)
    out = tmp_path / 'test' / 'per_sample.json'
    metric = PlanningMetric(out_file=str(out))
    metric.process(None, [dict(pred_plan=[0, 1], gt_plan=[0, 1], sample_idx=0)])
    with pytest.raises(OutputWriteError, match=rf'cannot write the per-sample scores {out}: '
                                               'No space left on device; nothing was written'):
        metric.compute_metrics(metric.results)
    with pytest.raises(OutputWriteError, match='LLM outcomes'):
        write_outcomes(tmp_path / 'outcomes.jsonl', [], [], {'model': 'm'})
    assert [p for p in tmp_path.rglob('*') if p.is_file()] == []


@pytest.mark.parametrize('value', ["__import__('os').system('touch PWNED')",
                                   'eval("1+1")', 'lambda: 3', "().__class__"])
def test_code_in_cfg_options_never_runs_and_is_named(tmp_path, value, monkeypatch):
    """It never ran (mmengine reads literals); today it ended in an unrelated TypeError."""
    monkeypatch.chdir(tmp_path)
    message = user_error('test', [REPO / 'configs/vpn_niv_t3.py', '--cfg-options',
                                  f'model.dropout={value}'])
    assert 'model.dropout=' in message and 'looks like Python code' in message, message
    assert not (tmp_path / 'PWNED').exists()


def test_paths_and_names_in_cfg_options_are_not_code():
    from vpn_plugin.data_paths import looks_like_code
    for value in ('work_dirs/a/epoch_2.pth', 'ViterbiPlanNet (ours)', 'mean3', '../shared/data',
                  'open-vocabulary', 'a.b.c', 1.5, [1, 2]):
        assert not looks_like_code(value), value


@pytest.mark.parametrize('damage', ['truncated', 'object array'])
def test_check_reference_names_a_truncated_or_object_npz(tmp_path, damage):
    """Today numpy's / zipfile's text without the file."""
    import numpy as np
    fixture = tmp_path / 'pdpp_fixture'
    fixture.mkdir()
    meta = dict(method='PDPP', num_actions=2, num_tasks=1, horizon=3, observation_dim=4,
                batch=1, n_timesteps=10, ddim_timesteps=2, eta=0.0, num_parameters_unet=0,
                num_parameters_head=0, constructor={})
    (fixture / 'meta.json').write_text(json.dumps(meta))
    if damage == 'truncated':
        np.savez(fixture / 'inputs.npz', actions=np.zeros((1, 3), np.int64))
        data = (fixture / 'inputs.npz').read_bytes()
        (fixture / 'inputs.npz').write_bytes(data[:len(data) // 2])
    else:
        np.savez(fixture / 'inputs.npz', actions=np.array([None, 1], dtype=object))
    message = user_error('check_reference', [fixture])
    assert f'{fixture / "inputs.npz"}: cannot read the recorded arrays' in message, message


@pytest.mark.parametrize('files, check', [
    (('windows.json', 'expected.npz', 'taxonomy.json'),
     'python {repo}/tools/check_authors_loader.py {folder}'),
    (('expected_frames_features.npy', 'plain_array.npy'),
     'python {repo}/tools/convert_features.py --src {folder}'),
    (('sequence_completion.txt', 'README.md'),
     'cd {repo} && python -m pytest tests/test_llm_prompting.py -k paper')])
def test_check_reference_points_a_non_fixture_folder_to_its_check(tmp_path, monkeypatch, files,
                                                                  check):
    """Issue 34: authors_loader_small, feature_layouts and paper_prompts of ../shared/reference
    have no meta.json; the message names the check that fits each (runnable from anywhere)."""
    folder = tmp_path / 'reference_folder'
    folder.mkdir()
    for name in files:
        (folder / name).write_text('')
    monkeypatch.chdir(tmp_path)
    message = user_error('check_reference', [str(folder)])
    assert 'no meta.json, so not a model fixture' in message
    assert check.format(repo=REPO, folder=folder) in message


def test_mmaction_own_tools_end_on_bad_input_as_ours_do(tmp_path):
    """Issue 34: MMAction2's tools/train.py (what `mim train mmaction` runs) with a config of
    ours and a wrong data_root: one message naming the file, exit status 1, no traceback."""
    import os
    import subprocess
    import sys
    import mmaction
    from vpn_plugin.errors import is_mmaction_tool
    tool = Path(mmaction.__file__).parent / '.mim' / 'tools' / 'train.py'
    assert is_mmaction_tool(tool) and not is_mmaction_tool(REPO / 'tools' / 'train.py')
    env = {**os.environ, 'PYTHONPATH': str(REPO)}
    env.pop('VPN_TRACEBACK', None)
    result = subprocess.run([sys.executable, str(tool), str(REPO / 'configs/vpn_niv_t3.py'),
                             '--work-dir', str(tmp_path / 'work'), '--cfg-options',
                             f'data_root={tmp_path / "nowhere"}'],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert result.stderr.startswith(f'error: taxonomy {tmp_path}/nowhere/niv/taxonomy.json does '
                                    'not exist')
    assert 'Traceback' not in result.stderr
