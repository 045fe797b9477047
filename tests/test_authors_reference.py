"""ViterbiPlanNet against the authors' recorded outputs (../shared/reference/authors_*)."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch

import vpn_plugin.mm  # noqa: F401  (registration)
from mmaction.registry import MODELS
from vpn_plugin.data_paths import load_config
from mmengine.runner import load_checkpoint
from oracle_fixtures import predict_fixture
from reference_fixtures import copy_fixture, reference_dir
from tool_modules import load_tool

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope='module')
def fixture_dir() -> Path:
    return reference_dir('authors_crosstask_t3')


pytestmark = pytest.mark.usefixtures('single_thread')


def test_reference_fixture_passes(fixture_dir, capsys):
    assert load_tool('check_authors_reference').main([str(fixture_dir)]) == 0
    report = capsys.readouterr().out
    assert 'parameters: 5,549,602 (authors: 5,549,602) ok' in report
    assert 'outputs.npz:soft_plan_second_dvl' in report
    assert 'grads.npz:task_decoder.3.bias' in report
    assert report.rstrip().endswith('PASS')


def test_one_perturbed_weight_fails(fixture_dir, tmp_path, capsys):
    copy = copy_fixture(fixture_dir, tmp_path)
    with np.load(copy / 'authors_state_dict.npz') as loaded:
        weights = {k: loaded[k].copy() for k in loaded.files}
    weights['viterbi_plan.projection_mlp.3.bias'][5] += np.float16(0.5)
    np.savez(copy / 'authors_state_dict.npz', **weights)
    assert load_tool('check_authors_reference').main([str(copy)]) == 1
    failed = [line for line in capsys.readouterr().out.splitlines() if line.endswith('FAIL')]
    assert any('dvl_log_emissions' in line for line in failed)
    assert not any('task_logits' in line for line in failed)  # the task head is untouched


def test_unknown_meta_field_is_a_clear_error(fixture_dir, tmp_path):
    copy = copy_fixture(fixture_dir, tmp_path)
    meta = json.loads((copy / 'meta.json').read_text())
    (copy / 'meta.json').write_text(json.dumps({**meta, 'temperature': 0.5}))
    with pytest.raises(SystemExit, match="^error: .*unknown fields \\['temperature'\\]"):
        load_tool('check_authors_reference').main([str(copy)])


def test_converted_checkpoint_predicts_the_authors_plans(fixture_dir, tmp_path):
    """convert_authors_checkpoint -> a checkpoint that the config's model loads and that
    predicts the fixture's soft plan and hard-Viterbi plan."""
    config = REPO / 'configs/vpn_crosstask_t3.py'
    dst = tmp_path / 'converted.pth'
    assert load_tool('convert_authors_checkpoint').main([
        str(fixture_dir / 'authors_state_dict.npz'), str(dst), '--config', str(config),
        '--pkg', str(fixture_dir / 'inputs.npz')]) == 0
    model_cfg = load_config(str(config)).model
    model_cfg.text_embeddings, model_cfg.loss_weights = None, dict(state=0.0)
    model = MODELS.build(model_cfg)
    load_checkpoint(model, str(dst), map_location='cpu', strict=True)
    samples, outputs = predict_fixture(model, fixture_dir)
    soft = torch.stack([s.soft_plan for s in samples]).numpy()
    np.testing.assert_allclose(soft, outputs['soft_plan'], rtol=0, atol=1e-6)
    plans = torch.stack([s.pred_plan for s in samples]).numpy()
    np.testing.assert_array_equal(plans, outputs['viterbi_plan'])


def test_authors_pth_reads_like_the_npz(fixture_dir, tmp_path):
    """A state dict saved by their code (torch.save(model.state_dict())) reads with
    weights_only=True into the same tensors as the fixture's .npz; pickled code is refused."""
    from vpn_plugin.oracles.authors import read_authors_state_dict
    from_npz = read_authors_state_dict(fixture_dir / 'authors_state_dict.npz')
    torch.save({k: v.half() for k, v in from_npz.items()}, tmp_path / 'theirs.pth')
    from_pth = read_authors_state_dict(tmp_path / 'theirs.pth')
    assert from_pth.keys() == from_npz.keys()
    assert all(torch.equal(from_pth[k], from_npz[k]) for k in from_npz)
    torch.save({'weights': SystemExit}, tmp_path / 'code.pth')
    with pytest.raises(ValueError, match=r'code.pth: .*pickles the global\(s\) '
                                         r'exceptions.SystemExit, refused'):
        read_authors_state_dict(tmp_path / 'code.pth')


def test_check_reference_dispatches_to_the_authors_checker(fixture_dir, tmp_path, capsys):
    """tools/check_reference.py: a fixture without ``method`` is the authors'; an unknown
    method is a clear error (one message, exit status 1) naming the known ones."""
    assert load_tool('check_reference').main([str(fixture_dir)]) == 0
    report = capsys.readouterr().out
    assert '\nPASS\n' in report
    assert report.rstrip().endswith('sensitivity: no tolerance was widened (every row at its '
                                    'base tolerance): nothing to show')
    copy = copy_fixture(fixture_dir, tmp_path)
    meta = json.loads((copy / 'meta.json').read_text())
    (copy / 'meta.json').write_text(json.dumps({**meta, 'method': 'P3IV'}))
    with pytest.raises(SystemExit, match=r"^error: .*method='P3IV' has no checker"):
        load_tool('check_reference').main([str(copy)])
