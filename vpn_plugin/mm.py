"""The MMAction2 side of vpn_plugin: compat fixes, then registration of every module.

Configs name it in ``custom_imports = dict(imports=['vpn_plugin.mm'])``; tools and scripts
that build from the registries without such a config do ``import vpn_plugin.mm``.
"""
from . import compat_applied  # noqa: F401  (first: compat fixes)
from . import baselines, datasets, engine, evaluation, models, runner  # noqa: F401  (registration)
from .errors import explain_uncaught_user_errors

explain_uncaught_user_errors()  # MMAction2's own tools end on bad input as ours do
