"""Third hostile pass (issue 37) on the heavy methods and the video side: each test is a case
that was silent, vague or wrong before its fix (the docstring says what happened)."""
import copy
import pickle
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import vpn_plugin.mm  # noqa: F401  (registration)
from test_hostile_tools import no_traceback, user_error  # noqa: F401  (an autouse fixture)
from vpn_plugin.data_paths import REPO_ROOT, load_config

SIZE = 16  # frame side: the smallest S3D input (16 px -> 1 x 1 at mixed_5c)


# ---------------------------------------------------------------------- video extraction
@pytest.fixture(scope='module')
def s3d():
    from vpn_plugin.apis import init_s3d
    return init_s3d(random_weights=True)


@pytest.fixture(scope='module')
def video(tmp_path_factory) -> Path:
    from test_extract_features import write_video
    path = tmp_path_factory.mktemp('videos') / 'a.mp4'
    write_video(path, 20)
    return path


def extract(s3d, videos, out, **recipe):
    from vpn_plugin.video import FrameRecipe, extract_videos
    return extract_videos(s3d, list(videos), out, FrameRecipe(size=SIZE, **recipe),
                          num_workers=0)


@pytest.mark.parametrize('layout', ['a.pkl', 'a', 'task/a.npz', 'clip.mp4', 'provenance.json'])
def test_extraction_into_a_folder_of_other_files_is_refused(s3d, video, tmp_path, layout):
    """Before: --out onto a dataset's feature folder of .pkl files, of files without an
    extension or of per-task subfolders (layouts the datasets read), onto a folder of videos
    or onto a dataset root with its provenance.json: extraction.json, provenance.json and the
    new npz were written among them, exit 0."""
    out = tmp_path / 'features'
    (out / layout).parent.mkdir(parents=True)
    (out / layout).write_bytes(pickle.dumps(dict(frames_features=np.zeros((3, 512)))))
    with pytest.raises(ValueError, match=rf'--out {out} already holds 1 file\(s\) or folder\(s\) '
                                         rf"\({layout.split('/')[0]}\) but no extraction.json: "
                                         r'.*nothing was written'):
        extract(s3d, [video], out)
    assert sorted(p.name for p in out.iterdir()) == [layout.split('/')[0]]


def test_a_finished_file_of_another_video_is_not_counted_done(s3d, video, tmp_path):
    """Before: b.npz copied from a.npz (same recipe) was counted "already there" for b.mp4,
    which kept a's features."""
    out = tmp_path / 'out'
    extract(s3d, [video], out)
    other = tmp_path / 'b.mp4'
    shutil.copy(video, other)
    shutil.copy(out / 'a.npz', out / 'b.npz')
    with pytest.raises(ValueError, match=rf'b.npz: already there, but not a complete feature '
                                         rf'file of this extraction \(made from the video '
                                         rf'{video}, not from {other}\)'):
        extract(s3d, [video, other], out)


def ffmpeg(*args):
    from vpn_plugin.video.decode import ffmpeg_executable
    subprocess.run([ffmpeg_executable(), '-hide_banner', '-loglevel', 'error', '-y', *args],
                   check=True)


def test_a_video_that_gives_no_frame_says_why(tmp_path):
    """Before: an empty file was 'ffmpeg cannot open it as a video: Error opening input files:
    Invalid data found'; a 3 s video at --fps 1e-9 'no video frame decoded (no video stream,
    or an empty one)' although it has a video stream."""
    from vpn_plugin.video import FrameRecipe
    from vpn_plugin.video.decode import UnreadableVideoError, decode_video
    empty = tmp_path / 'empty.mp4'
    empty.touch()
    with pytest.raises(UnreadableVideoError, match=r'empty.mp4: an empty file \(0 bytes\)'):
        decode_video(empty)
    clip = tmp_path / 'clip.mp4'
    ffmpeg('-f', 'lavfi', '-i', 'testsrc=size=32x32:rate=8', '-t', '3', '-pix_fmt', 'yuv420p',
           str(clip))
    with pytest.raises(UnreadableVideoError, match=r'no frame: fps=1e-09 samples none of its '
                                                   r'3 s \(a frame every 1e\+09 s\)'):
        decode_video(clip, FrameRecipe(fps=1e-9, size=SIZE))


