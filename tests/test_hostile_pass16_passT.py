"""Session 11, thirteenth hostile pass, passT (training, testing and resuming; the
test-vs-training comparison): each test fails on 72181f1.

R23 / R24 (/tmp/passT_log.md): ``--resume`` (or ``--resume auto``) of a checkpoint that has
trained exactly the config's ``train_cfg.max_epochs`` (a finished run, or one resumed with
max_epochs lowered to its epoch) exited 0 having trained nothing, without a word, its work
dir's config rewritten; one epoch fewer was refused ("nothing would be trained"). Refusing the
equal case would break the protocol's restart of a unit whose training finished before its
marker was written, so the run says it: one WARNING line.
"""
import pytest

from test_hostile_pass13_fix1 import config_on
from tool_modules import load_tool, run_logs


def test_a_complete_checkpoint_says_nothing_is_trained():
    from vpn_plugin.engine.rank_agreement import check_resume_epoch
    checkpoint = {'meta': {'epoch': 2}}
    note = check_resume_epoch(checkpoint, 'run/epoch_2.pth', {'train_cfg': {'max_epochs': 2}})
    assert note.startswith('--resume run/epoch_2.pth: the checkpoint has trained all 2 epochs '
                           "of the config's train_cfg.max_epochs=2: nothing is trained"), note
    assert check_resume_epoch(checkpoint, 'run/epoch_2.pth',
                              {'train_cfg': {'max_epochs': 3}}) == ''
    with pytest.raises(ValueError, match='past the config.s train_cfg.max_epochs=1'):
        check_resume_epoch(checkpoint, 'run/epoch_2.pth', {'train_cfg': {'max_epochs': 1}})


def test_resuming_a_finished_run_logs_that_nothing_is_trained(tiny_crosstask, tmp_path,
                                                              monkeypatch):
    monkeypatch.setenv('LOCAL_RANK', '0')
    train = load_tool('train').main
    config = config_on(tiny_crosstask, tiny_crosstask['feature_dir'], tmp_path / 'a')
    one = ['--no-validate', '--cfg-options', 'train_cfg.max_epochs=1']
    train([str(config), '--work-dir', str(tmp_path / 'run'), *one])
    assert 'nothing is trained' not in run_logs(tmp_path / 'run')
    train([str(config), '--work-dir', str(tmp_path / 'run'), '--resume', *one])
    assert f'--resume {tmp_path / "run" / "epoch_1.pth"}: the checkpoint has trained all 1 ' \
           "epochs of the config's train_cfg.max_epochs=1: nothing is trained (the run is " \
           'complete)' in run_logs(tmp_path / 'run')


@pytest.mark.parametrize('tool', ['train', 'test'])
def test_a_cfg_options_value_with_a_space_is_refused(tool, capsys):
    """T1-T3, H35, H36: mmengine's DictAction removes every space of a --cfg-options value:
    ``feature_dir=/data/a b`` trained (exit 0, no word) on /data/ab, another folder that
    existed; a text-features path with a space was refused naming a path never given."""
    parse = load_tool(tool).parse_args
    with pytest.raises(SystemExit):
        parse(['c.py', '--cfg-options', 'feature_dir=/data/a b'])
    assert "--cfg-options feature_dir=/data/a b: the value holds a space, which mmengine's " \
           '--cfg-options removes (it would read feature_dir=/data/ab)' in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse(['c.py', '--cfg-options', "model.text_embeddings.file='/t e/x.npy'"])
    assert 'it would read model.text_embeddings.file=/te/x.npy' in capsys.readouterr().err
    # spaces mmengine's removal leaves harmless: beside a list's commas and brackets, around
    parsed = parse(['c.py', '--cfg-options', 'a=[1, 2]', 'b=(x, y)', 'c= 3 ', 'd=[ 1 ,2 ]'])
    assert parsed.cfg_options == {'a': [1, 2], 'b': ('x', 'y'), 'c': 3, 'd': [1, 2]}
