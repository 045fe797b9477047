"""Seventh hostile pass (issue 37), the heavy methods' own options: PDPP / KEPP / CEFITO model
keys and their pre-stage / EMA hooks looped over hostile values (log: /tmp/hostile12_log.md).
Each test is a case that was vague, silent or wrong before its fix (the docstring says what
happened)."""
import pytest

from test_hostile_pass4_heavy import cefito_model_cfg  # noqa: F401  (a fixture)


# ---------------------------------------------------------------------- CEFITO text features
@pytest.mark.parametrize('value', [0, [], {}, -1, 1.5, 'abc', True, float('nan')])
def test_cefito_text_embeddings_of_another_kind_are_refused(cefito_model_cfg, value):
    """Before: 0, [] and {} built a model on all-zero text features (read by truth value as
    "no text features"); -1, 1.5, 'abc', True, nan failed with AttributeError "'int' object
    has no attribute 'get'", naming no option."""
    from mmaction.registry import MODELS
    with pytest.raises(ValueError) as err:
        MODELS.build(dict(cefito_model_cfg, text_embeddings=value))
    assert f'model.text_embeddings={value!r}; expected' in str(err.value)


# ---------------------------------------------------------------------- diffusion steps
@pytest.mark.parametrize('config, option', [
    ('configs/baselines/pdpp_niv_t3.py', 'n_timesteps'),
    ('configs/baselines/kepp_niv_t3.py', 'n_timesteps'),
    ('configs/baselines/kepp_niv_t3.py', 'step_n_timesteps'),
])
def test_a_billion_diffusion_steps_are_refused_before_allocating(shared_data, config, option):
    """Before: model.n_timesteps (or KEPP's step_n_timesteps) = 10**9 allocated the cosine
    schedule's buffers, 7.45 GiB each: the process was killed for memory (or a MemoryError
    naming no option)."""
    import vpn_plugin.mm  # noqa: F401  (registration)
    from mmaction.registry import MODELS
    from vpn_plugin.data_paths import apply_horizon, load_config, resolve_paths
    model = resolve_paths(apply_horizon(load_config(config))).model
    model.update(dim=32, **{option: 10 ** 9})
    with pytest.raises(ValueError) as err:
        MODELS.build(model)
    message = str(err.value)
    method = config.split('/')[-1].split('_')[0].upper()  # 'PDPP model.n_timesteps=...'
    assert message.startswith(f'{method} model.{option}=1000000000; expected an integer >= 1 '
                              'and <= 100000'), message


# ---------------------------------------------------------------------- pre-stage log
def test_the_task_classifier_is_said_saved_only_once_saved(monkeypatch, tmp_path):
    """Before: with the disk full, the log read "TaskClassifierHook: trained
    classifier.task_head for 4 steps: ...; saved <work_dir>/task_classifier.pth" and then
    "error: cannot save the pre-stage file ...": the INFO line was printed before saving."""
    from types import SimpleNamespace

    import torch

    from vpn_plugin.engine import pdpp_training
    from vpn_plugin.errors import OutputWriteError
    said = []

    def full_disk(path, payload):
        raise OutputWriteError(f'cannot save the pre-stage file {path}: No space left')
    monkeypatch.setattr(pdpp_training, 'train_classifier', lambda *a, **k: {})
    monkeypatch.setattr(pdpp_training, 'describe', lambda record: 'trained')
    monkeypatch.setattr(pdpp_training, 'save_pre_stage', full_disk)
    monkeypatch.setattr(pdpp_training, 'print_log', lambda text, **k: said.append(text))
    runner = SimpleNamespace(train_dataloader=SimpleNamespace(dataset=None), seed=0)
    head = SimpleNamespace(task_head=torch.nn.Linear(2, 2))
    hook = pdpp_training.TaskClassifierHook(max_epochs=1)
    with pytest.raises(OutputWriteError):
        hook.train_all(runner, {'classifier': head}, tmp_path / 'task_classifier.pth',
                       dict(steps=4, val_every=2, batch_size=8), identity={})
    assert not [text for text in said if 'saved' in text]


