"""Nineteenth hostile pass, passT (training, testing, resuming; start commit 84e3204): each test
fails on 84e3204 where it names a case of /tmp/passT_log.md, or guards a valid input."""
import pytest

from vpn_plugin.data_paths import REPO_ROOT, load_config, resolve_paths

VPN_T3 = REPO_ROOT / 'configs' / 'vpn_crosstask_t3.py'
SPLITS = ('train', 'val', 'test')


def literal_config(tmp_path, **variables):
    """A child of vpn_crosstask_t3.py giving ``variables`` (data_root, ...) as absolute
    literals, as a user's own config does."""
    config = tmp_path / 'mine.py'
    config.write_text(f"_base_ = [{str(VPN_T3)!r}]\n"
                      + ''.join(f'{name} = {str(value)!r}\n' for name, value in variables.items()))
    return config


def dataset_values(cfg, key):
    return {cfg[f'{split}_dataloader'].dataset[key] for split in SPLITS}


@pytest.mark.parametrize('flag', ['data_root', 'feature_dir'])
def test_a_location_below_the_configs_own_is_moved_once(tmp_path, flag):
    """passT H05, H06: --data-root ROOT/sub (--feature-dir FEATURES/sub), a folder inside the
    config's literal location, was moved again by each of resolve_paths' calls: the test read
    ROOT/sub/sub/sub/crosstask and refused a valid data root naming a path nobody gave."""
    config = literal_config(tmp_path, data_root=tmp_path / 'root', feature_dir=tmp_path / 'feats')
    below = tmp_path / ('root' if flag == 'data_root' else 'feats') / 'sub'
    cfg = load_config(config, **{flag: str(below)})
    expected = str(below / 'crosstask') if flag == 'data_root' else str(below)
    assert dataset_values(cfg, flag) == {expected}
    if flag == 'data_root':
        assert cfg.model.text_embeddings.file.startswith(str(below / 'crosstask') + '/')
    resolve_paths(cfg)  # PlanningRunner.from_cfg resolves the loaded config again
    assert dataset_values(cfg, flag) == {expected}
    by_option = load_config(config, {flag: str(below)})
    assert dataset_values(by_option, flag) == {expected}


def test_a_location_moved_elsewhere_or_up_still_moves():
    """Guards of the rule above: a root beside or above the config's moves as before."""
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory() as folder:
        tmp_path = Path(folder)
        config = literal_config(tmp_path, data_root=tmp_path / 'a' / 'root')
        for root in (tmp_path / 'b', tmp_path / 'a', tmp_path / 'a' / 'root2'):
            cfg = resolve_paths(load_config(config, data_root=str(root)))
            assert dataset_values(cfg, 'data_root') == {str(root / 'crosstask')}


def test_a_data_root_whose_dataset_folder_is_a_link_is_accepted(tmp_path):
    """passT H07: --data-root ROOT where ROOT/crosstask is a symbolic link to the data (the
    usual data/crosstask -> /big/disk layout) was refused as "not built from the variable
    data_root" (the link's target compared with the root's)."""
    (tmp_path / 'disk' / 'crosstask').mkdir(parents=True)
    (tmp_path / 'root').mkdir()
    (tmp_path / 'root' / 'crosstask').symlink_to(tmp_path / 'disk' / 'crosstask')
    config = literal_config(tmp_path, data_root=tmp_path / 'elsewhere')
    cfg = load_config(config, data_root=str(tmp_path / 'root'))
    assert dataset_values(cfg, 'data_root') == {str(tmp_path / 'root' / 'crosstask')}
    fixed = tmp_path / 'fixed.py'  # a dataset kept at an absolute path of its own is refused
    fixed.write_text(f"_base_ = [{str(config)!r}]\n" + ''.join(
        f"{split}_dataloader = dict(dataset=dict(data_root={str(tmp_path / 'disk')!r}))\n"
        for split in SPLITS))
    with pytest.raises(ValueError, match=r"train_dataloader.dataset.data_root='.*/disk' is not "
                                         "built from the variable data_root"):
        load_config(fixed, data_root=str(tmp_path / 'root'))


def _resume_records(work_dir, caplog) -> tuple:
    """(the checkpoint ``latest_checkpoint_in`` resumes ``work_dir`` from, its warnings)."""
    import logging
    from vpn_plugin.engine.checkpoint import latest_checkpoint_in
    logger = logging.getLogger('passT22_resume')
    with caplog.at_level(logging.WARNING, logger='passT22_resume'):
        found = latest_checkpoint_in(work_dir, logger=logger)
    return found, [r.getMessage() for r in caplog.records if r.name == 'passT22_resume']


