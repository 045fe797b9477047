"""A test says when the EMA weights it scores are not the trained ones its config's EMA hook
asks for (issue 38 leftover): a checkpoint written before the EMA first took the model, or one
without EMA state. ``engine.ema.scored_ema_note`` decides; ``tools/test.py`` (test_cefito.py
runs it on a real short run) and the protocol's rows carry its mark."""
import pytest

import vpn_plugin.mm  # noqa: F401  (registration)
from vpn_plugin.engine.cefito_training import CEFITOEMAHook
from vpn_plugin.engine.ema import scored_ema_note
from vpn_plugin.engine.pdpp_training import PDPPEMAHook


def checkpoint(steps: int, ema=True, schedule=None) -> dict:
    """What mmengine saves after ``steps`` optimiser steps (tensors are not read here)."""
    meta = dict(epoch=1, iter=steps)
    if schedule:
        meta['ema_schedule'] = schedule
    return dict(state_dict={}, meta=meta, **(dict(ema_state_dict={}) if ema else {}))


@pytest.mark.parametrize('hook, steps, untrained', [
    (CEFITOEMAHook(start_step=200, update_every=100), 99, True),  # first copy after step 100
    (CEFITOEMAHook(start_step=200, update_every=100), 100, False),  # copied: the trained model
    (CEFITOEMAHook(start_step=200, update_every=100), 5000, False),  # averaged
    (PDPPEMAHook(start_step=400, interval=10), 1, False),  # PDPP copies after step 1
    (PDPPEMAHook(start_step=400, interval=10), 0, True)])
def test_ema_weights_that_never_took_the_model_are_named(hook, steps, untrained):
    mark, warning = scored_ema_note(hook, checkpoint(steps), 'run/epoch_1.pth')
    if not untrained:
        assert (mark, warning) == ('', '')  # no wolf cried for a trained EMA
        return
    name = type(hook).__name__
    assert mark.startswith(f'EMA weights untrained ({name}: {steps} training steps, fewer than')
    assert warning.startswith(f'checkpoint run/epoch_1.pth: {name}: {steps} training steps')
    assert 'are the initial weights' in warning


def test_the_schedule_that_wrote_the_checkpoint_decides_not_the_test_config():
    """Trained 50 steps with update_every=100 (never took the model), tested under a config
    whose EMA copies every 10 steps: the checkpoint's recorded schedule is the truth."""
    written = dict(hook='CEFITOEMAHook', first_copy=100, every=100, averages_from=200)
    tested = CEFITOEMAHook(start_step=400, update_every=10)
    mark, _ = scored_ema_note(tested, checkpoint(50, schedule=written), 'c.pth')
    assert 'fewer than the 100 after which the EMA first takes the model' in mark
    assert scored_ema_note(tested, checkpoint(50), 'c.pth') == ('', '')  # nothing recorded


def test_a_checkpoint_without_ema_state_tested_under_an_ema_config_is_named():
    mark, warning = scored_ema_note(PDPPEMAHook(), checkpoint(6500, ema=False), 'plain.pth')
    assert mark == 'no EMA weights (PDPPEMAHook: checkpoint without ema_state_dict)'
    assert 'checkpoint plain.pth holds no ema_state_dict' in warning
    assert 'the raw model, not an EMA of it' in warning
    # a config without an EMA asks for none
    assert scored_ema_note(None, checkpoint(6500, ema=False), 'plain.pth') == ('', '')


def test_every_checkpoint_records_the_schedule_of_its_ema():
    hook = CEFITOEMAHook(start_step=200, update_every=100)

    class Averaged:  # mmengine's EMAHook saves its averaged model's state
        def state_dict(self):
            return {}
    hook.ema_model = Averaged()
    saved = dict(state_dict={}, meta=dict(iter=3))
    hook.before_save_checkpoint(None, saved)
    assert saved['meta']['ema_schedule'] == dict(hook='CEFITOEMAHook', first_copy=100,
                                                 every=100, averages_from=200)


