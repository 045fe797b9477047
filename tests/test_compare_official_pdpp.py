"""tools/compare_official_training.py --method pdpp against a stand-in checkout."""
import pytest

from vpn_plugin.protocol.official.framework import SideRun

from official_stand_ins import pdpp_stand_in, run_tool, tool_error


def test_pdpp_against_a_stand_in(shared_data, tmp_path, monkeypatch):
    official = pdpp_stand_in(tmp_path)
    out = tmp_path / 'out'
    # both sides small: U-Net width 32 (a patch of the official script), 48-d frames
    run_tool('--method', 'pdpp', '--official-dir', official, '--epochs', 10, '--seeds', 1, 2,
             '--out', out, '--data-root', shared_data, '--size', 'batch_size=4',
             '--size', 'n_train_steps=1', '--size', 'unet_dim=32', '--frame-dim', 48)
    text = (out / 'comparison.md').read_text()
    for change in ('--epochs 10 (README, NIV: 130)', '--batch_size 4 (README, NIV: 256)',
                   'temp.py: its checkpoint path', 'one-process gloo group',
                   '--num_thread_reader 2', "[patch] main_distributed.py: the temporal U-Net's "
                   'hard-coded dim=256 set to 32 (size unet_dim; ours: model.dim=32)'):
        assert change in text, change
    assert '--unet_dim' not in text  # not a flag of the official script
    assert 'UNET = dict(dim=32, ' in (out / 'official_copy/main_distributed.py').read_text()
    assert 'UNET = dict(dim=256, ' in (official / 'main_distributed.py').read_text()
    assert '--observation_dim 144 ' in (out / 'official/seed1/classifier.command.txt').read_text()
    our_config = next((out / 'ours').rglob('pdpp_niv_t3.py')).read_text()
    assert 'feature_dim=144' in our_config and 'dim=32' in our_config
    runs = {s: SideRun.load(out / f'official/seed{s}.json') for s in (1, 2)}
    ours = SideRun.load(out / 'ours/seed1.json')
    assert runs[1].losses['total'] == pytest.approx([2 / (e + 1) + 0.1 for e in range(10)])
    assert runs[2].metrics == pytest.approx(dict(success_rate=12, mean_accuracy=24,
                                                 miou_set=36))
    assert runs[2].selected_epoch == 5 and runs[2].selected['success_rate'] == 22
    classifier = runs[1].stages['classifier']
    assert classifier['losses'] == pytest.approx([1 / (e + 1) for e in range(10)])
    assert (classifier['accuracy'], classifier['selected_accuracy'],
            classifier['selected_epoch']) == (90.0, 95.0, 2)
    assert len(runs[1].eval_seconds) == 2 and len(runs[1].train_seconds) == 10
    # ours: the same windows, its classifier's loss per epoch (1 step each), the test metrics
    assert runs[1].windows == ours.windows == dict(train=697, test=270)
    assert len(ours.stages['classifier']['losses']) == 10 and len(ours.losses['total']) == 10
    assert set(ours.metrics) == {'success_rate', 'mean_accuracy', 'miou_set'}
    assert 'pre-stage classifier' in text and 'last epoch 90.00%' in text
    # the patch went into the copy only
    assert 'VPN_PDPP_CLASSIFIER' in (out / 'official_copy/temp.py').read_text()
    assert 'torch.load("",' in (official / 'temp.py').read_text()
    assert tool_error('--method', 'pdpp', '--official-dir', official, '--epochs', 7,
                      '--out', tmp_path / 'other').endswith(
        'give a multiple of 5 so that its last epoch is tested\n(set VPN_TRACEBACK=1 for the '
        'traceback)')
