"""Checkers of this plugin's implementations against the official codes' recorded outputs
(``../shared/reference``): ``compare`` (the shared comparison, the ``CHECKERS`` map and the
report) and one module per official code (``authors`` = ViterbiPlanNet, ``schema``, ``pdpp``).

Above ``models``: a checker builds a registered model and loads official weights into it; no
library module imports a checker. Run them with ``tools/check_reference.py FIXTURE``.
"""
