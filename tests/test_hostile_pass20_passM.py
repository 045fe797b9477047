"""Issue 37, the seventeenth hostile pass (passM: PDPP/KEPP/CEFITO checkpoints and options,
text-feature caches, the oracle checkers; log /tmp/passM_log.md). Each test named after a case
fails on bc5f1b3 (checked in a worktree of it); the ``*_still_*`` tests guard the limits of each
fix."""
import re

import pytest
import torch

from vpn_plugin.models.kepp import check_saved_graph

# ------------------------------------------------ K01 / K02: a KEPP checkpoint in float16
# a counted graph (rows sum to 1); node 2's row is the K01 run's (its float16 sum: 0.99951)
ROWS = {0: {1: 0.5, 2: 0.5}, 1: {2: 0.1, 3: 0.9},
        2: {0: 0.2, 1: 0.05, 3: 0.05, 4: 0.1, 5: 0.55, 6: 0.05},
        3: {0: 0.7, 4: 0.3}, 4: {0: 1 / 7, 1: 6 / 7}}


def counted_graph(dtype, rows=ROWS) -> dict:
    """A checkpoint's graph buffers (``graph_weights`` in ``dtype``) of a graph counted on
    training videos."""
    weights = torch.zeros(8, 8, dtype=torch.float64)
    successors = torch.full((8, 8), -1)
    for u, row in rows.items():
        for rank, (v, w) in enumerate(row.items()):
            weights[u, v], successors[u, v] = w, rank
    return {'graph_weights': weights.to(dtype), 'graph_successor_rank': successors,
            'graph_node_rank': torch.arange(8)}


@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_k01_a_counted_graph_stored_at_lower_precision_is_the_checkpoints_graph(dtype):
    """K01 / K02: a KEPP checkpoint converted to float16 (``model.half()``, or its graph buffer
    alone) was refused as 'the checkpoint's graph is inconsistent: the out-weights of node 2 sum
    to 0.99951171875, not 1; an edited or damaged checkpoint' (torch.allclose at float64 scale),
    while the same graph in bfloat16, coarser, loaded: the rows are judged at the precision the
    weights are stored in (``core.pkg.pkg_row_tolerance``, the graph files' rule)."""
    check_saved_graph(counted_graph(dtype), '', counted=True)


@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_k01_still_refuses_rows_that_do_not_sum_to_1(dtype):
    rows = {**ROWS, 2: {0: 0.33, 1: 0.33, 3: 0.31}}  # sums to 0.97
    with pytest.raises(ValueError, match='the out-weights of node 2 sum to'):
        check_saved_graph(counted_graph(dtype, rows), '', counted=True)


# ------------------------------------------------ N12 / N13 / CL1: loss_weights written out
def trained_and_model(config: str):
    """(the config text a checkpoint records, its ``model`` as a dict) of ``configs/<config>``."""
    from pathlib import Path
    from mmengine.config import Config
    import vpn_plugin.mm  # noqa: F401  (registration: the option defaults of the model class)
    cfg = Config.fromfile(Path(__file__).resolve().parents[1] / 'configs' / config)
    return cfg.pretty_text, cfg.model.to_dict()


@pytest.mark.parametrize('config, weights', [
    ('baselines/cefito_crosstask_t3.py', {}),
    ('baselines/cefito_crosstask_t3.py', {'loss_contrastive': 1.0, 'loss_auxiliary': 1.0}),
    ('baselines/cefito_crosstask_t3.py', {'loss_auxiliary': 1}),
    ('baselines/schema_crosstask_t3.py', {'state_decode': 0.1, 'action': 1.0}),
    ('vpn_crosstask_t3.py', {'plan': 1.0, 'state': 1.0, 'task': 1.0})])
def test_n12_loss_weights_at_their_defaults_are_the_trained_option(config, weights):
    """N12 / N13 / CL1: CEFITO trained with loss_weights None and tested with them written out
    (each term at the weight None gives it) or {} warned 'trained with other options ...:
    model.loss_weights: None in training, {...} here' and its test_metrics.json recorded it
    under changed_from_training: the class's defaults fill the terms an option leaves out
    (``BasePlanner.resolved_options``) on both sides."""
    from vpn_plugin.engine.checkpoint import model_option_differences
    trained, model = trained_and_model(config)
    model.pop('loss_weights', None)
    assert model_option_differences(trained, dict(model, loss_weights=weights)) == []


@pytest.mark.parametrize('config, weights', [
    ('baselines/cefito_crosstask_t3.py', {'loss_auxiliary': 0.5}),
    ('baselines/schema_crosstask_t3.py', {'state_decode': 1.0}),  # its default is 0.1
    ('vpn_crosstask_t3.py', {'state': 0.0})])
