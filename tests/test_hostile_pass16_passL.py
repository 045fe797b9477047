"""Thirteenth hostile pass, engineer passL (LLM/VLM baselines, core math, configs before
training): each test fails on 72181f1.

- H3/H2/H1: llm_eval named its side files (outcomes, per-sample dump, summary) by the method
  only, rows by the run: a second seed (or --limit, or a method of the same slug) into one
  --out overwrote the first run's files while its row kept pointing at them;
- H4: a template's short name was looked up in the working directory first: --prompt-set paper
  run from prompts/ sent our prompts, recorded as the paper's (and the reverse from a folder
  holding the paper's transcription: prompts without any data);
- D12: --price-per-1k 1e308 wrote a cost of inf (JSON Infinity) into the row;
- HN3/HN4: draw_negatives read a NaN or 1.5 ratio as "always";
- K5/K31: --cfg-options KEY=a KEY=b kept b without a word; K10: unbalanced brackets ended in
  mmengine's bare AssertionError; KH6: ``_base_ = ('a.py',)`` in mmengine's join() TypeError;
- AN15/AN16: an anchors .npz named .NPZ was read as JSON ("utf-8 codec can't decode"), JSON
  named .npz met numpy's advice to unpickle it;
- P1: a reply {"plan": [..], "plan": [..]} was read as its last plan (json keeps the last key);
- P8: a priced run whose replies reported no token usage printed and recorded a cost of 0.00;
- T6-T8: a local model folder that cannot load ended in transformers' / safetensors' / torch's
  own words (for a file given as --model: torch's advice to unpickle it);
- LIT-c2: data_paths.literal_config (report.py, plots.py, keep_results.py read others' configs
  with it) left ``'{{ fileDirname }}/data'`` as text where mmengine reads the folder's path;
- VF4: a VLM frames folder holding 0001.jpg and 0001.png (two extractions) counted each image
  as a frame: the frame of 6 s was sent for 13 s;
- TP6: tools/test.py with an empty checkpoint argument said "checkpoint  does not exist".
"""
import json
import random

import numpy as np
import pytest

from fake_openai_server import FakeOpenAIServer
from test_llm_tools import echo_anchors, run_tool, tiny_config  # noqa: F401  (a fixture)
from tool_modules import load_tool
from vpn_plugin.protocol.results import read_results


def test_two_seeds_into_one_out_keep_their_own_side_files(tiny_config, tmp_path):
    tool = load_tool('llm_eval')
    with FakeOpenAIServer(echo_anchors) as server:
        run_tool(tool, server, tiny_config, tmp_path, '--seed', '0')
        run_tool(tool, server, tiny_config, tmp_path, '--seed', '1')
        run_tool(tool, server, tiny_config, tmp_path, '--seed', '0')  # a rerun: its own files
    rows = read_results(tmp_path / 'results.jsonl')
    assert sorted(row.seed for row in rows) == [0, 1]
    assert len({row.per_sample_file for row in rows}) == 2
    assert len(list(tmp_path.glob('*.per_sample.json'))) == 2
    for row in rows:  # each row's file holds that run's windows and metrics
        dump = json.loads((tmp_path / row.per_sample_file).read_text())
        assert dump['metrics']['success_rate'] == pytest.approx(row.metrics['success_rate'])
        outcomes = (tmp_path / row.per_sample_file.replace('per_sample.json', 'outcomes.jsonl'))
        summary = (tmp_path / row.per_sample_file.replace('per_sample.json', 'summary.json'))
        assert len(outcomes.read_text().splitlines()) == 1 + row.settings['num_windows']
        assert json.loads(summary.read_text())['settings']['sample_seed'] == row.seed


@pytest.mark.parametrize('prompt_set,other', [('paper', 'ours'), ('ours', 'paper')])
def test_a_template_of_the_same_name_in_the_working_directory_is_not_read(
        tmp_path, monkeypatch, prompt_set, other):
    from vpn_plugin.baselines.llm.prompting import PROMPT_SETS, TEMPLATE_FILES, load_template
    for name in TEMPLATE_FILES.values():  # the cwd holds the other set's files
        (tmp_path / name).write_bytes((PROMPT_SETS[other] / name).read_bytes())
    monkeypatch.chdir(tmp_path)
    for short, name in TEMPLATE_FILES.items():
        template, path = load_template(short, prompt_set)
        assert path == PROMPT_SETS[prompt_set] / name
        assert template.template == (PROMPT_SETS[prompt_set] / name).read_text()
    (tmp_path / 'mine.txt').write_text('$taxonomy')  # a path the user gives is still read
    assert load_template('mine.txt', prompt_set)[1].resolve() == tmp_path / 'mine.txt'


