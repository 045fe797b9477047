"""Core math of ViterbiPlanNet in plain torch/numpy (no MMAction2 import); see docs/design.md."""
from .dvl import differentiable_viterbi
from .metrics import (EXTRA_METRICS, METRIC_NAMES, NO_PLAN, miou_batch, no_plan, no_plan_rows,
                      per_sample_scores, planning_metrics)
from .pkg import (build_pkg, check_pkg, edge_dropout, label_noise, pkg_coverage,
                  pkg_log_transitions, subsample_sequences, union_pkg, weight_noise)
from .stats import bootstrap_ci, bootstrap_difference
from .viterbi import viterbi_decode, viterbi_decode_probs

from .beam_search import pkg_beam_search
from .diversity import decoding_diversity, entropy_bits, js_divergence, plan_distribution

__all__ = [
    'differentiable_viterbi', 'viterbi_decode', 'viterbi_decode_probs',
    'build_pkg', 'check_pkg', 'union_pkg', 'pkg_coverage', 'pkg_log_transitions',
    'edge_dropout', 'weight_noise', 'subsample_sequences', 'label_noise',
    'planning_metrics', 'per_sample_scores', 'METRIC_NAMES', 'EXTRA_METRICS', 'miou_batch',
    'NO_PLAN', 'no_plan', 'no_plan_rows',
    'bootstrap_ci', 'bootstrap_difference',
    'pkg_beam_search', 'decoding_diversity', 'plan_distribution', 'entropy_bits', 'js_divergence',
]