def test_ffmpeg_crashing_on_a_header_is_named(tmp_path, monkeypatch):
    """Before: ffmpeg killed by SIGSEGV on an MPEG-TS file named .mp4 (this ffmpeg build)
    gave 'ffmpeg cannot open it as a video: no message'."""
    from vpn_plugin.video import decode
    clip = tmp_path / 'clip.mp4'
    clip.write_bytes(b'\x47' * 188)
    crashed = subprocess.CompletedProcess([], -11, b'', b'')
    monkeypatch.setattr(decode.subprocess, 'run', lambda *a, **k: crashed)
    with pytest.raises(decode.UnreadableVideoError, match=r'clip.mp4: ffmpeg crashed reading '
                                                          r'its header \(signal 11\)'):
        decode.probe_video(clip)


def test_native_fps_progress_counts_the_streams_frames(tmp_path):
    """Before: --native-fps gave no expected count, so the progress line read '6/1 chunks
    (600%)'."""
    from vpn_plugin.video import FrameRecipe
    from vpn_plugin.video.decode import expected_frames, probe_video
    clip = tmp_path / 'clip.mp4'
    ffmpeg('-f', 'lavfi', '-i', 'testsrc=size=32x32:rate=8', '-t', '3', '-pix_fmt', 'yuv420p',
           str(clip))
    assert expected_frames(probe_video(clip), FrameRecipe(fps=None, size=SIZE)) == 24


@pytest.mark.parametrize('argv, message', [
    (['--native-fps', '--fps', '8'], '--native-fps and --fps 8 exclude each other'),
    (['--size', '100000'], r'size=100000: expected an even number of pixels in 2..1024'),
    (['--device', 'nosuch'], "--device 'nosuch' is not a torch device; expected cpu, cuda"),
    (['--device', 'cuda:99'], r"--device 'cuda:99': this machine has \d+ CUDA device"),
])
def test_extraction_flags_torch_or_ffmpeg_would_refuse_later_are_named(video, tmp_path, argv,
                                                                       message):
    """Before: --native-fps silently dropped --fps 8; --size 100000 ended in a MemoryError
    traceback; --device nosuch / cuda on a CPU machine in torch's RuntimeError /
    AssertionError tracebacks."""
    out = tmp_path / 'out'
    found = user_error('extract_features', [video, '--out', out, '--random-weights', *argv])
    assert __import__('re').search(message, found), found
    assert not out.exists()


# ---------------------------------------------------------------------- model options
def model_config(config: str, **changes) -> dict:
    model = load_config(str(REPO_ROOT / config)).model.to_dict()
    model.update(dict(horizon=3, dim=32), **changes)
    return model


def build(model: dict):
    from mmaction.registry import MODELS
    return MODELS.build(copy.deepcopy(model))


@pytest.mark.parametrize('option, value, message', [
    ('dim', 0, r'KEPP model.dim=0; expected an integer >= 32 and <= 4096'),
    ('dim', 'x', r"KEPP model.dim='x'; expected an integer"),
    ('dim', 10**9, r'KEPP model.dim=1000000000; expected an integer >= 32 and <= 4096'),
    ('dim_mults', 2, r'KEPP model.dim_mults=2; expected a list \(each an integer >= 1\)'),
    ('dim_mults', [1, 'x', 4], r"KEPP model.dim_mults\[1\]='x'; expected an integer >= 1"),
    ('feature_dim', 0, r'KEPP model.feature_dim=0; expected an integer >= 1'),
    ('feature_dim', True, r'KEPP model.feature_dim=True; expected an integer'),
    ('feature_dim', 10**9, r'KEPP model.feature_dim=1000000000; expected an integer >= 1 and '
                           r'<= 16384'),
    ('sampling_seed', 'x', r"KEPP model.sampling_seed='x'; expected an integer >= 0"),
    ('sampling_seed', True, r'KEPP model.sampling_seed=True; expected an integer >= 0'),
    ('sampling_seed', float('nan'), r'KEPP model.sampling_seed=nan; expected an integer'),
    ('released_graph', 0, r'KEPP model.released_graph=0; expected a non-empty string \(or None\)'),
    ('released_graph', False, r'KEPP model.released_graph=False; expected a non-empty string'),
    ('step_checkpoint', '', r"KEPP model.step_checkpoint=''; expected a non-empty string \(or None\)"),
    ('num_actions', 10**9, r'model.num_actions=1000000000; expected an integer >= 1 and <= 46340'),
    ('pkg', dict(count_mode='video', smoothing=float('nan')),
     r'model.pkg.smoothing=nan; expected a finite number >= 0'),
    ('pkg', dict(count_mode='video', smoothing='x'),
     r"model.pkg.smoothing='x'; expected a finite number >= 0"),
])
def test_kepp_options_are_named_when_built(option, value, message):
    """Before: dim=0, feature_dim=0 / -1 / True, sampling_seed 'x' / nan / True / 1.5,
    released_graph=0 / False (read as "no graph"), step_checkpoint='' and smoothing nan / inf
    were built; dim 'x', dim_mults 2, feature_dim 'x' / 1e9, num_actions 1e9 and
    smoothing 'x' ended in TypeErrors or torch's allocation error."""
    model = model_config('configs/baselines/kepp_niv_t3.py', **{option: value})
    with pytest.raises(ValueError, match=message):
        build(model)