def test_a_protocol_row_is_marked_when_its_ema_weights_are_untrained(tmp_path, monkeypatch):
    from pathlib import Path
    from vpn_plugin.protocol.results import read_results
    from vpn_plugin.protocol.runner import (ProtocolRunner, Tested, Trained, expand_units,
                                            load_protocol)
    import vpn_plugin.protocol.runner as runner_module

    class Untrained(ProtocolRunner):
        def train(self, unit, work_dir):
            return Trained('ckpt.pth', 1, shortened='max_epochs=1 (config: 130)')

        def test(self, unit, spec, checkpoint, test_dir):
            return Tested(metrics={'success_rate': 1.0}, params=1, limited='',
                          features=dict(kind='synthetic'), ema_mark='EMA weights untrained (x)')

    repo = Path(__file__).resolve().parents[1]
    protocol = load_protocol(str(repo / 'configs/protocol/standard_niv.py'))
    units = [unit for unit in expand_units(protocol, seeds=[0], horizons=[3]) if unit.train][:1]
    monkeypatch.setattr(runner_module, 'check_units', len)  # stand-ins build no config
    Untrained(protocol, tmp_path).run(units)
    (row, *_) = read_results(tmp_path / 'standard_niv' / 'results.jsonl')
    assert row.shortened == 'max_epochs=1 (config: 130); EMA weights untrained (x)'


# ------------------------------------------------------- each shared tensor once (KEPP smoke)
def test_tensors_the_ema_shares_with_the_model_are_saved_once_and_read_back(tmp_path):
    import torch
    from vpn_plugin.engine.checkpoint import (SHARED_EMA_KEY, read_checkpoint,
                                              share_ema_tensors)
    frozen, trained, average = torch.randn(64, 64), torch.randn(64, 64), torch.randn(64, 64)
    saved = dict(state_dict=dict(step=frozen.clone(), plan=average.clone(),
                                 ready=torch.tensor(True)),
                 ema_state_dict=dict(steps=torch.tensor(3), **{
                     'module.step': frozen.clone(), 'module.plan': trained.clone(),
                     'module.ready': torch.tensor(True)}))
    expected = {key: value.clone() for key, value in saved['ema_state_dict'].items()}
    share_ema_tensors(saved)
    assert saved[SHARED_EMA_KEY] == ['step', 'ready']
    assert sorted(saved['ema_state_dict']) == ['module.plan', 'steps']
    torch.save(saved, tmp_path / 'c.pth')
    torch.save(dict(saved, ema_state_dict=expected), tmp_path / 'whole.pth')
    assert (tmp_path / 'c.pth').stat().st_size < \
        (tmp_path / 'whole.pth').stat().st_size - 64 * 64 * 4  # the frozen tensor once
    read = read_checkpoint(tmp_path / 'c.pth')
    assert SHARED_EMA_KEY not in read and sorted(read['ema_state_dict']) == sorted(expected)
    for key, value in expected.items():
        assert torch.equal(read['ema_state_dict'][key], value), key
    read = torch.load(tmp_path / 'c.pth', weights_only=False)
    read[SHARED_EMA_KEY] = ['no_such_key']
    torch.save(read, tmp_path / 'bad.pth')
    with pytest.raises(ValueError, match=r'bad.pth: ema_state_dict_shared must list keys of '
                       'its state_dict'):
        read_checkpoint(tmp_path / 'bad.pth')


