"""Seventeenth hostile pass, engineer passL (LLM/VLM baselines, core math, configs before
training): each test fails on bc5f1b3 (checked in a worktree of it) unless it says it guards
a valid input against a false refusal. Log: /tmp/passL_log.md.

- PP1/PP2: with the paper's prompts ("Return only the completed sequences in a JSON format")
  one sequence in a list (``[[4, 4, 7]]``, ``{"completed_sequences": [[4, 4, 7]]}``) was
  unparseable: every correct answer scored as a failure.
- PP3/PP5: the incomplete sequence echoed beside the answer (a list holding the placeholder
  -1, bare or in the answer object) made the answer ambiguous: unparseable.
- K42: ``train.py --no-validate --cfg-options val_cfg=None`` was refused as contradicting.
- CM9: at a small temperature the DVL's dense-fallback note gave transitions / temperature as
  the transitions' depth and guessed "a log(p + eps) floor" as the cause.
- RP34: a cost of 1.2e28 was printed "11999999999999999059939033088.00" (float noise).
- K51/K54/K55/K56/K57: a YAML config's ``0x7``, ``010`` (8), ``1_0``, ``1:20`` (80) were read
  as numbers without a word, ``1e-3`` as text with a message not saying why; K60/K61: a key
  given twice in a JSON / YAML config kept the last silently.
- NC10/NC13: ``llm_eval --temperature -0.0`` and ``--base-url http://h/v1/`` made another
  results row of the same run (and -0.0 re-asked every cached prompt): the report then refused
  the two rows as different settings.
"""
import argparse
import json

import pytest
import torch

from tool_modules import load_tool


def _matcher():
    from vpn_plugin.baselines.llm.parsing import ActionMatcher
    return ActionMatcher([f'action {i}' for i in range(8)], list(range(8)))


@pytest.mark.parametrize('reply', [
    '{"completed_sequences": [[4, 4, 7]]}',
    '[[4, 4, 7]]',
    'Incomplete: [4, -1, 7]\nCompleted: [4, 4, 7]',
    '{"incomplete_sequence": [4, -1, 7], "completed_sequence": [4, 4, 7]}',
    '{"incomplete_sequence": [4, "-1", 7], "completed_sequence": [4, 4, 7]}',
])
def test_the_paper_prompts_plain_answers_are_read(reply):
    from vpn_plugin.baselines.llm.parsing import parse_plan
    assert parse_plan(reply, _matcher(), 3, any_key=True) == [4, 4, 7]


def test_the_echo_and_nested_lists_keep_their_old_reading_where_nothing_else_is_there():
    """Guards (pass on bc5f1b3 too): an echo alone is read as it is (out of the taxonomy),
    two sequences stay ambiguous, our prompts' ``[[...]]`` is a plan of one action."""
    from vpn_plugin.baselines.llm.parsing import OutOfTaxonomyError, ReplyParseError, parse_plan
    with pytest.raises(OutOfTaxonomyError, match='action id -1'):
        parse_plan('[4, -1, 7]', _matcher(), 3, any_key=True)
    with pytest.raises(ReplyParseError, match='2 actions, expected 3'):
        parse_plan('[[4, 4, 7], [4, 5, 7]]', _matcher(), 3, any_key=True)
    with pytest.raises(ReplyParseError, match='1 actions, expected 3'):
        parse_plan('[[4, 4, 7]]', _matcher(), 3)
    with pytest.raises(ReplyParseError, match='2 different lists'):
        parse_plan('[4, 5, 7] or [4, 4, 7]', _matcher(), 3, any_key=True)


def _no_validate_args(options):
    return argparse.Namespace(cfg_options=options, no_validate=True, deterministic=False,
                              auto_scale_lr=False, diff_rank_seed=False)


def test_no_validate_with_the_validation_keys_set_to_none_is_accepted():
    train = load_tool('train')
    train.check_switches_agree(_no_validate_args({'val_cfg': None, 'val_dataloader': None,
                                                  'default_hooks.checkpoint.save_best': None}))
    with pytest.raises(ValueError, match='--no-validate drops the validation loop'):  # guard
        train.check_switches_agree(_no_validate_args({'val_cfg': {'type': 'ValLoop'}}))