# ---------------------------------------------------------------------- a non-causal predictor
def test_a_non_causal_predictor_is_not_scored_by_the_prefix_tree(cefito_model_cfg):
    """Before: model.causal=False built and trained a non-causal predictor (full sequences),
    but the default search='tree' scores sequences from their prefixes' hidden states, as a
    causal one: test.py of a checkpoint with model.causal=False gave exit 0 and the causal
    model's metrics (tree and full-sequence energies of a non-causal field differ by 0.025
    and pick other plans). The tree stays exact for a causal predictor; chunked search of a
    non-causal one builds."""
    import torch

    from mmaction.registry import MODELS
    from vpn_plugin.core import energy_field, energy_search
    with pytest.raises(ValueError) as err:
        MODELS.build(dict(cefito_model_cfg, causal=False, search='tree'))
    assert "model.causal=False with model.search='tree'" in str(err.value)
    assert MODELS.build(dict(cefito_model_cfg, causal=False, search='chunked')).search == \
        'chunked'
    torch.manual_seed(0)  # the oracle of the refusal: the two searches disagree without it
    field = energy_field.EnergyField(12, 8, 3, torch.randn(8, 16), 16, 2, 2, 2.0, False)
    start, goal = (energy_field.normalize_observation(torch.randn(3, 12)) for _ in range(2))
    actions = torch.tensor([5, 2, 6, 0])
    with torch.no_grad():
        tables = [energy_search.energy_table(field, start, goal, actions, 3, search, 7)
                  for search in ('tree', 'chunked')]
    assert float((tables[0] - tables[1]).abs().max()) > 1e-3


# ---------------------------------------------------------------------- test.py overrides
def test_a_test_with_other_model_options_than_the_training_names_them(shared_data):
    """Before: tools/test.py of a KEPP checkpoint trained with train_paths='step' under
    --cfg-options model.train_paths=truth (or PDPP's endpoint_weight=1.0, trained with 10)
    exited 0 without a word: the config's option was unread or applied unsaid. The runner now
    warns with the differences between the checkpoint's meta['cfg'] model and the config's;
    the same config gives none (no false alarm)."""
    from vpn_plugin.data_paths import apply_horizon, load_config, resolve_paths
    from vpn_plugin.engine.checkpoint import model_option_differences
    path = 'configs/baselines/kepp_niv_t3.py'
    trained = resolve_paths(apply_horizon(load_config(path)))
    tested = resolve_paths(apply_horizon(load_config(path, {'model.train_paths': 'truth'})))
    text = trained.pretty_text  # what mmengine stores in a checkpoint's meta['cfg']
    assert model_option_differences(text, trained.model) == []
    assert model_option_differences(text, tested.model) == [
        "model.train_paths: 'step' in training, 'truth' here"]
    assert model_option_differences(None, tested.model) == []  # no config recorded


def test_a_moved_data_root_is_no_model_option_difference(shared_data):
    """Before: tools/test.py of a CEFITO checkpoint under a moved data root warned that it
    was "trained with other model options" (the text features' path); what the files hold
    is checked by content (SHA-256), so a location-only difference is not a changed option,
    while a changed value beside it still is."""
    from vpn_plugin.data_paths import apply_horizon, load_config, resolve_paths
    from vpn_plugin.engine.checkpoint import model_option_differences
    path = 'configs/baselines/cefito_niv_t3.py'
    trained = resolve_paths(apply_horizon(load_config(path)))
    moved = resolve_paths(apply_horizon(load_config(path, {'data_root': '/elsewhere/niv'})))
    text = trained.pretty_text
    assert model_option_differences(text, moved.model)  # the locations differ...
    assert model_option_differences(text, moved.model, locations=False) == []  # ...only they
    moved.model.top_k = 2
    assert model_option_differences(text, moved.model, locations=False) == [
        'model.top_k: 1 in training, 2 here']