def test_a_price_whose_cost_overflows_is_refused():
    from vpn_plugin.baselines.llm.evaluate import usage_record
    usage = dict.fromkeys(('prompt_tokens', 'completion_tokens', 'cached_prompt_tokens',
                           'cached_completion_tokens'), 0)
    usage.update(prompt_tokens=2014, completion_tokens=48)
    assert usage_record(usage, [2.0])['cost_paid'] == pytest.approx(4.124)
    with pytest.raises(ValueError, match=r'--price-per-1k \[1e\+308\]: the cost of 2014 prompt '
                                         r'and 48 completion tokens overflows'):
        usage_record(usage, [1e308])


@pytest.mark.parametrize('hard,permutation', [(float('nan'), 0.0), (0.5, 1.5), (-0.1, 0.0)])
def test_negative_ratios_outside_zero_one_are_refused(hard, permutation):
    from vpn_plugin.core.negatives import draw_negatives
    with pytest.raises(ValueError, match='expected a finite number >= 0 and <= 1'):
        draw_negatives([0, 1, 2], 0, {0: (0, 1, 2, 3), 1: (4, 5)}, 3, hard, permutation,
                       random.Random(0))


def parse_train(*argv):
    return load_tool('train').parse_args(['configs/vpn_crosstask_t3.py', *argv])


@pytest.mark.parametrize('flags', [['--cfg-options', 'train_cfg.max_epochs=5',
                                    'train_cfg.max_epochs=7'],
                                   ['--cfg-options', 'train_cfg.max_epochs=5',
                                    '--cfg-options', 'train_cfg.max_epochs=7']])
def test_a_key_given_two_values_is_refused(flags, capsys):
    with pytest.raises(SystemExit):
        parse_train(*flags)
    assert ('train_cfg.max_epochs is given twice, train_cfg.max_epochs=5 and '
            'train_cfg.max_epochs=7; expected one value per key') in capsys.readouterr().err
    args = parse_train('--cfg-options', 'train_cfg.max_epochs=5', 'train_cfg.max_epochs=5')
    assert args.cfg_options == {'train_cfg.max_epochs': 5}  # the same value twice: no conflict


def test_unbalanced_brackets_are_named(capsys):
    with pytest.raises(SystemExit):
        parse_train('--cfg-options', 'train_cfg.max_epochs=5', 'model.loss_weights=[1,2')
    err = capsys.readouterr().err
    assert '--cfg-options model.loss_weights=[1,2: Imbalanced brackets' in err
    assert 'every bracket closed' in err


def test_a_base_tuple_is_named(tmp_path):
    from vpn_plugin.data_paths import load_config
    (tmp_path / 'base.py').write_text('x = 1\n')
    (tmp_path / 'cfg.py').write_text("_base_ = ('base.py',)\n")
    with pytest.raises(ValueError, match=r"cfg.py: line 1: _base_ = \('base.py',\); expected the "
                                         'file name of a config, or a list of them'):
        load_config(tmp_path / 'cfg.py')
    (tmp_path / 'cfg.py').write_text("_base_ = ['base.py']\n")
    assert load_config(tmp_path / 'cfg.py').x == 1


def test_an_anchors_archive_is_read_whatever_its_suffix_case(tmp_path):
    from vpn_plugin.baselines.llm.anchors import load_anchor_predictions
    np.savez(tmp_path / 'a.npz', first=np.array([1, 2]), last=np.array([3, 4]))
    (tmp_path / 'a.npz').rename(tmp_path / 'a.NPZ')
    first, last = load_anchor_predictions(tmp_path / 'a.NPZ', 2, 5)
    assert first.tolist() == [1, 2] and last.tolist() == [3, 4]
    (tmp_path / 'b.npz').write_text(json.dumps({'first': [1, 2], 'last': [3, 4]}))
    with pytest.raises(ValueError, match=r'b.npz: cannot read the step-model predictions \(named '
                                         r'.npz, it is no .npz \(zip\) archive\)') as error:
        load_anchor_predictions(tmp_path / 'b.npz', 2, 5)
    assert 'pickle' not in str(error.value)


