"""Session 9, the eleventh hostile pass (issue 37's confirmation pass), engineer pass2 (PDPP,
KEPP, CEFITO through tools/train.py / tools/test.py and the Python API): one test per silent
case found and fixed (each fails at 90c6eb9, the commit the pass ran on).

- A3 / A4: a KEPP step model named by hand (``model.step_checkpoint``) trained with other
  settings than the run's step options (lr, endpoint weight, ...) was reused with one INFO line:
  the run's options changed nothing in its step model, without a word. Now a WARNING names
  each differing setting. The step model's endpoint weight (a training-only option of the step
  model) is recorded in its settings, so the run's own file of another weight is refused.
- C4: a checkpoint whose ``meta['features_folder']`` holds no fingerprint was counted as
  compared (``not_compared`` empty) though nothing was compared (features of another folder
  passed unnamed).
"""
from types import SimpleNamespace

import pytest
import torch


def fake_runner(lr=3e-4, seed=0):
    loader = SimpleNamespace(batch_size=8, batch_sampler=None)
    optim = SimpleNamespace(param_groups=[dict(lr=lr, initial_lr=lr)])
    return SimpleNamespace(train_dataloader=loader, optim_wrapper=optim, max_iters=4,
                           seed=seed)


def fake_kepp(endpoint_weight=10.0):
    return SimpleNamespace(step=SimpleNamespace(sampling_seed=0,
                                                endpoint_weight=endpoint_weight))


def test_a3_step_settings_record_the_endpoint_weight():
    from vpn_plugin.engine.kepp_training import KEPPStepModelHook
    settings = KEPPStepModelHook().settings(fake_runner(), fake_kepp(1.0))
    assert settings['endpoint_weight'] == 1.0


def test_a3_own_step_file_of_another_endpoint_weight_is_refused():
    from vpn_plugin.engine.kepp_training import recorded_settings
    from vpn_plugin.engine.pre_stage import DATA_KEYS, check_identity
    keys = DATA_KEYS + ('endpoint_weight', 'lr')
    run = dict(dataset='niv', lr=3e-4, endpoint_weight=1.0)
    for saved in (dict(lr=3e-4, endpoint_weight=10.0), dict(lr=3e-4)):  # the second: older
        with pytest.raises(ValueError, match='endpoint_weight=10.0.*endpoint_weight=1.0'):
            check_identity('kepp_step_model.pth', 'a KEPP step model',
                           dict(dataset='niv', **recorded_settings(dict(settings=saved))),
                           run, keys)
    # an older file (the official 10) in a run of the official weight is reused
    check_identity('kepp_step_model.pth', 'a KEPP step model',
                   dict(dataset='niv', **recorded_settings(dict(settings=dict(lr=3e-4)))),
                   dict(run, endpoint_weight=10.0), keys)


def test_a3_a4_named_step_file_of_other_settings_is_named(monkeypatch):
    import logging
    from vpn_plugin.engine import kepp_training
    from vpn_plugin.engine.kepp_training import KEPPStepModelHook, warn_other_settings
    logged = []  # the logger's own stream depends on which runner ran before in this process
    monkeypatch.setattr(kepp_training, 'print_log',
                        lambda message, logger=None, level=logging.INFO: logged.append(
                            (level, message)))
    run = KEPPStepModelHook(lr=1e-3).settings(fake_runner(), fake_kepp(1.0))
    saved = dict(settings=dict(run, lr=3e-4, endpoint_weight=10.0))
    lines = warn_other_settings('K0/kepp_step_model.pth', saved, run)
    assert lines == ['lr: 0.0003 in the file, 0.001 in this run',
                     'endpoint_weight: 10.0 in the file, 1.0 in this run']
    (level, said), = logged
    assert level == logging.WARNING
    assert 'K0/kepp_step_model.pth (model.step_checkpoint) was trained with other ' \
        'settings' in said and 'change nothing in its step model' in said
    # the same settings: nothing said; a file without a setting: not compared
    assert warn_other_settings('f', dict(settings=dict(run)), run) == []
    assert warn_other_settings('f', dict(settings=dict(lr=1e-3)), dict(lr=1e-3)) == []
    # a file saved before the endpoint weight was recorded: trained with the official 10
    older = {key: value for key, value in run.items() if key != 'endpoint_weight'}
    assert warn_other_settings('f', dict(settings=older), run) == [
        'endpoint_weight: 10.0 in the file, 1.0 in this run']
    assert warn_other_settings('f', dict(settings=older), dict(run, endpoint_weight=10.0)) == []