@pytest.mark.usefixtures('single_thread')
def test_a_run_resumed_from_a_checkpoint_of_shared_ema_tensors_is_bit_identical(
        tiny_crosstask, tmp_path):
    """PDPP's EMA copies the model at step 3 and averages from step 4 on: the checkpoint after
    epoch 1 (step 3) holds each tensor once; a run resumed from it ends with the weights and
    EMA of the uninterrupted run, bit for bit."""
    import shutil
    import torch
    from tiny_configs import write_tiny_pdpp_ema_config
    from tool_modules import load_tool
    from vpn_plugin.engine.checkpoint import SHARED_EMA_KEY
    config = write_tiny_pdpp_ema_config(tmp_path, tiny_crosstask)
    train = load_tool('train').main
    train([str(config), '--work-dir', str(tmp_path / 'whole')])
    first = torch.load(tmp_path / 'whole/epoch_1.pth', weights_only=False)
    trainable = {key for key in first['state_dict'] if key.startswith('diffusion.unet.')}
    assert trainable <= set(first[SHARED_EMA_KEY])  # the EMA copied the model at step 3
    assert not any(key.startswith('module.') for key in first['ema_state_dict'])
    (tmp_path / 'resumed').mkdir()
    shutil.copy(tmp_path / 'whole/epoch_1.pth', tmp_path / 'resumed/epoch_1.pth')
    train([str(config), '--work-dir', str(tmp_path / 'resumed'),
           '--resume', str(tmp_path / 'resumed/epoch_1.pth')])
    from vpn_plugin.engine.checkpoint import RUN_KEY, read_checkpoint
    whole, resumed = (read_checkpoint(tmp_path / f'{run}/epoch_2.pth')
                      for run in ('whole', 'resumed'))
    for part in ('state_dict', 'ema_state_dict'):
        assert sorted(whole[part]) == sorted(resumed[part])
        for key, value in whole[part].items():  # tensors, and the run id a resume keeps
            same = (torch.equal(value, resumed[part][key]) if torch.is_tensor(value)
                    else value == resumed[part][key])
            assert same, f'{part}[{key}]'
    assert whole['ema_state_dict'][RUN_KEY] == resumed['meta'][RUN_KEY]


def test_a_non_persistent_buffer_a_pre_stage_filled_is_averaged_after_the_sync():
    """KEPP's ``train_endpoints`` (non-persistent, empty until the step model fills it): the
    EMA copy made before the pre-stage must take its shape, else mmengine's averaging, which
    copies every buffer, stopped every KEPP training at its first averaging step."""
    import torch
    from mmengine.model import ExponentialMovingAverage
    from vpn_plugin.engine.ema import copy_frozen_and_buffers
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    model[0].register_buffer('endpoints', torch.zeros(0, 2, dtype=torch.long), persistent=False)
    ema = ExponentialMovingAverage(model, momentum=0.005, update_buffers=False)
    model[0].endpoints = torch.arange(10).view(5, 2)  # what the pre-stage writes
    copy_frozen_and_buffers(ema.module, model)
    for _ in range(3):
        ema.update_parameters(model)
    assert torch.equal(ema.module[0].endpoints, model[0].endpoints)
    assert 'endpoints' not in ema.module[0].state_dict()  # still in no checkpoint


# ------------------------------------------------------- the EMA state is its own run's
@pytest.mark.usefixtures('single_thread')
def test_a_checkpoint_with_another_runs_ema_state_is_refused_by_resume_and_test(
        tiny_crosstask, tmp_path):
    """Two trainings of one config and seed; run A's checkpoint given run B's EMA state (the
    shared form PDPP writes: ema_state_dict and its list of shared tensors): every tensor
    fits, so before the run id it was resumed and tested without a word. Without any EMA
    state, a resume says what it then does (not mmengine's "will make a copy of state_dict
    as the initial ema_state_dict")."""
    import torch
    from tiny_configs import write_tiny_pdpp_ema_config
    from tool_modules import load_tool
    from vpn_plugin.engine.checkpoint import RUN_KEY, SHARED_EMA_KEY
    config = write_tiny_pdpp_ema_config(tmp_path, tiny_crosstask)
    train, test = load_tool('train').main, load_tool('test').main
    for run in ('a', 'b'):
        train([str(config), '--work-dir', str(tmp_path / run),
               '--cfg-options', 'train_cfg.max_epochs=1'])
    a, b = (torch.load(tmp_path / run / 'epoch_1.pth', weights_only=False) for run in 'ab')
    assert len(a['meta'][RUN_KEY]) == 32 and a['ema_state_dict'][RUN_KEY] == a['meta'][RUN_KEY]
    assert b['meta'][RUN_KEY] != a['meta'][RUN_KEY]  # same seed, another run
    torch.save(dict(a, ema_state_dict=b['ema_state_dict'], **{
        SHARED_EMA_KEY: b[SHARED_EMA_KEY]}), tmp_path / 'spliced.pth')
    refusal = (rf"spliced.pth: its ema_state_dict was written by training run "
               rf"{b['meta'][RUN_KEY]}, its weights and meta by run {a['meta'][RUN_KEY]}: an "
               r"EMA state taken from another checkpoint")
    with pytest.raises(SystemExit, match=refusal):
        train([str(config), '--work-dir', str(tmp_path / 'resumed'),
               '--resume', str(tmp_path / 'spliced.pth')])
    with pytest.raises(SystemExit, match=refusal):
        test([str(config), str(tmp_path / 'spliced.pth'), '--work-dir', str(tmp_path / 't')])


