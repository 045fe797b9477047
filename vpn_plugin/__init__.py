"""ViterbiPlanNet as an MMAction2 plugin.

Importing this package imports nothing else, so ``import vpn_plugin.core`` (the math, plain
torch/numpy) loads neither MMAction2 nor the compatibility patches. The MMAction2 side loads
through :mod:`vpn_plugin.mm`, which configs name in
``custom_imports = dict(imports=['vpn_plugin.mm'])``: it applies :mod:`vpn_plugin.compat`
and registers every dataset, model, metric and hook. Each OpenMMLab-dependent subpackage
(``baselines``, ``datasets``, ``evaluation``, ``models``, ``protocol``) applies the compat
fixes itself before importing OpenMMLab, so importing one of them directly works too.
"""
__version__ = '0.1.0'