@pytest.mark.parametrize('option, value, message', [
    ('endpoint_weight', float('nan'), r'PDPP model.endpoint_weight=nan; expected a finite '
                                      r'number >= 0'),
    ('endpoint_weight', -1, r'PDPP model.endpoint_weight=-1; expected a finite number >= 0'),
    ('endpoint_weight', 'x', r"PDPP model.endpoint_weight='x'"),
    ('num_tasks', 0, r'PDPP model.num_tasks=0; expected an integer >= 1'),
    ('num_tasks', 'x', r"PDPP model.num_tasks='x'; expected an integer >= 1"),
    ('num_tasks', 10**9, r'PDPP model.num_tasks=1000000000; expected an integer >= 1 and '
                         r'<= 46340'),
    ('n_timesteps', float('nan'), r'PDPP model.n_timesteps=nan; expected an integer >= 1'),
    ('n_timesteps', 'x', r"PDPP model.n_timesteps='x'; expected an integer"),
])
def test_pdpp_options_are_named_when_built(option, value, message):
    """Before: endpoint_weight nan / -1 / 'x' and num_tasks=0 were built (a NaN or negative
    loss weight trains on); num_tasks 'x' / 1e9 and n_timesteps nan / 'x' ended in
    TypeErrors or torch's allocation error."""
    model = model_config('configs/baselines/pdpp_niv_t3.py', **{option: value})
    with pytest.raises(ValueError, match=message):
        build(model)


@pytest.mark.parametrize('value', [float('nan'), 'x'])
def test_cefito_text_pad_to_is_named(tmp_path, value):
    """Before: model.text_embeddings.pad_to=nan / 'x' ended in torch's pad() TypeError or
    "'>' not supported"."""
    from vpn_plugin.models.text_embeddings import load_action_features
    np.save(tmp_path / 'text.npy', np.random.default_rng(0).standard_normal((4, 8), np.float32))
    with pytest.raises(ValueError, match=rf'model.text_embeddings.pad_to={value!r}; expected '
                                         r'an integer >= 1 and <= 16384 \(or None\)'):
        load_action_features(file=str(tmp_path / 'text.npy'), pad_to=value)


@pytest.mark.parametrize('option, value', [('num_heads', True), ('num_layers', 0),
                                           ('num_layers', -1), ('embed_dim', 'x'),
                                           ('dropout', 1.5), ('no_state_task', 'yes')])
def test_schema_sizes_are_named_when_built(option, value):
    """Before: num_heads=True (one head), num_layers 0 / -1 (no decoder layer) were built;
    embed_dim 'x' was a TypeError; dropout 1.5 and no_state_task 'yes' were used as given."""
    model = model_config('configs/baselines/schema_niv_t3.py', **{option: value})
    model.pop('dim')
    with pytest.raises(ValueError, match=rf'SCHEMA model.{option}={value!r}; expected'):
        build(model)


@pytest.mark.parametrize('value', ['x', -1, None])
def test_freeze_visual_is_a_switch(value):
    """Before: model.freeze_visual 'x' / -1 were read as True (the message then said
    "model.freeze_visual=True"), None as False."""
    from torch import nn
    from vpn_plugin.models.pretrained_encoder import init_visual_encoder
    with pytest.raises(ValueError, match=rf'model.freeze_visual={value!r}; expected True or '
                                         r'False'):
        init_visual_encoder(nn.Linear(2, 2), None, value, 'SCHEMA')


