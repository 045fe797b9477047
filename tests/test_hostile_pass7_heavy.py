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
