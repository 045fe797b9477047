"""Session 16, issue 37: NOTICED items of the hostile pass (passV/L/T/M/P), fixed by fixNoticed.
Each test fails on 3ce84f9; the guards beside them keep valid inputs accepted."""
import os
import subprocess
from pathlib import Path

import pytest

from tool_modules import load_tool

ROOT = Path(__file__).resolve().parents[1]
T3 = ROOT / 'docs' / 'results_data' / 'main_t3_crosstask.jsonl'


def refusal(tool: str, argv: list) -> str:
    """The one-line message a tool ends with (``SystemExit``), as the user reads it."""
    with pytest.raises(SystemExit) as ended:
        load_tool(tool).main(argv)
    return str(ended.value.code)


# ---------------------------------------------- 1: plots --methods X X, as report refuses it
def test_plots_refuses_a_method_given_twice_as_report_does(tmp_path):
    """Before: plots drew the figure (report.py refused the same --methods)."""
    message = refusal('plots', ['params', str(T3), '--methods', 'Base Model', 'Base Model',
                                '--horizon', '3', '--out', str(tmp_path / 'f')])
    assert ("error: --methods: 'Base Model' given twice; a figure draws each method once "
            '(give each once)') in message
    assert not list(tmp_path.iterdir())
    table = refusal('report', [str(T3), '--methods', 'Base Model', 'Base Model'])
    assert ("error: --methods: 'Base Model' given twice; the table would show it twice "
            '(give each once)') in table


def test_plots_methods_given_once_go_on_to_the_results(tmp_path):
    """Guard: distinct --methods pass the check (the next refusal is the missing file's)."""
    message = refusal('plots', ['params', str(tmp_path / 'none.jsonl'), '--methods',
                                'Base Model', 'ViterbiPlanNet', '--out', str(tmp_path / 'f')])
    assert 'none.jsonl' in message and 'given twice' not in message, message


# ---------------------------------------------------- 2: run_protocol interrupted by Ctrl-C
def one_unit_protocol(tmp_path) -> Path:
    """A protocol of one untrained unit (the uniform baseline on NIV, seed 0)."""
    protocol = tmp_path / 'p.py'
    protocol.write_text("protocol = 'p'\ndataset = 'niv'\nseeds = [0]\nruns = [dict(method='U', "
                        f"config='{ROOT}/configs/baselines/uniform_emissions_{{dataset}}_t3.py',"
                        " train=False)]\n")
    return protocol


def test_run_protocol_ctrl_c_ends_in_one_line_saying_how_to_resume(tmp_path, monkeypatch,
                                                                     capsys):
    """Before: Python's KeyboardInterrupt traceback (exit 1 by Python's own handler)."""
    from vpn_plugin.protocol.runner import ProtocolRunner
    protocol = one_unit_protocol(tmp_path)

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(ProtocolRunner, 'run', interrupted)
    try:
        with pytest.raises(SystemExit) as ended:
            load_tool('run_protocol').main([str(protocol), '--out', str(tmp_path / 'runs'),
                                            '--smoke'])
    except KeyboardInterrupt:  # as pytest's own Ctrl-C it would stop the session
        pytest.fail('the raw KeyboardInterrupt reached Python (its traceback)')
    assert ended.value.code == 130
    err = capsys.readouterr().err
    assert err.startswith('interrupted (Ctrl-C): the rows of the finished units are kept in '
                          f'{tmp_path}/runs/p/results_smoke.jsonl'), err
    assert 'run the same command again to resume' in err and 'Traceback' not in err


# ------------------------------------------ 3: model_stats names the --cfg-options it applied
def test_model_stats_names_the_options_its_counts_are_of(capsys):
    """Before: 'configs/...py: UniformEmissionPlanner, ...' as if the config were counted as
    it is."""
    config = 'configs/baselines/uniform_emissions_niv_t3.py'
    load_tool('model_stats').main([str(ROOT / config), '--cfg-options', 'horizon=4'])
    assert f'{ROOT / config} with --cfg-options horizon=4: UniformEmissionPlanner' in (
        capsys.readouterr().out)
    load_tool('model_stats').main([str(ROOT / config)])  # guard: no options, none named
    assert f'{ROOT / config}: UniformEmissionPlanner' in capsys.readouterr().out


