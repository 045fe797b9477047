"""Issue 37, session 9: cases the lead fixed between the phases."""
from pathlib import Path

import pytest

from vpn_plugin.data_paths import load_config

REPO = Path(__file__).resolve().parents[1]


def test_feature_dir_flag_refused_when_the_datasets_hold_their_own_absolute_folder(tmp_path):
    """The base's ``paths = dict(feature_dir='{feature_dir}')`` helper followed the flag, so
    the move counted as used while every dataset kept its own absolute folder: the test ran
    on the config's features, exit 0 (fix1's note)."""
    own = tmp_path / 'own_features'
    config = tmp_path / 'absolute.py'
    config.write_text(f"_base_ = [{str(REPO / 'configs/vpn_crosstask_t3.py')!r}]\n" + ''.join(
        f"{split}_dataloader = dict(dataset=dict(feature_dir={str(own)!r}))\n"
        for split in ('train', 'val', 'test')))
    with pytest.raises(ValueError, match=r'feature_dir was set to .*moved.*no path of the '
                       r'config is built from it'):
        load_config(config, feature_dir=str(tmp_path / 'moved'))
    moved = load_config(REPO / 'configs/vpn_crosstask_t3.py', feature_dir=str(tmp_path / 'm'))
    assert moved.test_dataloader.dataset.feature_dir == str(tmp_path / 'm')