def test_the_dense_fallback_note_names_the_temperature(caplog, monkeypatch):
    from vpn_plugin.core import dvl
    monkeypatch.setattr(dvl, '_fallback_logged', False)
    # column 1: best 0.5, lowest 0.1: ln 5 = 1.6 nats deep (1609.4 at temperature 0.001)
    probs = torch.tensor([[0.9, 0.1], [0.5, 0.5]], dtype=torch.float64)
    with caplog.at_level('WARNING', logger=dvl.__name__):
        dvl.differentiable_viterbi(torch.zeros(1, 3, 2, dtype=torch.float64), probs.log(),
                                   temperature=1e-3)
    message = caplog.records[0].getMessage()
    assert "reach 1.6 nats below their column's best (1609.4 after dividing by the " \
           'temperature 0.001)' in message and 'or the small temperature' in message


def test_a_huge_cost_is_printed_without_float_noise():
    from vpn_plugin.outputs import money_text
    assert money_text(1.2e28) == '1.2e+28'
    assert (money_text(11.556), money_text(0.00033), money_text(9999999999999.99)) == \
        ('11.56', '0.00033', '9999999999999.99')  # guards: as before


@pytest.mark.parametrize('text, message', [
    ('max_epochs: 010', "line 3: 010 is read by YAML 1.1 as the int 8; expected a number in "
                        'plain decimal digits'),
    ('max_epochs: 0x7', 'line 3: 0x7 is read by YAML 1.1 as the int 7'),
    ('max_epochs: 1_0', 'line 3: 1_0 is read by YAML 1.1 as the int 10'),
    ('max_epochs: 1:20', 'line 3: 1:20 is read by YAML 1.1 as the int 80'),
    ('lr: 1e-3', "line 3: 1e-3 is read by YAML 1.1 as the text '1e-3', not a number (an "
                 'exponent needs a dot before it there: write 0.001'),
    ('max_epochs: 7\n  max_epochs: 9', "the key 'max_epochs' is given twice in one mapping"),
])
def test_yaml_numbers_in_other_forms_are_refused(tmp_path, text, message):
    from vpn_plugin.data_paths import check_mapping_file
    config = tmp_path / 'c.yaml'
    config.write_text(f"_base_: ['x.py']\ntrain_cfg:\n  {text}\n")
    with pytest.raises(ValueError, match=message.replace('(', r'\(').replace(')', r'\)')):
        check_mapping_file(config)


def test_a_json_config_key_given_twice_is_refused(tmp_path):
    from vpn_plugin.data_paths import check_mapping_file
    config = tmp_path / 'c.json'
    config.write_text('{"train_cfg": {"max_epochs": 7, "max_epochs": 9}}')
    with pytest.raises(ValueError, match="the key 'max_epochs' is given twice in one object"):
        check_mapping_file(config)


def test_plain_yaml_and_json_configs_are_read(tmp_path):
    """Guard (passes on bc5f1b3 too): decimal numbers, YAML floats, booleans, quoted text and
    .inf are no other form."""
    from vpn_plugin.data_paths import check_mapping_file
    yaml_config = tmp_path / 'c.yaml'
    yaml_config.write_text("train_cfg: {max_epochs: 7, val_interval: -0}\n"
                           "optim_wrapper: {optimizer: {lr: 1.0e-3, eps: .5, wd: 2.}}\n"
                           "randomness: {seed: 0, deterministic: yes}\nclip: .inf\n"
                           "names: ['010', \"1e3\", 0.0]\n")
    check_mapping_file(yaml_config)
    json_config = tmp_path / 'c.json'
    json_config.write_text(json.dumps({'train_cfg': {'max_epochs': 7}, 'lr': 1e-3}))
    check_mapping_file(json_config)