@pytest.mark.parametrize('absolute', [False, True])
def test_a_work_dir_of_links_to_another_runs_checkpoints_resumes_without_a_caveat(
        tmp_path, caplog, absolute):
    """passT H08/H09: a work dir made of symbolic links to another run's checkpoints (cp -s,
    ln -s), whose last_checkpoint names its own epoch_2.pth, logged "names .../epoch_2.pth,
    outside the work dir (copied or moved from another run): using .../epoch_2.pth" (the
    link's target was compared); the resume was bit-identical."""
    import os
    other, work_dir = tmp_path / 'R', tmp_path / 'linked'
    other.mkdir()
    work_dir.mkdir()
    (other / 'epoch_2.pth').write_bytes(b'x')
    (work_dir / 'epoch_2.pth').symlink_to(other / 'epoch_2.pth')
    (work_dir / 'last_checkpoint').write_text(
        str(work_dir / 'epoch_2.pth') if absolute else 'epoch_2.pth')
    found, warnings = _resume_records(work_dir, caplog)
    assert found == str(work_dir / 'epoch_2.pth') and warnings == []
    assert os.path.samefile(found, other / 'epoch_2.pth')


def test_a_checkpoint_under_a_linked_folder_stays_outside(tmp_path, caplog):
    """Guard: a record naming a file under a folder of the work dir that is a link to another
    run's folder lies outside (the run would write and delete there): still named, and the
    work dir's own file of that name is used."""
    other, work_dir = tmp_path / 'R', tmp_path / 'copy'
    other.mkdir()
    work_dir.mkdir()
    (other / 'epoch_2.pth').write_bytes(b'x')
    (work_dir / 'epoch_2.pth').write_bytes(b'x')
    (work_dir / 'old').symlink_to(other)
    (work_dir / 'last_checkpoint').write_text(str(work_dir / 'old' / 'epoch_2.pth'))
    found, warnings = _resume_records(work_dir, caplog)
    assert found == str(work_dir / 'epoch_2.pth')
    assert len(warnings) == 1 and 'outside the work dir' in warnings[0]


def test_the_endpoint_mlp_names_a_feature_dim_unlike_its_observations():
    """passT H02: PKG beam search with the EndpointMLP step model, trained with the config's
    model.feature_dim=1536 on 512-d 'mean3' observations, stopped at the first step with
    "RuntimeError: mat1 and mat2 shapes cannot be multiplied (8x1024 and 3072x256)"."""
    import torch
    import vpn_plugin.mm  # noqa: F401  (registration)
    from mmaction.registry import MODELS
    model = MODELS.build(dict(type='EndpointMLP', feature_dim=1536, num_actions=5))
    inputs = dict(start=torch.zeros(2, 512), goal=torch.zeros(2, 512))
    with pytest.raises(ValueError, match=r"EndpointMLP: observation dim 512 does not match "
                                         r"model.feature_dim=1536 .*'mean3': 512"):
        model.endpoint_scores(inputs)
    fitting = MODELS.build(dict(type='EndpointMLP', feature_dim=512, num_actions=5))
    assert fitting.endpoint_scores(inputs).shape == (2, 2, 5)  # guard: the right dim runs


class _Graph:
    """A module holding a PKG buffer (N, N) as planners do (built lazily: torch imported)."""

    @staticmethod
    def build(num_actions: int = 133):
        import torch
        module = torch.nn.Module()
        module.register_buffer('log_transitions', torch.zeros(num_actions, num_actions))
        return module

    @staticmethod
    def log_probabilities(num_actions: int = 133, seed: int = 0):
        import torch
        generator = torch.Generator().manual_seed(seed)
        probabilities = torch.rand(num_actions, num_actions, generator=generator) ** 4
        probabilities[3] = 0.0  # a row without outgoing edge stays all -inf
        sums = probabilities.sum(1, keepdim=True)
        return torch.where(sums > 0, probabilities / sums.clamp(min=1e-30), probabilities).log()


def test_a_bfloat16_checkpoints_graph_is_renormalised_and_said(caplog):
    """passT K4: a checkpoint with every tensor stored as bfloat16 (a converted file) was
    warned "the model runs with their rounded values", then refused at the first batch:
    "log_transitions row 0 has probabilities summing to 1.00176" (float32's tolerance applied
    to bfloat16-rounded rows). Its rows are renormalised in float32, and the note says so."""
    import torch
    from vpn_plugin.core.viterbi import check_rows_normalised
    from vpn_plugin.engine.checkpoint import load_weights, reduced_precision_note
    stored = _Graph.log_probabilities().to(torch.bfloat16)
    model = _Graph.build()
    load_weights(model, {'state_dict': {'log_transitions': stored}}, 'bf16.pth')
    check_rows_normalised(model.log_transitions)  # raised: decoding refused the graph
    assert torch.isneginf(model.log_transitions[3]).all()
    assert torch.allclose(model.log_transitions.exp(), stored.float().exp(), atol=2e-2)
    note = reduced_precision_note({'log_transitions': stored}, model.state_dict())
    assert 'stored in torch.bfloat16' in note and 'PKG row(s) the rounding left summing to ' \
        'other than 1 are renormalised' in note