def test_n12_still_names_loss_weights_that_differ(config, weights):
    from vpn_plugin.engine.checkpoint import model_option_differences
    trained, model = trained_and_model(config)
    lines = model_option_differences(trained, dict(model, loss_weights=weights))
    assert len(lines) == 1 and lines[0].startswith('model.loss_weights: ')


# ------------------------------------------------ HX1 / HX2: check_reference's exit statuses
def test_hx1_check_reference_documents_the_exit_status_of_an_unreadable_fixture(tmp_path, capsys):
    """HX1 / HX2: check_reference.py's documentation said it exits '2 on an unreadable
    fixture'; an empty folder (or one holding meta.json only) exits 1, as every tool's refusal:
    the documentation says so (a script reading 2 would take a missing fixture for a check)."""
    from tool_modules import load_tool
    tool = load_tool('check_reference')
    with pytest.raises(SystemExit) as refused:
        tool.main([str(tmp_path)])
    assert refused.value.code != 0 and 'no meta.json' in str(refused.value.code)
    doc = ' '.join(tool.__doc__.split())
    assert '2 on an unreadable fixture' not in doc
    assert '1 on an unreadable fixture as well' in doc


# ------------------------------------------------ T09: the default encoder written out
def test_t09_the_installed_minilm_given_by_its_directory_reads_its_cache(tmp_path):
    """T09: a text-feature cache encoded with encoder=None (the installed MiniLM) was 'missing'
    for encoder=<that MiniLM's own directory> (the default written out): refused with
    allow_encode=False, encoded again under another key otherwise; one encoder is one key."""
    from pathlib import Path
    from vpn_plugin.models.text_embeddings import load_action_features, resolve_encoder_path
    taxonomy = Path(__file__).resolve().parents[2] / 'shared/reference/authors_loader_small' \
        / 'taxonomy.json'
    if not taxonomy.is_file():
        pytest.skip('needs ../shared/reference')
    encoded = load_action_features(taxonomy=str(taxonomy), pooling='mean', cache_dir=tmp_path)
    for written_out in (resolve_encoder_path(None), resolve_encoder_path(None) + '/'):
        again = load_action_features(taxonomy=str(taxonomy), pooling='mean', cache_dir=tmp_path,
                                     encoder=written_out, allow_encode=False)
        assert torch.equal(again, encoded)
    assert len(list(tmp_path.glob('actions_*.pt'))) == 1


def test_t09_still_keys_another_encoder_apart(tmp_path):
    from vpn_plugin.models.text_embeddings import is_default_encoder, resolve_encoder_path
    assert is_default_encoder(None) and is_default_encoder(resolve_encoder_path(None))
    assert not is_default_encoder(str(tmp_path)) and not is_default_encoder('openai/clip')


# ------------------------------------------------ N15 / N20 / N21 / CL7: pickle protocols 3-5
def saved_at(path, protocol):
    """A checkpoint of what a Runner's holds (tensors, numpy arrays and scalars, a message hub
    HistoryBuffer with its statistics method, bytes, repeated strings) saved by torch.save at
    ``protocol``; returns (path, the object)."""
    from collections import OrderedDict
    import numpy as np
    from mmengine.logging.history_buffer import HistoryBuffer
    history = HistoryBuffer()
    history.update(0.5)
    history.update(np.float64(0.25))
    value = {'meta': {'cfg': 'model = dict(type="PDPP")\n', 'seed': 0, 'epoch': 2},
             'state_dict': OrderedDict([('a.weight', torch.randn(3, 2)),
                                        ('a.bias', torch.zeros(3, dtype=torch.float64))]),
             'message_hub': {'log_scalars': {'train/loss': history},
                             'statistics': HistoryBuffer.mean},
             'rng': (np.random.RandomState(0).get_state()[1][:4], b'\x00\xffbytes', 'a.weight'),
             'numbers': [np.int64(3), np.float32(0.5), 2 ** 70, True, None]}
    torch.save(value, path, pickle_protocol=protocol)
    return path, value


def same(first, second) -> bool:
    import numpy as np
    if torch.is_tensor(first):
        return first.dtype == second.dtype and torch.equal(first, second)
    if isinstance(first, np.ndarray):
        return first.dtype == second.dtype and np.array_equal(first, second)
    if isinstance(first, dict):
        return first.keys() == second.keys() and all(same(first[k], second[k]) for k in first)
    if isinstance(first, (list, tuple)):
        return type(first) is type(second) and len(first) == len(second) and all(
            map(same, first, second))
    if type(first).__name__ == 'HistoryBuffer':
        return same(first._log_history, second._log_history) and same(first._count_history,
                                                                       second._count_history)
    return type(first) is type(second) and first == second