def test_a_reply_giving_the_plan_key_twice_is_not_read_as_its_last_plan():
    from vpn_plugin.baselines.llm.parsing import ActionMatcher, ReplyParseError, parse_plan
    matcher = ActionMatcher(['a', 'b', 'c', 'd'], [0, 1, 2, 3])
    with pytest.raises(ReplyParseError, match=r"reply: the key 'plan' is given twice in one "
                       r"object: \[3, 3, 3\] and \[0, 1, 2\]"):
        parse_plan('{"plan": [3, 3, 3], "plan": [0, 1, 2]}', matcher, 3)
    assert parse_plan('{"plan": [0, 1, 2], "plan": [0, 1, 2]}', matcher, 3) == [0, 1, 2]


def test_a_priced_run_with_replies_of_unknown_usage_records_no_cost():
    from vpn_plugin.baselines.llm.evaluate import cost_summary, usage_record
    usage = dict.fromkeys(('prompt_tokens', 'completion_tokens', 'cached_prompt_tokens',
                           'cached_completion_tokens'), 0)
    record = usage_record(dict(usage, replies_without_usage=12), [1.0])
    assert 'cost_paid' not in record and 'cost_of_answers' not in record
    assert cost_summary(record).startswith('cost unknown: 12 replies reported no token usage')
    record = usage_record(dict(usage, prompt_tokens=1000, replies_without_usage=0), [1.0])
    assert record['cost_paid'] == 1.0 and cost_summary(record).startswith('cost paid')


def test_a_local_model_that_cannot_load_is_named(tmp_path):
    from test_llm_local import write_tiny_chat_model
    from vpn_plugin.baselines.llm.backends import TransformersChatBackend
    (tmp_path / 'config.json').write_text('{}')
    with pytest.raises(ValueError, match=f'transformers model {tmp_path}/config.json: a file; '
                                         'expected a local model folder'):
        TransformersChatBackend(str(tmp_path / 'config.json'))
    write_tiny_chat_model(tmp_path / 'model')
    (tmp_path / 'model' / 'tokenizer.json').unlink()
    with pytest.raises(ValueError, match=f'transformers model {tmp_path}/model: cannot be loaded '
                                         '.*expected a complete local model folder'):
        TransformersChatBackend(str(tmp_path / 'model'))


def test_the_literal_reader_fills_mmengine_predefined_variables(tmp_path):
    from mmengine.config import Config
    from vpn_plugin.data_paths import literal_config
    (tmp_path / 'base.py').write_text("d = dict(a=1)\n")
    (tmp_path / 'cfg.py').write_text("_base_ = ['base.py']\nhere = '{{ fileDirname }}/data'\n"
                                     "name = '{{fileBasenameNoExtension}}'\n")
    read = literal_config(tmp_path / 'cfg.py')
    assert read['here'] == f'{tmp_path}/data' and read['name'] == 'cfg'
    assert read == Config.fromfile(tmp_path / 'cfg.py').to_dict()


def test_two_images_of_one_frame_are_refused_not_counted_twice(tmp_path):
    import cv2
    from vpn_plugin.baselines.llm.frames import read_clip_frames
    for i in range(1, 31):
        cv2.imwrite(str(tmp_path / f'{i:04d}.jpg'), np.full((8, 8, 3), i * 8, np.uint8))
    (frame,) = read_clip_frames(tmp_path, 12, 14, 1)  # t = 13 s: the 14th frame
    assert round(cv2.imdecode(np.frombuffer(frame, np.uint8), 1).mean() / 8) == 14
    cv2.imwrite(str(tmp_path / '0001.png'), np.full((8, 8, 3), 8, np.uint8))
    with pytest.raises(ValueError, match='0001.jpg and 0001.png are two images of one frame'):
        read_clip_frames(tmp_path, 12, 14, 1)


def test_an_empty_checkpoint_path_is_named(capsys):
    with pytest.raises(SystemExit):
        load_tool('test').parse_args(['configs/vpn_crosstask_t3.py', ''])
    assert "argument checkpoint: '' is an empty path" in capsys.readouterr().err
    args = load_tool('test').parse_args(['configs/vpn_crosstask_t3.py'])
    assert args.checkpoint is None  # leaving it out is still allowed