# ------------------------------------------------------ 4: llm_eval --cache-dir '~/x' quoted
def test_reply_cache_expands_a_quoted_home(tmp_path, monkeypatch):
    """Before: --cache-dir '~/x' made a folder named '~' in the current folder (config paths
    and --model expand it)."""
    from vpn_plugin.baselines.llm.backends import ResponseCache
    monkeypatch.setenv('HOME', str(tmp_path / 'home'))
    monkeypatch.chdir(tmp_path)
    cache = ResponseCache('~/x')
    assert cache.root == tmp_path / 'home' / 'x' and (tmp_path / 'home' / 'x').is_dir()
    assert not (tmp_path / '~').exists()
    assert ResponseCache('plain').root == Path('plain')  # guard: a relative path stays so


# --------------------------------------------- 5: slurm_train.sh (slurm_extract.sh) GPUS count
def _slurm_extract(tmp_path, **variables):
    """slurm_extract.sh against a fake sinfo (one partition 'debug', 8 GPUs a node) and a fake
    srun that prints what it was given."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / 'sinfo').write_text('#!/bin/sh\ncase "$*" in *%G*) echo gpu:8 ;; *) echo debug ;; '
                                   'esac\n')
    (bin_dir / 'srun').write_text('#!/bin/sh\necho "srun $*"\n')
    for tool in ('sinfo', 'srun'):
        (bin_dir / tool).chmod(0o755)
    env = {**os.environ, 'PATH': f'{bin_dir}:{os.environ["PATH"]}', **variables}
    return subprocess.run(['bash', str(ROOT / 'tools/slurm_extract.sh'), 'debug', 'job',
                           'clip.mp4', '--out', 'o'], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=60)


@pytest.mark.parametrize('name,value', [('GPUS', '0'), ('GPUS', '1_6'), ('GPUS', 'abc'),
                                        ('CPUS_PER_TASK', '0')])
def test_slurm_scripts_refuse_a_bad_count_before_srun(tmp_path, name, value):
    """Before: srun --ntasks=0 / 1_6 was submitted (dist_train.sh refuses such an NPROC)."""
    refused = _slurm_extract(tmp_path, **{name: value})
    assert refused.returncode == 2 and 'srun' not in refused.stdout, refused
    assert f'error: {name}={value}: expected an integer >= 1' in refused.stderr


def test_slurm_and_dist_scripts_still_take_good_counts(tmp_path):
    """Guards: GPUS=16 reaches srun as 16 tasks; dist_train.sh's own check (now shared) still
    refuses NPROC=0."""
    ran = _slurm_extract(tmp_path, GPUS='16', GPUS_PER_NODE='8')
    assert ran.returncode == 0 and '--ntasks=16 ' in ran.stdout, ran
    zero = subprocess.run(['bash', str(ROOT / 'tools/dist_train.sh'), 'c.py', '0'],
                          capture_output=True, text=True, timeout=60)
    assert zero.returncode == 2 and 'error: NPROC=0: expected an integer >= 1' in zero.stderr


# ------------------------------------ 6: extract_features refuses a name clash before loading
def _two_videos(tmp_path, second: str) -> list:
    for name in ('a/a.mp4', second):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b'not decoded: refused or stopped before')
    return [str(tmp_path / 'a'), str(tmp_path / Path(second).parent)]


def test_extract_refuses_two_videos_of_one_name_before_loading_the_weights(tmp_path,
                                                                            monkeypatch):
    """Before: the S3D weights were loaded (minutes on a cluster's shared disk) and only then
    'a/a.mp4 and b/a.mp4 would both write a.npz'."""
    import vpn_plugin.apis.video as video_api
    loaded = []

    def load(*args, **kwargs):  # stands for the S3D weights' loading
        loaded.append(args)
        raise ValueError('weights loaded')
    monkeypatch.setattr(video_api, 'load_s3d_for_tool', load)
    message = refusal('extract_features', _two_videos(tmp_path, 'b/a.mp4')
                      + ['--out', str(tmp_path / 'out'), '--random-weights'])
    assert 'would both write a.npz' in message and not loaded, message
    assert not (tmp_path / 'out').exists()
    # guard: distinct names (or --naming parent_stem) go on to the weights
    for names, naming in (('c/c.mp4', 'stem'), ('b/a.mp4', 'parent_stem')):
        message = refusal('extract_features', _two_videos(tmp_path / naming, names)
                          + ['--out', str(tmp_path / 'out2'), '--random-weights',
                             '--naming', naming])
        assert 'weights loaded' in message, message


# ------------------------------------- 7: the official comparison's user text in its Markdown
def test_official_comparison_writes_its_changes_and_settings_as_text(monkeypatch):
    """Before: comparison.md wrote the changes raw: ``PYTHONPATH=<copy>/src`` showed as
    ``PYTHONPATH=/src`` (GitHub hides the tag), a --out folder ``runs/_x_`` in italics. (The
    protocol status table, the other place named, is terminal text, no Markdown.)"""
    from types import SimpleNamespace
    from vpn_plugin.protocol.official import summary
    from vpn_plugin.protocol.official.framework import Change, Settings
    for name in ('loss_curves', 'loss_table', 'metric_table', 'speed_lines', 'stage_text',
                 'check_lines', 'variant_text', 'rescore_text'):
        monkeypatch.setattr(summary, name, lambda *args, **kwargs: '')
    monkeypatch.setattr(summary, 'stage_names', lambda runs: [])
    method = SimpleNamespace(label='SCHEMA', loss_names=('total',), metrics=('success_rate',))
    result = {'changes': [Change('environment', 'PYTHONPATH=<copy>/src'),
                          Change('data', 'features: runs/_x_/features (synthetic)')]}
    settings = Settings('schema', 'niv', 3, 2, [0], sizes={'batch_size': 4})
    text = load_tool('compare_official_training').report(method, result, settings)
    assert r'- [environment] PYTHONPATH=\<copy\>/src' in text.splitlines(), text
    assert r'- [data] features: runs/\_x\_/features (synthetic)' in text.splitlines()
    # guard: names as they are where nothing is markup (no needless backslash)
    assert '## SCHEMA: official training vs ours, niv T=3' in text.splitlines()
    assert '"batch_size": 4' in text


def test_run_protocol_ctrl_c_while_waiting_on_slurm_says_the_jobs_go_on(tmp_path, monkeypatch,
                                                                        capsys):
    """--launcher slurm --wait: Ctrl-C ends the wait, not the job array; said so, with the
    --status command (before: the KeyboardInterrupt traceback)."""
    from types import SimpleNamespace
    from vpn_plugin.protocol import slurm
    from vpn_plugin.protocol.runner import ProtocolRunner
    monkeypatch.setattr(ProtocolRunner, 'check_feature_files', lambda self, units: (0, []))
    protocol = one_unit_protocol(tmp_path)
    plan = SimpleNamespace(warnings=[], tasks=[SimpleNamespace(units=[0], seconds=60.0)],
                           skipped_done=0, skipped_queued=0, time_limit=600)
    monkeypatch.setattr(slurm, 'submit', lambda *args, **kwargs: (
        plan, [SimpleNamespace(job_id='4242_0')]))

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(slurm, 'wait_for', interrupted)
    try:
        with pytest.raises(SystemExit) as ended:
            load_tool('run_protocol').main([str(protocol), '--out', str(tmp_path / 'runs'),
                                            '--launcher', 'slurm', '--partition', 'gpu',
                                            '--wait'])
    except KeyboardInterrupt:
        pytest.fail('the raw KeyboardInterrupt reached Python (its traceback)')
    assert ended.value.code == 130
    err = capsys.readouterr().err
    assert ('interrupted (Ctrl-C) while waiting: job array 4242 keeps running (scancel 4242 '
            'stops it); status: ') in err and err.rstrip().endswith('--status'), err
