"""Nineteenth hostile pass, passT (training, testing, resuming; start commit 84e3204): each test
fails on 84e3204 where it names a case of /tmp/passT_log.md, or guards a valid input."""
import pytest

from vpn_plugin.data_paths import REPO_ROOT, load_config, resolve_paths

VPN_T3 = REPO_ROOT / 'configs' / 'vpn_crosstask_t3.py'
SPLITS = ('train', 'val', 'test')


def literal_config(tmp_path, **variables):
    """A child of vpn_crosstask_t3.py giving ``variables`` (data_root, ...) as absolute
    literals, as a user's own config does."""
    config = tmp_path / 'mine.py'
    config.write_text(f"_base_ = [{str(VPN_T3)!r}]\n"
                      + ''.join(f'{name} = {str(value)!r}\n' for name, value in variables.items()))
    return config


def dataset_values(cfg, key):
    return {cfg[f'{split}_dataloader'].dataset[key] for split in SPLITS}


@pytest.mark.parametrize('flag', ['data_root', 'feature_dir'])
def test_a_location_below_the_configs_own_is_moved_once(tmp_path, flag):
    """passT H05, H06: --data-root ROOT/sub (--feature-dir FEATURES/sub), a folder inside the
    config's literal location, was moved again by each of resolve_paths' calls: the test read
    ROOT/sub/sub/sub/crosstask and refused a valid data root naming a path nobody gave."""
    config = literal_config(tmp_path, data_root=tmp_path / 'root', feature_dir=tmp_path / 'feats')
    below = tmp_path / ('root' if flag == 'data_root' else 'feats') / 'sub'
    cfg = load_config(config, **{flag: str(below)})
    expected = str(below / 'crosstask') if flag == 'data_root' else str(below)
    assert dataset_values(cfg, flag) == {expected}
    if flag == 'data_root':
        assert cfg.model.text_embeddings.file.startswith(str(below / 'crosstask') + '/')
    resolve_paths(cfg)  # PlanningRunner.from_cfg resolves the loaded config again
    assert dataset_values(cfg, flag) == {expected}
    by_option = load_config(config, {flag: str(below)})
    assert dataset_values(by_option, flag) == {expected}


def test_a_location_moved_elsewhere_or_up_still_moves():
    """Guards of the rule above: a root beside or above the config's moves as before."""
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory() as folder:
        tmp_path = Path(folder)
        config = literal_config(tmp_path, data_root=tmp_path / 'a' / 'root')
        for root in (tmp_path / 'b', tmp_path / 'a', tmp_path / 'a' / 'root2'):
            cfg = resolve_paths(load_config(config, data_root=str(root)))
            assert dataset_values(cfg, 'data_root') == {str(root / 'crosstask')}


def test_a_data_root_whose_dataset_folder_is_a_link_is_accepted(tmp_path):
    """passT H07: --data-root ROOT where ROOT/crosstask is a symbolic link to the data (the
    usual data/crosstask -> /big/disk layout) was refused as "not built from the variable
    data_root" (the link's target compared with the root's)."""
    (tmp_path / 'disk' / 'crosstask').mkdir(parents=True)
    (tmp_path / 'root').mkdir()
    (tmp_path / 'root' / 'crosstask').symlink_to(tmp_path / 'disk' / 'crosstask')
    config = literal_config(tmp_path, data_root=tmp_path / 'elsewhere')
    cfg = load_config(config, data_root=str(tmp_path / 'root'))
    assert dataset_values(cfg, 'data_root') == {str(tmp_path / 'root' / 'crosstask')}
    fixed = tmp_path / 'fixed.py'  # a dataset kept at an absolute path of its own is refused
    fixed.write_text(f"_base_ = [{str(config)!r}]\n" + ''.join(
        f"{split}_dataloader = dict(dataset=dict(data_root={str(tmp_path / 'disk')!r}))\n"
        for split in SPLITS))
    with pytest.raises(ValueError, match=r"train_dataloader.dataset.data_root='.*/disk' is not "
                                         "built from the variable data_root"):
        load_config(fixed, data_root=str(tmp_path / 'root'))


def _resume_records(work_dir, caplog) -> tuple:
    """(the checkpoint ``latest_checkpoint_in`` resumes ``work_dir`` from, its warnings)."""
    import logging
    from vpn_plugin.engine.checkpoint import latest_checkpoint_in
    logger = logging.getLogger('passT22_resume')
    with caplog.at_level(logging.WARNING, logger='passT22_resume'):
        found = latest_checkpoint_in(work_dir, logger=logger)
    return found, [r.getMessage() for r in caplog.records if r.name == 'passT22_resume']


@pytest.mark.parametrize('absolute', [False, True])
def test_a_work_dir_of_links_to_another_runs_checkpoints_resumes_without_a_caveat(
        tmp_path, caplog, absolute):
    """passT H08/H09: a work dir made of symbolic links to another run's checkpoints (cp -s,
    ln -s), whose last_checkpoint names its own epoch_2.pth, logged "names .../epoch_2.pth,
    outside the work dir (copied or moved from another run): using .../epoch_2.pth" (the
    link's target was compared); the resume was bit-identical."""
    import os
    other, work_dir = tmp_path / 'R', tmp_path / 'linked'
    other.mkdir()
    work_dir.mkdir()
    (other / 'epoch_2.pth').write_bytes(b'x')
    (work_dir / 'epoch_2.pth').symlink_to(other / 'epoch_2.pth')
    (work_dir / 'last_checkpoint').write_text(
        str(work_dir / 'epoch_2.pth') if absolute else 'epoch_2.pth')
    found, warnings = _resume_records(work_dir, caplog)
    assert found == str(work_dir / 'epoch_2.pth') and warnings == []
    assert os.path.samefile(found, other / 'epoch_2.pth')


def test_a_checkpoint_under_a_linked_folder_stays_outside(tmp_path, caplog):
    """Guard: a record naming a file under a folder of the work dir that is a link to another
    run's folder lies outside (the run would write and delete there): still named, and the
    work dir's own file of that name is used."""
    other, work_dir = tmp_path / 'R', tmp_path / 'copy'
    other.mkdir()
    work_dir.mkdir()
    (other / 'epoch_2.pth').write_bytes(b'x')
    (work_dir / 'epoch_2.pth').write_bytes(b'x')
    (work_dir / 'old').symlink_to(other)
    (work_dir / 'last_checkpoint').write_text(str(work_dir / 'old' / 'epoch_2.pth'))
    found, warnings = _resume_records(work_dir, caplog)
    assert found == str(work_dir / 'epoch_2.pth')
    assert len(warnings) == 1 and 'outside the work dir' in warnings[0]
