"""Issue 37, the seventeenth hostile pass (passM: PDPP/KEPP/CEFITO checkpoints and options,
text-feature caches, the oracle checkers; log /tmp/passM_log.md). Each test named after a case
fails on bc5f1b3 (checked in a worktree of it); the ``*_still_*`` tests guard the limits of each
fix."""
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