# ---------------------------------------------------------------------- pre-stage files
def test_a_step_model_file_with_nan_weights_is_refused(tmp_path):
    """Before: model.step_checkpoint of a step model with a NaN weight was reused (its
    predictions too) and the training exited 0, saving the NaN into every checkpoint."""
    import torch
    from vpn_plugin.engine.kepp_training import load_step_model
    path = tmp_path / 'kepp_step_model.pth'
    torch.save(dict(identity={}, state_dict={'unet.w': torch.tensor([1.0, float('nan')])}),
               path)
    with pytest.raises(ValueError, match=rf'checkpoint {path} \(the saved step model\): tensor '
                                         r'unet.w \(2,\) holds 1 NaN/inf value'):
        load_step_model(path, None, {})


def test_a_task_classifier_file_with_nan_weights_is_refused(tmp_path, monkeypatch):
    """Before: a task_classifier.pth with a NaN weight was loaded as the trained classifier."""
    import torch
    from torch import nn
    from vpn_plugin.engine import pdpp_training
    monkeypatch.setattr(pdpp_training, 'check_identity', lambda *args: None)
    path = tmp_path / 'task_classifier.pth'
    torch.save(dict(state_dicts={'model.task_head': {'weight': torch.tensor([[float('inf')]])}}),
               path)
    module = nn.Module()
    module.task_head = nn.Linear(1, 1)
    with pytest.raises(ValueError, match=r'\(the saved model.task_head\): tensor weight \(1, 1\) '
                                         r'holds 1 NaN/inf value'):
        pdpp_training.load_classifiers(path, {'model': module}, {})


def kepp_graph_state(weights):
    """The graph buffers of a KEPP checkpoint for (N, N) ``weights`` (an edge where > 0)."""
    import torch
    weights = torch.tensor(weights, dtype=torch.float64)
    successors = torch.where(weights > 0, 0, -1)
    return dict(graph_weights=weights, graph_successor_rank=successors)