@pytest.mark.parametrize('protocol', [2, 3, 4, 5])
def test_n15_a_checkpoint_saved_with_another_pickle_protocol_is_read(tmp_path, protocol):
    """N15 / N20 / N21 / CL7: a checkpoint re-saved by torch.save(..., pickle_protocol=3, 4 or
    5) was refused as 'it does not unpickle (Unsupported operand 149); expected a torch
    checkpoint (.pth written by torch.save ...)': torch's weights_only unpickler reads protocol
    2's opcodes only; the pickle is read in those opcodes (``compat._protocol2_pickle``), by the
    same restricted unpickler, to the same values."""
    import vpn_plugin.mm  # noqa: F401  (compat: the checkpoint allow-list)
    from vpn_plugin.engine.checkpoint import read_checkpoint
    path, value = saved_at(tmp_path / f'p{protocol}.pth', protocol)
    assert same(value, read_checkpoint(path, logger='silent'))


@pytest.mark.parametrize('protocol', [2, 4, 5])
def test_n15_still_refuses_a_global_outside_the_allow_list(tmp_path, protocol):
    """Read in protocol-2 opcodes, a pickle still names its globals to the same allow-list:
    a callable of another module is refused, never called."""
    import vpn_plugin.mm  # noqa: F401
    from vpn_plugin.engine.checkpoint import read_checkpoint

    class Runs:
        def __reduce__(self):
            return (print, ('ran',))
    path = tmp_path / 'runs.pth'
    torch.save({'state_dict': {}, 'x': Runs()}, path, pickle_protocol=protocol)
    with pytest.raises(Exception, match='builtins.print'):
        read_checkpoint(path, logger='silent')


# ------------------------------------------------ A21-A23: NaN/inf observations
@pytest.mark.parametrize('shape, where', [((3, 8), (2, 5)), ((8,), (6,))])
def test_a21_nonfinite_observations_name_their_sample_and_dimension(shape, where):
    """A21-A23: plan_from_features refused NaN/inf observations saying only 'start observations
    hold 1 NaN/inf value(s)': which sample (row) of a batch was not named; it is now, with the
    value."""
    from types import SimpleNamespace
    from vpn_plugin.apis.inference import _observation_batch
    values = torch.zeros(shape)
    values[where] = float('nan')
    with pytest.raises(ValueError, match=rf'start observations hold 1 NaN/inf value\(s\) \(first '
                       rf'at index {re.escape(str(where))}: nan\)'):
        _observation_batch(SimpleNamespace(feature_dim=8), values, 'start')


# ------------------------------------------------ K05 / K08 / G01: which checkpoint
def test_k05_a_models_own_refusal_of_a_checkpoint_names_the_file(tmp_path):
    """K05 / K08 / G01: KEPP's own checks of a checkpoint's tensors (an edited graph, another
    horizon, a released-graph option beside a counted graph) said 'the checkpoint's graph is
    inconsistent ...' without naming the checkpoint file; load_weights names it."""
    import vpn_plugin.mm  # noqa: F401  (registration)
    from mmaction.registry import MODELS
    from vpn_plugin.engine.checkpoint import load_weights
    model = MODELS.build(dict(type='KEPP', feature_dim=8, num_actions=8, horizon=3, dim=32,
                              n_timesteps=20))
    state = model.state_dict()
    state.update(counted_graph(torch.float64, {**ROWS, 2: {0: 0.33, 1: 0.33, 3: 0.31}}))
    with pytest.raises(ValueError, match=r'^checkpoint /where/it\.pth: KEPP: the checkpoint\'s '
                       r'graph is inconsistent'):
        load_weights(model, {'state_dict': state}, '/where/it.pth')
    state['trained_horizon'] = torch.tensor(4)
    with pytest.raises(ValueError, match=r'^checkpoint /where/it\.pth: KEPP: .* T=4'):
        load_weights(model, {'state_dict': state}, '/where/it.pth')


def test_n15_a_legacy_format_checkpoint_of_protocol_4_is_refused_saying_so(tmp_path):
    """Found while fixing N15: torch's legacy (non-zip) format saved with pickle_protocol=4 is
    not rewritten (several pickles in one stream); its refusal said 'expected a torch checkpoint
    (.pth written by torch.save ...)', which it is: it names the format and the protocol."""
    import vpn_plugin.mm  # noqa: F401
    from vpn_plugin.engine.checkpoint import read_checkpoint
    path = tmp_path / 'legacy4.pth'
    torch.save({'state_dict': {'w': torch.ones(2)}}, path, pickle_protocol=4,
               _use_new_zipfile_serialization=False)
    with pytest.raises(Exception, match=r"saved in torch's legacy \(non-zip\) format with pickle "
                       r'protocol 4'):
        read_checkpoint(path, logger='silent')
    torch.save({'state_dict': {'w': torch.ones(2)}}, path, _use_new_zipfile_serialization=False)
    assert torch.equal(read_checkpoint(path, logger='silent')['state_dict']['w'], torch.ones(2))
