"""ViterbiPlanNet as an MMAction2 plugin.

Importing the package first applies the OpenMMLab compatibility fixes
(:mod:`vpn_plugin.compat`), then registers every dataset, model, metric and
hook in MMAction2's registries. The math in :mod:`vpn_plugin.core` is plain
torch/numpy and does not depend on MMAction2.
"""
from . import compat

compat.apply()

from . import baselines, datasets, engine, evaluation, models  # noqa: E402,F401  (registration)

__version__ = '0.1.0'
