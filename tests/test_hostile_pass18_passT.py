"""Hostile pass 18 (session 13), passT: training, testing and resuming. Each test failed on
e251d41 (the case id of /tmp/passT_log.md in its name)."""
import re

import pytest

from tiny_configs import option_differences
from tool_modules import load_tool

RUN_CFG = """optim_wrapper = dict(optimizer=dict(type='AdamW', lr=0.0009))
randomness = dict(seed=0)
"""


# ------------------------------------- H13: --overwrite deleted the load_from it was to read
@pytest.mark.parametrize('relative', [False, True])
def test_H13_overwrite_never_deletes_the_load_from_it_reads(tmp_path, monkeypatch, relative):
    """Before: ``train.py --work-dir W --overwrite --cfg-options load_from=W/pretrained.pth``
    deleted W's ``*.pth`` (pretrained.pth with them), then failed: "checkpoint .../
    pretrained.pth does not exist". Now refused naming the file and the key, nothing deleted;
    weights outside the work dir leave --overwrite as it was (the other run's files go)."""
    from mmengine.config import Config
    train = load_tool('train')
    work = tmp_path / 'work'
    work.mkdir()
    for name in ('epoch_6.pth', 'pretrained.pth', 'last_checkpoint'):
        (work / name).write_bytes(b'x')
    monkeypatch.chdir(tmp_path)
    # since pass 19 (H10) --overwrite deletes only the files a run writes: a load_from
    # there is refused when it is one of them (a fine-tuning from the earlier run's epoch_6)
    given = 'work/epoch_6.pth' if relative else str(work / 'epoch_6.pth')
    cfg = Config(dict(work_dir=str(work), load_from=given))
    with pytest.raises(SystemExit, match=re.escape(
            f'--overwrite would delete {work / "epoch_6.pth"}, a file this run reads '
            '(load_from)')):
        train.check_fresh_work_dir(cfg, overwrite=True)
    assert sorted(p.name for p in work.iterdir()) == ['epoch_6.pth', 'last_checkpoint',
                                                      'pretrained.pth']
    given = 'work/pretrained.pth' if relative else str(work / 'pretrained.pth')
    train.check_fresh_work_dir(Config(dict(work_dir=str(work), load_from=given)),
                               overwrite=True)  # the user's weights file: no run's, kept
    assert sorted(p.name for p in work.iterdir()) == ['pretrained.pth']
    (work / 'epoch_6.pth').write_bytes(b'x')
    outside = tmp_path / 'pretrained.pth'
    outside.write_bytes(b'x')
    train.check_fresh_work_dir(Config(dict(work_dir=str(work), load_from=str(outside))),
                               overwrite=True)
    assert sorted(p.name for p in work.iterdir()) == ['pretrained.pth'] and outside.exists()


# --------------------- H67/H68: a training limit above the split's windows marked "SHORTENED"
def test_H67_a_training_limit_that_keeps_every_window_does_not_mark_the_run(tiny_crosstask,
                                                                           tmp_path):
    """Before: ``--cfg-options train_dataloader.dataset.limit=1000`` on 262 training windows
    trained the full run (weights bit-identical) and marked it "SHORTENED RUN (training split
    limit=1000 windows)" in its log, checkpoints and every test's test_metrics.json."""
    import torch
    from tiny_configs import tiny_vpn_config
    config = tiny_vpn_config(tiny_crosstask, tmp_path)
    work = tmp_path / 'work'
    load_tool('train').main([str(config), '--work-dir', str(work), '--no-validate',
                             '--cfg-options', 'train_cfg.max_epochs=1',
                             'train_dataloader.dataset.limit=100000',
                             'train_dataloader.batch_size=131',
                             'train_dataloader.num_batch_per_epoch=2'])
    meta = torch.load(work / 'epoch_1.pth', map_location='cpu', weights_only=False)['meta']
    assert meta['shortened'] == 'max_epochs=1 (config: 500)'  # the limit cut nothing
    log = next(work.glob('*/*.log')).read_text()
    assert 'train_dataloader.dataset.limit=100000 keeps all 262 training windows' in log
    # 2 batches of 131 are the whole split: mmengine's slice cut nothing either
    assert 'train_dataloader.num_batch_per_epoch=2 covers all 262 training windows' in log


def test_H67_the_limit_reason_is_dropped_alone():
    """The other reasons of a shortened run stay; a limit that cuts keeps its mark (the
    runner drops it only when the built split was not limited)."""
    from vpn_plugin.smoke import drop_reason, training_limit_reason
    both = f'max_epochs=2 (config: 500); {training_limit_reason(1000)}'
    assert drop_reason(both, training_limit_reason(1000)) == 'max_epochs=2 (config: 500)'
    assert drop_reason(training_limit_reason(1000), training_limit_reason(1000)) == ''
    assert drop_reason(both, training_limit_reason(10)) == both


# ------------------ H70/H71: selection='unified' given for a run trained with it unset
@pytest.mark.parametrize('purpose', ['test', 'resume'])
def test_H70_H71_selection_unified_is_the_selection_of_a_run_that_left_it_unset(purpose):
    """Before: a test with ``--cfg-options selection=unified`` of a run trained with it unset
    (tools/test.py logs it "model selection: unified") was marked changed_from_training
    "selection: None in training, 'unified' here"; a resume was refused so. 'authors' is
    still another selection (named at a test, refused at a resume)."""
    assert option_differences(RUN_CFG, purpose, change={'selection': 'unified'}) == ([], [])
    assert option_differences(RUN_CFG + "selection = 'unified'\n", purpose) == ([], [])
    other = option_differences(RUN_CFG, purpose, change={'selection': 'authors'})
    where = 'in training' if purpose == 'test' else 'in the run'
    line = f"selection: 'unified' {where}, 'authors' here"
    assert other == (([], [line]) if purpose == 'test' else ([line], []))


