"""models.S3D against the official S3D_HowTo100M oracle fixture (../shared/reference/s3d_small):
the checker passes, a perturbed weight or TF-SAME pooling fails it; tokenisation and weight
loading (strict, official names, safe loader; where the weights come from)."""
import numpy as np
import pytest
import torch

import vpn_plugin.mm  # noqa: F401  (registration)
from vpn_plugin.oracles import s3d as checker
from vpn_plugin.oracles.compare import check_fixture, compare_file, read_npz
from reference_fixtures import reference_dir


@pytest.fixture(scope='module')
def fixture():
    return reference_dir('s3d_small')


@pytest.fixture
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_the_checker_passes_the_official_fixture(fixture, one_thread):
    rows, header_ok, meta = check_fixture(fixture)
    assert meta['method'] == 'S3D' and header_ok
    failed = [row for row in rows if not row[-1]]
    assert not failed, failed
    names = {row[0].split(':')[1] for row in rows}
    assert {'video_b_video_embedding', 'video_b_mixed_4f_tl', 'text_token_ids',
            'text_fc1_maxpool', 'text_embedding', 'chunks_frames_features'} <= names
    assert max(row[2] for row in rows) < 1e-4


def video_b_rows(model, fixture):
    inputs = read_npz(fixture / 'inputs.npz')
    values = checker.recompute(model, {'video_b_uint8': inputs['video_b_uint8']})
    return compare_file(fixture / 'outputs.npz', values, 1e-4, names=[
        'video_b_video_embedding', 'video_b_mixed_5c', 'video_b_mixed_4f_mean'])


def test_a_perturbed_weight_fails(fixture, one_thread):
    model = checker.build_s3d(fixture)
    assert all(row[-1] for row in video_b_rows(model, fixture))
    with torch.no_grad():
        model.mixed_4f.conv_b1_b.conv2.weight[0, 0, 0, 0, 0] += 0.05
    assert not all(row[-1] for row in video_b_rows(model, fixture))


def test_tensorflow_same_pooling_fails_on_odd_sizes(fixture, one_thread, monkeypatch):
    """The port pads k - s whatever the size; true TF SAME pads by the size (odd -> less)."""
    from vpn_plugin.models import s3d

    def tf_same(self, x):
        pads = []
        for size, k, s in zip(reversed(x.shape[2:]), reversed(self.kernel),
                              reversed(self.stride)):
            total = max((-(-size // s) - 1) * s + k - size, 0)
            pads += [total // 2, total - total // 2]
        return torch.nn.functional.max_pool3d(torch.nn.functional.pad(x, pads), self.kernel,
                                              self.stride)
    model = checker.build_s3d(fixture)
    monkeypatch.setattr(s3d.PortedTFMaxPool3d, 'forward', tf_same)
    assert not all(row[-1] for row in video_b_rows(model, fixture))


def make_s3d(dict_path=None):
    from mmaction.registry import MODELS
    return MODELS.build(dict(type='S3D', dict_path=dict_path)).eval()


def test_tokenisation_follows_the_official_rules(tmp_path):
    words = np.array(['open', 'door', "don't", 'Knife', 'knife', 'caf\u00e9', '2', 'door'])
    np.save(tmp_path / 'dict.npy', words)
    model = make_s3d(str(tmp_path / 'dict.npy'))
    ids = model.token_ids(['Open the DOOR!', "don't KNIFE 2", 'caf\u00e9-cr\u00e8me', '',
                           ' '.join(['open'] * 20)]).tolist()
    # ids are index + 1; a repeated entry keeps its last index; 'Knife' never matches
    assert ids[0] == [1, 8] + [0] * 14
    assert ids[1] == [3, 5, 7] + [0] * 13
    assert ids[2] == [6] + [0] * 15
    assert ids[3] == [0] * 16 and ids[4] == [1] * 16
    np.save(tmp_path / 'pickled.npy', np.array([{'open': 1}], dtype=object))
    with pytest.raises(ValueError, match='pickled.npy'):
        make_s3d(str(tmp_path / 'pickled.npy'))
    with pytest.raises(ValueError, match='needs the word dictionary'):
        make_s3d().token_ids(['open'])


def test_weights_load_strictly_under_the_official_names(tmp_path):
    from vpn_plugin.apis import init_s3d
    from vpn_plugin.engine.checkpoint import CheckpointMismatchError
    source = make_s3d()
    state = source.state_dict()
    torch.save(state, tmp_path / 's3d.pth')
    loaded = init_s3d(tmp_path / 's3d.pth')
    assert loaded.usable and not loaded.training
    for key, value in loaded.state_dict().items():
        assert torch.equal(value, state[key]), key
    del state['text_module.word_embd.weight']
    torch.save(state, tmp_path / 'partial.pth')
    with pytest.raises(CheckpointMismatchError, match=r"missing keys \['text_module\.word_embd"):
        init_s3d(tmp_path / 'partial.pth')
    with pytest.raises(FileNotFoundError, match=r'missing\.pth do not exist.*S3D_HowTo100M.*'
                       r's3d_howto100m\.pth.*s3d_dict\.npy'):
        init_s3d(tmp_path / 'missing.pth')


def test_odd_input_sizes_are_refused_by_space_to_depth():
    from vpn_plugin.models.s3d import space_to_depth
    with pytest.raises(ValueError, match=r'\(1, 3, 15, 8, 8\).*must be even'):
        space_to_depth(torch.zeros(1, 3, 15, 8, 8))