def test_c4_features_folder_without_fingerprint_is_not_compared():
    from vpn_plugin.engine.checkpoint import not_compared
    meta = dict(cfg='model = dict(type="PDPP")\n', feature_statistics=dict(mean=0, std=1),
                features_folder=dict(folder='/data/features', files=3))
    missing = not_compared(dict(meta=meta))
    assert len(missing) == 1 and 'training feature files' in missing[0]
    meta['features_folder']['digests'] = {'a.npz': 'b7cac2b0110a190e'}
    assert not_compared(dict(meta=meta)) == []
    meta['features_folder'] = dict(sources=dict(a=dict(digests={})))
    assert not_compared(dict(meta=meta)) == []


@pytest.mark.parametrize('config, options, said', [
    ('cefito_niv_t3.py', {'custom_hooks.1.max_iters': 5}, 'give max_iters or max_epochs'),
    ('pdpp_niv_t3.py', {'custom_hooks.1.max_iters': 0}, 'max_iters=0; expected an integer'),
    ('cefito_niv_t3.py', {'custom_hooks.1.max_epochs': 0}, 'max_epochs=0; expected'),
    ('pdpp_niv_t3.py', {'custom_hooks.2.interval': 0}, 'interval=0; expected'),
])
def test_g14_smoke_refuses_hook_options_a_full_run_refuses(config, options, said):
    """--smoke rewrote the pre-stage steps and EMA intervals before the options were checked:
    a config a full run refuses trained (G14: max_iters beside max_epochs; K1-K3)."""
    import vpn_plugin.mm  # noqa: F401  (registers the hooks)
    from vpn_plugin.data_paths import load_config
    from vpn_plugin.smoke import smoke_config
    cfg = load_config(f'configs/baselines/{config}', options)
    with pytest.raises(ValueError, match=f'custom_hooks.*{said}'):
        smoke_config(cfg)


def test_g14_smoke_of_the_shipped_planners_still_runs():
    import vpn_plugin.mm  # noqa: F401
    from vpn_plugin.data_paths import load_config
    from vpn_plugin.smoke import smoke_config
    for name in ('pdpp', 'kepp', 'cefito'):
        cfg = smoke_config(load_config(f'configs/baselines/{name}_niv_t3.py'))
        assert cfg.shortened


def test_d12_pre_stage_of_the_same_features_in_another_folder_is_reused():
    """A task classifier / step model trained on a feature folder is reused when the run reads
    the same files from another folder (same fingerprint: moved or copied); D12 refused it
    naming only the two paths. Another fingerprint is still refused."""
    from vpn_plugin.engine.pre_stage import DATA_KEYS, check_identity
    saved = dict(dataset='niv', feature_dir='/data/a/features', features_fingerprint='b7ca')
    check_identity('task_classifier.pth', 'a task classifier', saved,
                   dict(saved, feature_dir='/fast/copy/features'), DATA_KEYS)
    with pytest.raises(ValueError, match='features_fingerprint=b7ca.*features_fingerprint=9a5d'):
        check_identity('task_classifier.pth', 'a task classifier', saved,
                       dict(saved, feature_dir='/fast/copy/features',
                            features_fingerprint='9a5d'), DATA_KEYS)
    older = dict(dataset='niv', feature_dir='/data/a/features')  # no fingerprint recorded
    with pytest.raises(ValueError, match='feature_dir=/data/a/features'):
        check_identity('task_classifier.pth', 'a task classifier', older,
                       dict(saved, feature_dir='/fast/copy/features'), DATA_KEYS)