@pytest.mark.parametrize('dtype', ['float32', 'float64', 'float16'])
def test_a_graph_whose_rows_fit_is_loaded_as_stored(dtype):
    """Guard: a graph stored as float32 or float64 loads value for value, and a float16 one
    whose rounded rows stay within float32's tolerance is not renormalised (its note names no
    renormalisation)."""
    import torch
    from vpn_plugin.engine.checkpoint import load_weights, reduced_precision_note
    stored = _Graph.log_probabilities(num_actions=8).to(getattr(torch, dtype))
    model = _Graph.build(8)
    load_weights(model, {'state_dict': {'log_transitions': stored}}, f'{dtype}.pth')
    assert torch.equal(model.log_transitions, stored.to(torch.float32))
    assert 'renormalised' not in reduced_precision_note({'log_transitions': stored},
                                                        model.state_dict())


def test_a_record_behind_a_later_checkpoint_says_it_is_replaced(tmp_path, caplog):
    """passT H49: last_checkpoint edited back to epoch_2.pth while the work dir held
    epoch_3.pth: the resume trained epoch 3 again and replaced epoch_3.pth without a word."""
    work_dir = tmp_path / 'run'
    work_dir.mkdir()
    for name in ('epoch_1.pth', 'epoch_2.pth', 'epoch_3.pth'):
        (work_dir / name).write_bytes(b'x')
    (work_dir / 'last_checkpoint').write_text('epoch_2.pth')
    found, warnings = _resume_records(work_dir, caplog)
    assert found == str(work_dir / 'epoch_2.pth')
    assert len(warnings) == 1 and 'the work dir holds the later epoch_3.pth: the run ' \
        'continues from epoch_2.pth, so the later epochs are trained again' in warnings[0]
    (work_dir / 'last_checkpoint').write_text('epoch_3.pth')  # guard: the newest says nothing
    caplog.clear()
    assert _resume_records(work_dir, caplog) == (str(work_dir / 'epoch_3.pth'), [])


@pytest.mark.parametrize('name', ['p.PKL', 'p.Pickle', 'p.pkl'])
def test_the_predictions_dump_takes_its_suffix_in_any_case(tmp_path, name):
    """passT H70: test.py --out p.PKL passed the tool's own check (suffixes compared without
    case, outputs.has_suffix) and was then refused by mmengine's DumpResults: "The output file
    must be a pkl file." (no flag, no file)."""
    import pickle
    import vpn_plugin.mm  # noqa: F401  (registration)
    from mmaction.registry import METRICS
    dump = METRICS.build(dict(type='AtomicDumpResults', out_file_path=str(tmp_path / name)))
    dump.compute_metrics([{'pred_plan': [1, 2, 3]}])
    assert pickle.loads((tmp_path / name).read_bytes()) == [{'pred_plan': [1, 2, 3]}]
    with pytest.raises(ValueError, match=r"--out .*p\.txt: expected a file name ending in "
                                         r"\.pkl or \.pickle"):
        METRICS.build(dict(type='AtomicDumpResults', out_file_path=str(tmp_path / 'p.txt')))


def test_checkpoints_named_by_the_configs_template_are_resumed_from(tmp_path, caplog):
    """passT P3b: a run with default_hooks.checkpoint.filename_tmpl='ckpt_{}.pth' whose
    last_checkpoint record was lost: --resume said "holds no checkpoint to resume from ... (no
    epoch checkpoint was saved ...)" beside ckpt_1.pth and ckpt_2.pth."""
    from vpn_plugin.engine.checkpoint import (checkpoint_template, latest_checkpoint_in,
                                              newest_checkpoint_in)
    from mmengine.config import Config
    cfg = Config(dict(default_hooks=dict(checkpoint=dict(filename_tmpl='ckpt_{}.pth'))))
    template = checkpoint_template(cfg)
    work_dir = tmp_path / 'run'
    work_dir.mkdir()
    for name in ('ckpt_1.pth', 'ckpt_2.pth', 'ckpt_10.pth', 'best_acc_ckpt_11.pth', 'x.pth'):
        (work_dir / name).write_bytes(b'x')
    assert template == 'ckpt_{}.pth'
    assert newest_checkpoint_in(work_dir, template) == str(work_dir / 'ckpt_10.pth')
    assert newest_checkpoint_in(work_dir) is None  # mmengine's default names only
    assert latest_checkpoint_in(work_dir, logger='silent', template=template) == \
        str(work_dir / 'ckpt_10.pth')
    (work_dir / 'epoch_3.pth').write_bytes(b'x')  # guard: default names still found
    assert newest_checkpoint_in(work_dir) == str(work_dir / 'epoch_3.pth')
    assert checkpoint_template(Config(dict())) is None