def _llm_settings(*extra):
    tool = load_tool('llm_eval')
    defaults = ['--config', 'configs/vpn_crosstask_t3.py', '--model', 'm'] + \
        ['--base-url', 'http://h/v1'] * ('--base-url' not in extra)  # a flag once (parse_once)
    args = tool.parse_args([*defaults, *extra])
    return json.dumps(tool.run_settings(args, 12, 105), sort_keys=True), args


def test_equal_temperatures_and_endpoints_are_one_run():
    plain, _ = _llm_settings()
    for extra in (['--temperature', '-0.0'], ['--base-url', 'http://h/v1/']):
        settings, args = _llm_settings(*extra)
        assert settings == plain, extra
    assert _llm_settings('--temperature', '-0.0')[1].temperature == 0.0
    assert str(_llm_settings('--temperature', '-0.0')[1].temperature) == '0.0'


def test_a_quoted_base_reference_is_refused_naming_it(tmp_path):
    """K23: ``test_horizon = '{{_base_.horizon}}'`` was refused naming mmengine's random name
    (``test_horizon='"_horizon_53ad00"'``), not the quoted reference the file holds."""
    from vpn_plugin.data_paths import read_config_file
    (tmp_path / 'b.py').write_text('horizon = 3\n')
    config = tmp_path / 'c.py'
    config.write_text("_base_ = ['b.py']\ntest_horizon = '{{_base_.horizon}}'\n")
    with pytest.raises(ValueError, match=r"c.py: line 2: '\{\{_base_.horizon\}\}' quotes the "
                                         r'base reference \{\{_base_.horizon\}\}; mmengine '
                                         'substitutes it only as a whole value without quotes'):
        read_config_file(config)
    config.write_text("_base_ = ['b.py']\n# x = '{{_base_.horizon}}'\n"  # guard: unquoted
                      'test_horizon = {{_base_.horizon}}\n')
    assert read_config_file(config).test_horizon == 3


def test_macos_metadata_in_a_frames_folder_is_named_as_such(tmp_path):
    """FF7b: AppleDouble "._0001.jpg" files (a macOS copy to exFAT/SMB) were refused as "two
    images of one frame ... remove one of the two extractions"."""
    from vpn_plugin.baselines.llm.frames import read_clip_frames
    for i in range(1, 4):
        (tmp_path / f'{i:04d}.jpg').write_bytes(b'')
        (tmp_path / f'._{i:04d}.jpg').write_bytes(b'\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X')
    with pytest.raises(ValueError, match=r'._0001.jpg is macOS metadata \(an AppleDouble "._" '
                                         r'file, 3 such\), no image'):
        read_clip_frames(tmp_path, 0, 2, 1)


def test_a_yaml_config_with_a_base_reference_is_read_as_mmengine_reads_it(tmp_path):
    """K63 (wrong, a false refusal): ``h: {{_base_.horizon}}`` in a YAML config, which
    mmengine reads (h = 3), stopped read_config_file with PyYAML's ConstructorError (the
    base walk parsed the file before mmengine's substitution)."""
    from vpn_plugin.data_paths import read_config_file
    (tmp_path / 'b.py').write_text('horizon = 3\n')
    config = tmp_path / 'c.yaml'
    config.write_text('_base_: [b.py]\nh: {{_base_.horizon}}\n')
    assert read_config_file(config).h == 3


def test_a_file_managers_copy_of_a_frame_is_named_with_its_frame(tmp_path):
    """FF6 (vague): beside img0001..img0003.jpg, a copy "img0002 (1).jpg" was refused as "img0001.jpg
    and img0002 (1).jpg are two images of one frame (number 1)": the number of the copy was read
    from its last run of digits, not where the frames' numbers are."""
    from vpn_plugin.baselines.llm.frames import read_clip_frames
    for name in ('img0001.jpg', 'img0002.jpg', 'img0003.jpg', 'img0002 (1).jpg'):
        (tmp_path / name).write_bytes(b'')
    with pytest.raises(ValueError, match=r'img0002 \(1\).jpg and img0002.jpg are two images of '
                                         r'one frame \(number 2\)'):
        read_clip_frames(tmp_path, 0, 2, 1)