def test_a_checkpoint_graph_edited_by_hand_is_refused():
    """Before: a KEPP checkpoint whose graph_weights were set to 1 (or one edge doubled) was
    tested with that graph, exit 0: every retrieved path changed without a word."""
    import torch
    from vpn_plugin.models.kepp import check_saved_graph
    counted = kepp_graph_state([[0.0, 0.25, 0.75], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    check_saved_graph(counted, '', counted=True)
    ones = dict(counted, graph_weights=torch.ones(3, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"checkpoint's graph is inconsistent: edge \(0, 0\) has "
                                         r'weight 1.0 \(no edge by graph_successor_rank\)'):
        check_saved_graph(ones, '', counted=True)
    doubled = dict(counted, graph_weights=counted['graph_weights'] * torch.tensor([[1, 1, 1],
                                                                                  [1, 1, 0.5],
                                                                                  [1, 1, 1]]))
    with pytest.raises(ValueError, match=r'the out-weights of node 1 sum to 0.5, not 1'):
        check_saved_graph(doubled, '', counted=True)
    check_saved_graph(doubled, '', counted=False)  # a released graph is used as it is


# ---------------------------------------------------------------------- the checker
@pytest.fixture
def pdpp_fixture(tmp_path, shared_data) -> Path:
    folder = tmp_path / 'pdpp_small_t3'
    shutil.copytree(Path(shared_data).parent / 'reference' / 'pdpp_small_t3', folder)
    return folder


@pytest.mark.parametrize('field, value', [('horizon', '3'), ('num_actions', True)])
def test_a_fixture_size_that_is_no_integer_is_named(pdpp_fixture, field, value):
    """Before: meta.json horizon "3" ended in a TypeError traceback inside the checker;
    num_actions true was read as 1 (then a shape error)."""
    import json
    from vpn_plugin.oracles.compare import check_fixture
    meta = json.loads((pdpp_fixture / 'meta.json').read_text())
    meta[field] = value
    (pdpp_fixture / 'meta.json').write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=rf'meta.json: {field}={value!r}; expected an integer '
                                         r'>= 1'):
        check_fixture(pdpp_fixture)


@pytest.mark.parametrize('value', [999, -1])
def test_a_fixture_action_id_out_of_range_is_named(pdpp_fixture, value):
    """Before: an action id 999 or -1 in inputs.npz ended in torch's 'Class values must be
    smaller than num_classes' traceback."""
    from vpn_plugin.oracles.compare import check_fixture
    with np.load(pdpp_fixture / 'inputs.npz') as archive:
        arrays = dict(archive)
    arrays['actions'][0, 0] = value
    np.savez(pdpp_fixture / 'inputs.npz', **arrays)
    with pytest.raises(ValueError, match=r'inputs.npz: actions holds ids in \[.*\]; expected '
                                         r'0..8 \(meta.json\)'):
        check_fixture(pdpp_fixture)


def test_a_feature_file_that_cannot_be_written_gives_the_right_hint(tmp_path):
    """Before: --save-features into a missing folder said 'No such file or directory; ...
    free disk space and run again'."""
    from vpn_plugin.errors import OutputWriteError
    from vpn_plugin.video.extract import write_features_atomically
    with pytest.raises(OutputWriteError, match=r'No such file or directory \(ENOENT\); it was not written '
                                               r'\(.*: fix that and run again'):
        write_features_atomically(tmp_path / 'nosuch' / 'f.npz', dict(a=np.zeros(2)))


def test_a_fixture_action_id_array_of_floats_is_named(pdpp_fixture):
    """Before: actions saved as float32 ended in torch's 'one_hot is only applicable to index
    tensor of type LongTensor' traceback."""
    from vpn_plugin.oracles.compare import check_fixture
    with np.load(pdpp_fixture / 'inputs.npz') as archive:
        arrays = dict(archive)
    arrays['actions'] = arrays['actions'].astype(np.float32)
    np.savez(pdpp_fixture / 'inputs.npz', **arrays)
    with pytest.raises(ValueError, match=r'inputs.npz: actions has dtype float32; expected '
                                         r'integer ids 0..8'):
        check_fixture(pdpp_fixture)


def test_a_schedule_buffer_removed_from_the_official_state_dict_fails(tmp_path):
    """Before: a PDPP (or KEPP) fixture whose state_dict.npz lost `betas` passed: only the
    buffers recorded were compared."""
    import torch
    from vpn_plugin.oracles.pdpp import buffer_rows

    class Schedule:
        @staticmethod
        def schedule():
            return dict(betas=torch.ones(3), alphas_cumprod=torch.ones(3))
    np.savez(tmp_path / 'state_dict.npz', alphas_cumprod=np.ones(3, np.float32),
             **{'model.w': np.zeros(2, np.float32)})
    rows = {row[0]: row for row in buffer_rows(tmp_path / 'state_dict.npz', Schedule())}
    assert rows['state_dict.npz:alphas_cumprod'][-1] is True
    assert rows['state_dict.npz:betas (not recorded: the fixture lacks this array, which the '
                'implementation produces)'][-1] is False


def test_a_text_file_given_as_checkpoint_is_named(tmp_path):
    """Before: `tools/plan.py --checkpoint notes.pth --video ...` (a text file, no config)
    stopped with 'error: 101' (the unpickler's KeyError), naming nothing."""
    from vpn_plugin.engine.checkpoint import read_checkpoint
    path = tmp_path / 'notes.pth'
    path.write_text('hello')
    with pytest.raises(ValueError, match=rf'cannot read checkpoint {path}: .*KeyError\(101\)'
                                         r'.*expected a complete torch checkpoint'):
        read_checkpoint(path)


def test_integer_tensors_for_float_weights_are_refused(tmp_path):
    """Before: an S3D weights file whose float tensors had been saved as int64 loaded (every
    weight truncated towards 0, the features meaningless) and was marked usable."""
    import torch
    from torch import nn
    from vpn_plugin.engine.checkpoint import CheckpointMismatchError, load_weights
    model = nn.Linear(3, 2)
    state = {key: value.long() for key, value in model.state_dict().items()}
    with pytest.raises(CheckpointMismatchError, match=r'other shapes or dtypes: weight: \(2, 3\) '
                                                      r'torch.int64 in the checkpoint, \(2, 3\) '
                                                      r'torch.float32 in the model'):
        load_weights(model, state, 's3d_howto100m.pth')
    load_weights(model, {k: v.half() for k, v in model.state_dict().items()}, 'half.pth')
    assert model.weight.dtype == torch.float32


def test_a_schema_fixture_horizon_that_is_a_string_is_named(tmp_path, shared_data):
    """Before: meta.json horizon "3" of the SCHEMA fixture was refused as 'horizon=3 but
    constructor.time_horz=3; expected the same value' (two equal-looking values)."""
    import json
    from vpn_plugin.oracles.schema import read_schema_meta
    meta = json.loads((Path(shared_data).parent / 'reference' / 'schema_crosstask_t3' /
                       'meta.json').read_text())
    meta['horizon'] = '3'
    with pytest.raises(ValueError, match=r"meta.json: horizon='3'; expected an integer >= 1"):
        read_schema_meta(tmp_path, meta)


@pytest.mark.parametrize('value', [999, -1])
def test_a_schema_fixture_action_id_out_of_range_is_named(shared_data, value):
    """Before: an action id 999 or -1 in the SCHEMA fixture's inputs.npz stopped with torch's
    'error: Target 999 is out of bounds.', naming no file."""
    import json
    from vpn_plugin.oracles.authors import check_inputs
    folder = Path(shared_data).parent / 'reference' / 'schema_crosstask_t3'
    meta = json.loads((folder / 'meta.json').read_text())
    with np.load(folder / 'inputs.npz') as archive:
        inputs = dict(archive)
    inputs['actions'][0, 0] = value
    constructor = meta['constructor']
    sizes = dict(batch=meta['batch'], horizon=meta['horizon'], num_actions=meta['num_actions'],
                 num_tasks=meta['num_tasks'], feature_dim=constructor['vis_input_dim'],
                 text_dim=constructor['lang_input_dim'])  # what oracles/schema.py passes
    with pytest.raises(ValueError, match=r'inputs.npz: actions holds ids in \[.*\]; expected '
                                         r'0..132 \(meta.json\)'):
        check_inputs(folder, sizes, inputs)


def test_a_cefito_fixture_size_that_is_no_integer_is_named(tmp_path):
    """Before: meta.json horizon "3" of a CEFITO fixture was refused as "model.horizon='3'"
    (the model option, not the fixture file)."""
    from vpn_plugin.oracles.cefito import META_FIELDS, read_meta
    meta = dict.fromkeys(META_FIELDS, 3)
    meta['horizon'] = '3'
    with pytest.raises(ValueError, match=r"meta.json: horizon='3'; expected an integer >= 1"):
        read_meta(tmp_path, meta)


@pytest.mark.parametrize('name', ['kepp_small_t3', 'cefito_small_t3'])
def test_a_kepp_or_cefito_fixture_action_id_out_of_range_is_named(tmp_path, shared_data, name):
    """Before: an action id 999 in the fixture's inputs.npz ended in torch's 'Class values must
    be smaller than num_classes' traceback (KEPP) or 'index 999 is out of bounds for dimension
    0 with size 20' (CEFITO), naming no file."""
    from vpn_plugin.oracles.compare import check_fixture
    folder = tmp_path / name
    shutil.copytree(Path(shared_data).parent / 'reference' / name, folder)
    with np.load(folder / 'inputs.npz') as archive:
        arrays = dict(archive)
    arrays['actions'][0, 0] = 999
    np.savez(folder / 'inputs.npz', **arrays)
    with pytest.raises(ValueError, match=r'inputs.npz: actions holds ids in \[.*, 999\]; '
                                         r'expected 0..\d+ \(meta.json\)'):
        check_fixture(folder)


@pytest.mark.parametrize('field, value', [('horizon', '3'), ('num_actions', True)])
def test_an_authors_fixture_size_that_is_no_integer_is_named(tmp_path, shared_data, field,
                                                            value):
    """Before: meta.json num_actions true of the authors' fixture was refused as
    'model.num_actions=True' (the model option, not the file); horizon "3" ended in a
    TypeError traceback."""
    import json
    from vpn_plugin.oracles.authors import read_meta
    meta = json.loads((Path(shared_data).parent / 'reference' / 'authors_crosstask_t3' /
                       'meta.json').read_text())
    meta[field] = value
    (tmp_path / 'meta.json').write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=rf'meta.json: {field}={value!r}; expected an integer '
                                         r'>= 1'):
        read_meta(tmp_path)


@pytest.mark.parametrize('content, found', [(b'the actions, one per line\n', 'a text file'),
                                            (b'\x93NUMPY\x01\x00', 'a .npy file, damaged')])
def test_text_features_that_are_not_an_npy_say_what_the_file_is(tmp_path, content, found):
    """Before: plain text named .npy got numpy's 'This file contains pickled (object) data'."""
    from vpn_plugin.models.text_embeddings import load_action_features
    path = tmp_path / 'names.npy'
    path.write_bytes(content)
    with pytest.raises(ValueError, match=rf'^{path}: not a plain \.npy array: {found}') as err:
        load_action_features(file=str(path))
    assert 'pickled' not in str(err.value) or found.startswith('a .npy')
