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
        'report': ([results], r'results.jsonl:2: field "metrics.success_rate" must be a number'),
        'plots': (['curve', results, '--x', 'level', '--out', tmp_path / 'fig'],
                  r'results.jsonl:2: field "metrics.success_rate"'),
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
    with pytest.raises(ValueError, match='must be a number'):
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
