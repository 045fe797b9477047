"""Importing this module applies every fix of :mod:`vpn_plugin.compat` (once per process).

Each OpenMMLab-dependent subpackage imports it first, so the fixes are in place before its
OpenMMLab imports whichever way it is reached (``vpn_plugin.mm``, a tool, a test).
"""
from .compat import apply

apply()
