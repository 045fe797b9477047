"""The tenth hostile pass (issue 37), core math / Python API / the checks themselves (meaning5).

One kind rule for every check (``errors.check_number`` is ``config_types.check_value``'s rule),
a registered class built in Python held to its ``__init__`` annotations, and the core's
meanings a kind cannot say (a prior that is no distribution, a fraction of 0 that keeps a
sequence, a one-step beam path that misses its goal).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from vpn_plugin.config_types import Probability, check_value
from vpn_plugin.errors import at_least, check_bool, check_number


@pytest.mark.parametrize('value, limits', [
    (0.5, dict(low=1.0)),
    (-1, dict(integer=True, low=0)),
    (True, dict(integer=True, low=1)),
    (2.0, dict(low=0, high=1.0)),
    ('x', dict(low=0.0, optional=True)),
])
def test_check_number_says_what_check_value_says(value, limits):
    """One rule, one bound format: ``>= 1``, never ``>= 1.0`` beside ``>= 1``."""
    from typing import Annotated, Optional
    from vpn_plugin.config_types import Range
    kind = Annotated[int if limits.get('integer') else float,
                     Range(limits.get('low'), limits.get('high'))]
    if limits.get('optional'):
        kind = Optional[kind]
    with pytest.raises(ValueError) as number_error:
        check_number('model.x', value, **limits)
    with pytest.raises(ValueError) as value_error:
        check_value('model.x', value, kind)
    assert str(number_error.value) == str(value_error.value)
    assert '.0' not in str(number_error.value).split('expected')[1]


def test_bounds_of_argparse_types_read_as_check_values():
    with pytest.raises(Exception, match=r"nan: expected a number >= 0$"):
        at_least(float, 0.0)('nan')
    with pytest.raises(Exception, match=r"expected an integer >= 1 and <= 10 \(why\)$"):
        at_least(int, 1, high=10, why='why')('11')


@pytest.mark.parametrize('check', [
    lambda: check_number('model.lr', 10 ** 400, low=0),
    lambda: check_value('model.lr', 10 ** 400, Probability),
    lambda: at_least(int, 1, high=10)('1' + '0' * 400),
])
def test_an_integer_beyond_a_float_is_refused_by_name_not_an_overflow(check):
    with pytest.raises((ValueError, Exception)) as error:
        check()
    assert not isinstance(error.value, OverflowError), error.value


def test_check_bool_is_check_values_rule():
    with pytest.raises(ValueError, match=r"^model.use_dvl=1; expected True or False$"):
        check_bool('model.use_dvl', 1)
    assert check_bool('model.use_dvl', False) is False