@pytest.mark.parametrize('hook, says', [
    (PDPPEMAHook(decay=0.9, start_step=20, interval=10), 'from step 11 on its updates go '
     "through mmengine's averaged model, whose update count starts again at 0: the first of "
     'them after the resume copies the model instead of averaging, and it averages every '
     '10th update counted from there'),
    (CEFITOEMAHook(decay=0.9, start_step=20, update_every=10), 'its schedule follows the '
     'training step (a copy of the model every 10 steps before step 20, an average every 10 '
     'steps from it), so it goes on from there')])
def test_a_resume_without_ema_state_says_what_it_does(hook, says, monkeypatch):
    """mmengine said "There is no ema_state_dict ... will make a copy of state_dict as the
    initial ema_state_dict", not that the model then trains on from the EMA weights."""
    import torch
    from vpn_plugin.engine import ema

    class Runner:
        model, _resume, _load_from = torch.nn.Linear(2, 2), True, 'run/epoch_3.pth'
    logged = []
    monkeypatch.setattr(ema, 'print_log', lambda text, **kwargs: logged.append(text))
    hook.before_run(Runner())
    weights = {key: value + 1 for key, value in Runner.model.state_dict().items()}
    hook.after_load_checkpoint(Runner(), dict(state_dict=weights))
    assert logged == [
        f'{type(hook).__name__}: resuming from run/epoch_3.pth, which holds no ema_state_dict '
        "(the trained model's own weights and the EMA's update count): the model trains on "
        'from its state_dict, which holds the EMA weights when a run with an EMA wrote it (the '
        'trained, un-averaged weights are not in the file), and the EMA restarts as a copy of '
        f'the same weights; {says}. The run will not match an uninterrupted one']
    for key, value in hook.ema_model.module.state_dict().items():
        assert torch.equal(value, weights[key])


def test_an_ema_state_is_tied_to_its_run_or_logged_as_untied(tmp_path, caplog):
    """``read_checkpoint``: the EMA's run id equal to the meta's is read; one missing on
    either side is refused; none on both (a checkpoint of an earlier version) is read and
    logged as not tied."""
    import logging
    import re
    import torch
    from vpn_plugin.engine.checkpoint import RUN_KEY, read_checkpoint
    weight = torch.ones(2)

    def saved(name, meta_id, ema_id):
        ema = {'steps': torch.tensor(1), 'module.w': weight + 1}
        if ema_id:
            ema[RUN_KEY] = ema_id
        torch.save(dict(meta={RUN_KEY: meta_id} if meta_id else {}, state_dict=dict(w=weight),
                        ema_state_dict=ema), tmp_path / name)
        return tmp_path / name
    assert read_checkpoint(saved('tied.pth', 'r1', 'r1'))['ema_state_dict'][RUN_KEY] == 'r1'
    for name, meta_id, ema_id in (('other.pth', 'r1', 'r2'), ('no_ema_id.pth', 'r1', None),
                                  ('no_meta_id.pth', None, 'r2')):
        theirs, ours = (re.escape(run or '(none recorded)') for run in (ema_id, meta_id))
        with pytest.raises(ValueError, match=rf'{name}: its ema_state_dict was written by '
                                             rf'training run {theirs}, its weights and meta by '
                                             rf'run {ours}'):
            read_checkpoint(saved(name, meta_id, ema_id))
    logger = logging.getLogger('ema_run_test')
    with caplog.at_level(logging.INFO, logger='ema_run_test'):
        read_checkpoint(saved('old.pth', None, None), logger=logger)
    assert 'old.pth records no run id' in caplog.text
    assert 'could not be tied to the run that wrote its weights' in caplog.text
