"""Tenth hostile pass, part B (issue 37's confirmation pass), scope: ViterbiPlanNet / SCHEMA /
CompactPlanNet / baselines through tools/train.py and tools/test.py. Each test names what the
code of main at 2ce44a1 did."""
import glob
import os

import numpy as np

import vpn_plugin.mm  # noqa: F401  (registration)


def _short_features(source: str, target, seconds: int) -> str:
    """A copy of a feature folder whose videos keep their first ``seconds`` seconds."""
    os.makedirs(target, exist_ok=True)
    for path in glob.glob(os.path.join(source, '*.npz')):
        arrays = dict(np.load(path))
        arrays['frames_features'] = arrays['frames_features'][:seconds]
        np.savez(os.path.join(target, os.path.basename(path)), **arrays)
    return str(target)


def test_a_test_whose_windows_the_policy_dropped_names_them_in_its_metrics(
        tiny_crosstask, tmp_path):
    """Before: features of 5 s per video under window_policy='authors' dropped 267 of 270 NIV
    test windows; the test scored 3 and exited 0, test_metrics.json said nothing (an INFO
    log line counted them)."""
    from mmaction.registry import DATASETS
    from tool_modules import load_tool
    test = load_tool('test')

    def notes(feature_dir):
        dataset = DATASETS.build(dict(tiny_crosstask['test_dataset'], window_policy='authors',
                                      feature_dir=feature_dir, cache_dir=None))

        class Runner:
            test_dataloader = type('Loader', (), {'dataset': dataset})
        return test.test_notes(Runner()), len(dataset)

    whole, scored = notes(tiny_crosstask['feature_dir'])
    assert whole.get('test_windows', '') == '' and scored == 105  # nothing dropped: no mark
    short, scored = notes(_short_features(tiny_crosstask['feature_dir'], tmp_path / 'f', 20))
    assert scored < 105
    assert short['test_windows'].startswith("window_policy='authors': ")
    assert f'{105 - scored} dropped' in short['test_windows']
    assert 'of 105 windows' in short['test_windows'] and 'not scored' in short['test_windows']
