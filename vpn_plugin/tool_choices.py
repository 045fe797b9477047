"""Choices and defaults of tools' flags that belong to library modules importing torch (the
``vpn_plugin.datasets`` and ``vpn_plugin.protocol`` packages apply the OpenMMLab compat fixes
when imported): defined here, importable without torch or OpenMMLab, so that a tool's
``--help`` and its refusal of a flag answer in ~0.1 s (tests/test_import_purity.py). Those
library modules import them from here."""

# vpn_plugin.datasets.egoper: error segments (action_type > 0) kept as their action, or dropped
ERROR_CHOICES = ('keep', 'drop')

# vpn_plugin.datasets.synthetic: --format -> file extension, storage precisions, and the
# precision of a dataset's features when none is asked (others: float32)
FORMATS = {'npz': '.npz', 'public': '.npy'}
DTYPES = ('float32', 'float16')
DEFAULT_DTYPES = {'coin': 'float16'}

# vpn_plugin.datasets.sources: a dataset name -> its config in configs/_base_/datasets/
DATASET_CONFIGS = {'crosstask': 'crosstask.py', 'niv': 'niv.py', 'coin': 'coin.py',
                   'custom': 'custom_json.py'}

# vpn_plugin.datasets.export: a window file layout -> its record fields and feature prefix
WINDOW_LAYOUTS = {
    'crosstask': dict(fields=('vid', 'task'),
                      prefix='./dataset/CrossTask/crosstask_features/processed_data/'),
    'coin': dict(fields=('vid',), prefix='./dataset/COIN/full_npy/'),
    'niv': dict(fields=(), prefix='./dataset/NIV/processed_data/'),
    'custom': dict(fields=('vid', 'task'), prefix=''),
}

# vpn_plugin.core.stats: the authors' bootstrap resamples K (calculate_results.py:
# bootstrap(..., n_iterations=1000)); vpn_plugin.protocol.report: the metrics of a table when
# none are asked, and what the number after ± is (width: the paper's p95 - p5; half-width:
# (p95 - p5) / 2)
AUTHORS_RESAMPLES = 1000
DEFAULT_METRICS = ('success_rate', 'mean_accuracy', 'miou_set')
CI_STYLES = ('width', 'half-width')

# vpn_plugin.protocol.official: the methods with a comparison plug-in
OFFICIAL_METHODS = ('schema', 'pdpp', 'kepp', 'cefito')