# ---------------------------- O13/H65: a test limit above the test windows dropped unsaid
def test_O13_a_limit_above_the_split_is_said(tiny_crosstask, monkeypatch):
    """Before: ``--limit 106`` on 105 test windows scored all of them (true, unmarked) and
    said nothing of the limit asked for."""
    import vpn_plugin.datasets.planning_dataset as module
    from mmaction.registry import DATASETS
    logged = []
    monkeypatch.setattr(module, 'print_log', lambda message, logger=None, **kw:
                        logged.append(message))
    dataset = DATASETS.build(dict(tiny_crosstask['test_dataset'], limit=106))
    assert len(dataset) == 105 and dataset.limited is None
    assert 'PlanningDataset (test, T=3): limit=106 and the split has 105 windows: all are ' \
        'kept (not shortened by the limit)' in logged


# --------------------------------------- E7/H66: --smoke with --limit, one dropped unsaid
def test_E7_smoke_and_limit_together_are_refused(tmp_path):
    """Before: ``test.py --smoke --limit 5`` scored 5 windows, --smoke (32) dropped unsaid."""
    test = load_tool('test')
    args = test.parse_args(['configs/baselines/uniform_emissions_crosstask_t3.py', '--smoke',
                            '--limit', '5', '--work-dir', str(tmp_path)])
    with pytest.raises(SystemExit, match=re.escape(
            "--smoke scores the smoke run's 32 test windows and --limit 5 scores 5: give one "
            'of the two')):
        test.load_config(args)
    assert not any(tmp_path.iterdir())


# ------------------ H69/H72: num_batch_per_epoch past the training split: a raw IndexError
def test_H69_batches_past_the_training_split_are_refused_naming_the_option(tiny_crosstask,
                                                                          tmp_path):
    """Before: ``train_dataloader.num_batch_per_epoch=2`` with batch_size 256 over 262
    training windows: mmengine's slice of 512 windows read past the split, "error: index 269
    is out of bounds for axis 0 with size 262", and the run's log folder and config copy were
    left. Now refused naming the option and the sizes; nothing is left."""
    from tiny_configs import tiny_vpn_config
    config = tiny_vpn_config(tiny_crosstask, tmp_path)
    work = tmp_path / 'work'
    with pytest.raises(SystemExit, match=re.escape(
            'train_dataloader.num_batch_per_epoch asks for 512 windows per epoch (batches x '
            'batch_size=256 x processes) of a training split of 262: mmengine would read past '
            'its end')):
        load_tool('train').main([str(config), '--work-dir', str(work), '--no-validate',
                                 '--cfg-options', 'train_dataloader.num_batch_per_epoch=2'])
    assert not work.exists()


# -------------------------- R4: last_checkpoint naming the work dir: "outside the work dir"
def test_R4_a_record_naming_a_folder_says_so(tmp_path):
    """Before: a last_checkpoint naming the work dir itself was refused as "names '<W>',
    outside the work dir <W>, and the work dir holds no <name>" (false: it is the work dir,
    a folder). A record naming a checkpoint file reads as before."""
    from vpn_plugin.engine.checkpoint import latest_checkpoint_in
    work = tmp_path / 'work'
    work.mkdir()
    (work / 'last_checkpoint').write_text(str(work))
    with pytest.raises(ValueError, match=re.escape(
            f"last_checkpoint names {str(work)!r}, a folder (the work dir itself); expected a "
            'checkpoint file')):
        latest_checkpoint_in(work)
    (work / 'epoch_1.pth').write_bytes(b'x')
    (work / 'last_checkpoint').write_text(str(work / 'epoch_1.pth'))
    assert latest_checkpoint_in(work) == str(work / 'epoch_1.pth')


# ----------------- R31: the same videos in another order: refused naming causes that held
def test_R31_other_training_data_names_the_video_lists_and_their_order():
    """Before: a resume reading the training videos in reverse order was refused (right: the
    sampler draws windows by position) as "its feature folder, annotations or split options
    (val_fraction, subset, limit) differ", none of which did."""
    from vpn_plugin.engine.rank_agreement import TRAIN_DATA_KEY, check_resume_data
    with pytest.raises(ValueError, match=re.escape(
            'video lists (their order too: the sampler draws windows by position)')):
        check_resume_data({'meta': {TRAIN_DATA_KEY: 'a'}}, 'epoch_6.pth', 'b')


# ---------------------- T27: a run refused at its first step kept a log that did not say so
def test_T27_a_run_that_stops_after_it_began_says_why_in_its_log(tiny_crosstask, tmp_path):
    """Before: all-zero ``model.loss_weights`` were refused at the first step (the run had
    begun: its log folder is kept) and the kept log ended at "Checkpoints will be saved to",
    nothing of the refusal. Now its last line names the error."""
    from tiny_configs import tiny_vpn_config
    config = tiny_vpn_config(tiny_crosstask, tmp_path)
    work = tmp_path / 'work'
    with pytest.raises(SystemExit, match='the training loss has no term'):
        load_tool('train').main([str(config), '--work-dir', str(work), '--no-validate',
                                 '--cfg-options', 'train_cfg.max_epochs=1',
                                 'model.loss_weights.state=0', 'model.loss_weights.plan=0',
                                 'model.loss_weights.task=0'])
    last = next(work.glob('*/*.log')).read_text().strip().splitlines()[-1]
    assert 'the run stopped: ValueError: ViterbiPlanNet: the training loss has no term' in last
