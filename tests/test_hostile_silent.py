"""Issue 37, "Silent" and "Vague": what a hostile user's input did without a word, or ended in a
message that named no file. Each case now ends in a refusal naming the file, field and value
(or says what it did); each test fails on the behaviour before the fix."""
import errno
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

import vpn_plugin.mm  # noqa: F401  (registration)
from test_hostile_tools import no_traceback, user_error  # noqa: F401  (an autouse fixture)
from tool_modules import load_tool
from vpn_plugin.data_paths import REPO_ROOT

KITCHEN = REPO_ROOT / 'examples' / 'custom_dataset'
KITCHEN_CONFIG = str(KITCHEN / 'vpn_kitchen_t3.py')


def parser_error(tool: str, argv, capsys) -> str:
    """The argument parser's refusal (exit status 2) and its message."""
    with pytest.raises(SystemExit) as stopped:
        load_tool(tool).main([str(a) for a in argv])
    assert stopped.value.code == 2
    return capsys.readouterr().err


@pytest.fixture
def kitchen(tmp_path) -> Path:
    """A copy of the example dataset's annotations (no features)."""
    root = tmp_path / 'kitchen'
    shutil.copytree(KITCHEN / 'kitchen', root, ignore=shutil.ignore_patterns('features', 'cache'))
    return root


def edit_json(path: Path, change) -> Path:
    records = json.loads(path.read_text())
    change(records)
    path.write_text(json.dumps(records))
    return path


# ----------------------------------------------------------------------- annotations
def test_unknown_fields_of_annotation_records_are_refused(kitchen, shared_data, tmp_path):
    """Before: a misspelled "featur" was ignored (the default feature stem used instead)."""
    from vpn_plugin.datasets.annotations import (read_json_annotations, read_video_list,
                                                 read_window_file)
    from vpn_plugin.datasets.taxonomy import load_taxonomy
    taxonomy = load_taxonomy(kitchen / 'taxonomy.json')
    test = edit_json(kitchen / 'test.json', lambda r: r[2].update(featur='tea_14_x'))
    with pytest.raises(ValueError, match=r"test.json: entry 2 \(vid tea_14\): unknown field\(s\) "
                                         r"'featur' \(did you mean 'feature'\?\); expected only "
                                         r"'vid', 'task', 'steps', 'feature'"):
        read_json_annotations(test, taxonomy)
    edit_json(test, lambda r: r[2].update(_note='mine', feature=r[2].pop('featur')))
    videos, _ = read_json_annotations(test, taxonomy)  # a field of one's own: '_' first
    assert videos[2].feature == 'tea_14_x'
    crosstask = load_taxonomy(shared_data / 'crosstask/taxonomy_133.json')
    windows = json.loads((shared_data / 'crosstask/splits/test_T3_133.json').read_text())[:3]
    windows[1]['id']['legal_rnage'] = windows[1]['id']['legal_range']
    (tmp_path / 'w.json').write_text(json.dumps(windows))
    with pytest.raises(ValueError, match=r"w.json: sample 1: field \"id\": unknown field\(s\) "
                                         r"'legal_rnage' \(did you mean 'legal_range'\?\)"):
        read_window_file(tmp_path / 'w.json', crosstask, 3)
    listed = json.loads((shared_data / 'crosstask/splits/test_videos.json').read_text())[:2]
    listed[0]['lenght'] = 3
    (tmp_path / 'v.json').write_text(json.dumps(listed))
    with pytest.raises(ValueError, match=r"v.json: entry 0: unknown field\(s\) 'lenght'"):
        read_video_list(tmp_path / 'v.json', crosstask)


def test_dataset_stats_refuses_a_video_in_both_splits(kitchen):
    """Before: the shared video was counted in both columns, PKG coverage included."""
    train = json.loads((kitchen / 'train.json').read_text())
    edit_json(kitchen / 'test.json', lambda r: r.append(train[0]))
    message = user_error('dataset_stats', ['--config', KITCHEN_CONFIG, '--data-root', kitchen])
    assert f'{kitchen}/train.json (train) and {kitchen}/test.json (test): 1 video(s) are in ' \
           "both the training and the test split, e.g. ['make_tea_tea_00']" in message


def test_a_video_with_an_npy_and_an_npz_feature_file_is_refused(tmp_path):
    """Before: the .npz was read and the .npy ignored without a word."""
    from vpn_plugin.datasets.features import find_feature_file
    np.save(tmp_path / 'v1.npy', np.zeros((3, 4), np.float32))
    assert find_feature_file(tmp_path, 'v1') == tmp_path / 'v1.npy'
    np.savez(tmp_path / 'v1.npz', frames_features=np.ones((3, 4), np.float32))
    with pytest.raises(ValueError, match=rf'{tmp_path}: both v1.npz and v1.npy exist for video '
                                         r'v1; expected one feature file per video'):
        find_feature_file(tmp_path, 'v1')


@pytest.mark.parametrize('key, value', [('val_fraction', 0.5), ('split_seed', 3)])
def test_a_held_out_split_drawn_differently_in_train_and_val_is_refused(kitchen, key, value):
    """Before: val_fraction=0.5 for val only validated on videos also trained on."""
    from vpn_plugin.data_paths import load_config
    from vpn_plugin.datasets.planning_dataset import check_split_disjoint
    cfg = load_config(KITCHEN_CONFIG, data_root=str(kitchen))
    check_split_disjoint(cfg)  # the example sets 0.25 in both
    cfg = load_config(KITCHEN_CONFIG, {f'val_dataloader.dataset.{key}': value},
                      data_root=str(kitchen))
    default = {'val_fraction': 0.25, 'split_seed': 0}[key]
    with pytest.raises(ValueError, match=rf'vpn_kitchen_t3.py: train_dataloader.dataset.{key}='
                                         rf'{default} but val_dataloader.dataset.{key}={value}; '
                                         r'.*validation videos are also trained on'):
        check_split_disjoint(cfg)


# ----------------------------------------------------------------------- training
def test_train_holds_the_work_dir_lock_from_its_fresh_check_to_the_end(tmp_path, monkeypatch):
    """Before: the check that the work dir holds no checkpoints ran before the lock was taken,
    so a second training started 3 s later (no checkpoint yet) trained into the same dir and
    overwrote epoch_3 and best. Now the lock is held while the runner is built and trains."""
    from test_hostile_checkpoints import toy_config_text
    import vpn_plugin.runner as vpn_runner
    from vpn_plugin.locks import LockBusyError, exclusive_lock, lock_path_of
    monkeypatch.setenv('LOCAL_RANK', '0')
    work_dir = tmp_path / 'work'
    config = tmp_path / 'toy.py'
    config.write_text(toy_config_text(work_dir))
    tool = load_tool('train')
    seen = []

    def other_process_tries(cfg):  # another open file description, as another process
        def attempt():
            try:
                with exclusive_lock(lock_path_of(cfg.work_dir), wait=False):
                    seen.append('got the lock')
            except LockBusyError as error:
                seen.append(str(error))
        thread = threading.Thread(target=attempt)
        thread.start()
        thread.join()
        raise SystemExit('stop here')
    monkeypatch.setattr(vpn_runner, 'build_runner', other_process_tries)  # train.py imports it
    with pytest.raises(SystemExit, match='stop here'):
        tool.main([str(config)])
    assert len(seen) == 1 and 'is in use by another process' in seen[0], seen


def test_a_non_finite_loss_stops_training_before_the_step(tiny_crosstask, tmp_path,
                                                          monkeypatch):
    """Before: KEPP with plan_endpoint_weight=nan trained with loss nan, saved epoch_1 and
    epoch_2 of NaN weights, exit 0. Now the first non-finite loss stops the run before its
    step: the checkpoint of the epoch before is kept, none is written after."""
    from test_apis import tiny_vpn_config
    from vpn_plugin.models.viterbi_plan_net import ViterbiPlanNet
    monkeypatch.setenv('LOCAL_RANK', '0')
    config = tiny_vpn_config(tiny_crosstask, tmp_path)
    original = ViterbiPlanNet.loss
    calls = []

    def loss_turning_nan(self, inputs, data_samples):
        losses = original(self, inputs, data_samples)
        calls.append(1)
        if len(calls) >= 3:  # epoch 2 (2 iterations of 256 per epoch on 262 windows)
            losses['loss_plan'] = losses['loss_plan'] * float('nan')
        return losses
    monkeypatch.setattr(ViterbiPlanNet, 'loss', loss_turning_nan)
    message = user_error('train', [config, '--work-dir', tmp_path / 'run', '--no-validate',
                                   '--cfg-options', 'train_cfg.max_epochs=2',
                                   'default_hooks.checkpoint.interval=1'])
    assert 'ViterbiPlanNet: the training loss at iteration 3 is nan (loss=nan' in message
    assert 'loss_plan=nan' in message
    assert 'no checkpoint is written from here' in message
    assert sorted(p.name for p in (tmp_path / 'run').glob('*.pth')) == ['epoch_1.pth']
    weights = torch.load(tmp_path / 'run/epoch_1.pth', weights_only=False)['state_dict']
    assert not any(bool(torch.isnan(v).any()) for v in weights.values() if v.is_floating_point())


def test_model_counts_and_probabilities_are_refused_before_a_model_is_built(tmp_path):
    """Before: model.num_tasks=8.9 ended in torch's TypeError about 'size', too small a
    num_tasks in 'Class values must be smaller than num_classes' (no config named)."""
    from vpn_plugin.data_paths import load_config
    from vpn_plugin.runner import check_config_entries
    config = str(REPO_ROOT / 'configs/vpn_niv_t3.py')
    for option, expected in (('model.num_tasks=8.9', r'model.num_tasks=8.9; expected an '
                                                     r'integer >= 1'),
                             ('model.dropout=1.5', r'model.dropout=1.5; expected a finite '
                                                   r'number >= 0 and < 1')):
        key, value = option.split('=')
        cfg = load_config(config, {key: float(value)})
        with pytest.raises(ValueError, match=rf'vpn_niv_t3.py: {expected}'):
            check_config_entries(cfg, cfg.filename)


def test_a_task_head_too_small_for_the_training_labels_is_refused():
    """Before: model.num_tasks=2 on 5 tasks ended in 'Class values must be smaller than
    num_classes' inside the loss (no config, no value named)."""
    from vpn_plugin.models.pkg_hook import check_model_fits_data

    class Dataset:
        metainfo = dict(num_actions=48, num_tasks=5)
        tasks = np.array([0, 4, 2])
    check_model_fits_data(dict(num_actions=48, num_tasks=5), Dataset, 'c.py')
    check_model_fits_data(dict(num_actions=48, num_tasks=7), Dataset, 'c.py')  # a wider head
    with pytest.raises(ValueError, match=r'c.py: model.num_tasks=2, but the training windows '
                                         r'have task labels up to 4 \(the taxonomy has 5 tasks\); '
                                         r'set model.num_tasks=5'):
        check_model_fits_data(dict(num_actions=48, num_tasks=2), Dataset, 'c.py')
    with pytest.raises(ValueError, match=r'model.num_actions=40, but the training dataset has '
                                         r'48 actions'):
        check_model_fits_data(dict(num_actions=40, num_tasks=5), Dataset, 'c.py')


# ----------------------------------------------------------------------- LLM cache
def forge(entry: Path) -> None:
    """Edit the cached reply and recompute its checksum with the (public) formula of the old
    unkeyed check: sha256 of [key, text, prompt_tokens, completion_tokens]."""
    record = json.loads(entry.read_text())
    record['text'] = '{"plan": [0, 0, 2]}'
    blob = json.dumps([record['key'], record['text'], record['prompt_tokens'],
                       record['completion_tokens']], ensure_ascii=False)
    record['checksum'] = hashlib.sha256(blob.encode('utf-8')).hexdigest()
    entry.write_text(json.dumps(record))


def test_a_forged_cache_entry_is_discarded_and_asked_again(tmp_path, capsys):
    """Before: an entry whose reply was edited and whose checksum was recomputed with the
    published formula was served (a cache hit, the forged plan scored)."""
    from fake_openai_server import FakeOpenAIServer
    from test_hostile_llm import GOOD, plan_once
    cache = tmp_path / 'cache'
    with FakeOpenAIServer(lambda prompt, attempt: {'text': GOOD}) as server:
        plan_once(server, cache)
        key_file = cache / '.cache_key'
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        [entry] = list(cache.rglob('*.json'))
        forge(entry)
        outcome, usage = plan_once(server, cache)
        assert outcome.plan == [0, 1, 2] and usage['cache_hits'] == 0
        assert f'discarded the corrupt cache entry {entry}' in capsys.readouterr().err
        # the same forgery keyed with another cache's secret (a cache copied without its key)
        record = json.loads(entry.read_text())
        key_file.unlink()
        plan_once(server, cache)  # a new key: the old entries are no longer this cache's
        assert 'checksum mismatch' in capsys.readouterr().err
        assert len(server.requests) == 3
        outcome, usage = plan_once(server, cache)
        assert usage['cache_hits'] == 1 and len(server.requests) == 3  # its own entries serve
        assert json.loads(entry.read_text())['checksum'] != record['checksum']
        key_file.chmod(0o644)
        with pytest.raises(PermissionError, match=r'cache key .*\.cache_key has mode 0644: '
                                                  r'others could read it and forge'):
            plan_once(server, cache)


# ----------------------------------------------------------------------- tables, results
def test_markdown_and_latex_escape_what_a_method_name_holds():
    """Before: 'A|B' split its Markdown row into one more column than the header."""
    from test_report import make_rows
    from vpn_plugin.protocol.report import build_table, to_latex, to_markdown
    table = build_table(make_rows('A|B', [60.0] * 5) + make_rows('C_{x}~\\', [50.0] * 5),
                        ['success_rate'])
    markdown = to_markdown(table)
    header = markdown.splitlines()[0]
    row = next(line for line in markdown.splitlines() if line.startswith('| A'))
    assert row.startswith(r'| A\|B |')
    columns = lambda line: len(line.replace(r'\|', '').split('|'))  # noqa: E731
    assert columns(row) == columns(header)
    latex = to_latex(table)
    assert r'C\_\{x\}\textasciitilde{}\textbackslash{}' in latex


def test_a_moved_protocol_folder_reads_its_own_files(tmp_path):
    """Before: rows recorded the paths of the folder they were written in, so a moved (or
    copied) protocol folder's rows named the old folder's files."""
    from vpn_plugin.protocol.results import ResultRow, append_result, read_results
    old = tmp_path / 'old'
    dump = old / 'vpn/T3/seed0/test/per_sample.json'
    dump.parent.mkdir(parents=True)
    dump.write_text('{}')
    append_result(old / 'results.jsonl', ResultRow(
        'VPN', 0, 3, {'success_rate': 50.0}, per_sample_file=str(dump),
        work_dir=str(old / 'vpn/T3/seed0')))
    line = json.loads((old / 'results.jsonl').read_text())
    assert line['per_sample_file'] == 'vpn/T3/seed0/test/per_sample.json'
    assert line['work_dir'] == 'vpn/T3/seed0'
    shutil.move(old, tmp_path / 'new')
    [row] = read_results(tmp_path / 'new/results.jsonl')
    assert row.per_sample_file == str(tmp_path / 'new/vpn/T3/seed0/test/per_sample.json')
    assert Path(row.per_sample_file).is_file()


def test_a_moved_protocol_unit_tests_its_own_checkpoint(tmp_path):
    """Before: a finished unit's train_done.json named the old folder's checkpoint."""
    from mmengine.config import Config
    from vpn_plugin.protocol.runner import ProtocolRunner, expand_units
    protocol = Config(dict(protocol='p', dataset='niv', seeds=[0], runs=[dict(
        method='VPN', config=str(REPO_ROOT / 'configs/vpn_niv_t3.py'))]))
    runner = ProtocolRunner(protocol, tmp_path / 'new')
    unit = expand_units(protocol)[0]
    work_dir = runner.work_dir(unit)
    work_dir.mkdir(parents=True)
    (work_dir / 'epoch_1.pth').write_bytes(b'weights')
    (work_dir / 'train_done.json').write_text(json.dumps(dict(
        checkpoint=str(tmp_path / 'old/p/epoch_1.pth'), params=1)))
    checkpoint = runner.train(unit, work_dir).checkpoint
    assert checkpoint == str(work_dir / 'epoch_1.pth')


# ----------------------------------------------------------------------- KEPP
def write_graph(path: Path, successors, weight_of=lambda w: {'weight': w}) -> Path:
    """A networkx.DiGraph pickle (as tests/test_kepp.py writes one) with edge attributes
    ``weight_of(w)``."""
    import pickle
    nodes = list(dict.fromkeys([u for u in successors] + [v for r in successors.values()
                                                          for v in r]))
    state = {'graph': {}, '_node': {n: {} for n in nodes},
             '_succ': {n: {v: weight_of(w) for v, w in successors.get(n, {}).items()}
                       for n in nodes}}
    body = pickle.dumps(state, protocol=2)[2:-1]
    path.write_bytes(b'\x80\x02cnetworkx.classes.digraph\nDiGraph\n)\x81' + body + b'b.')
    return path


def test_released_graph_values_are_checked_and_named(tmp_path):
    """Before: nodes True/False were read as actions 1/0, an integer weight (a count) as a
    probability, and a graph without weights failed in float(None) naming no file."""
    from vpn_plugin.models.kepp import released_graph
    cases = {
        'bool': ({True: {False: 1.0}}, None, r"node True: the action id = True; expected an "
                                             r"integer"),
        'count': ({0: {1: 1}}, None, r'edge \(0, 1\) has weight 1 \(int\); expected a float in '
                                     r'\[0, 1\] \(the transition probability, not a count\)'),
        'none': ({0: {1: 0.5}}, lambda w: {}, r'edge \(0, 1\) has no "weight" attribute'),
    }
    for name, (successors, attributes, expected) in cases.items():
        path = write_graph(tmp_path / f'{name}.pkl', successors,
                           *([attributes] if attributes else []))
        with pytest.raises(ValueError, match=rf'{name}.pkl: {expected}'):
            released_graph(path, num_actions=3, horizon=4)


def test_a_released_graph_of_another_taxonomy_is_refused(tmp_path):
    """Before: a graph whose ids number another taxonomy's actions was used as it is (each
    id naming some other action of this dataset)."""
    from test_kepp import tiny_kepp

    class Dataset:
        class taxonomy:
            path, action_task = 'tiny.json', [0, 0, 0, 1, 1, 1]
            action_names = ['a', 'b', 'c', 'd', 'e', 'f']
            task_names = ['T0', 'T1']
    ours = write_graph(tmp_path / 'ours.pkl', {0: {1: 1.0}, 1: {2: 1.0}, 3: {4: 1.0}})
    tiny_kepp(horizon=4, released_graph=str(ours)).build_pkg(Dataset)
    other = write_graph(tmp_path / 'other.pkl', {0: {1: 1.0}, 2: {3: 0.5, 5: 0.5}})
    model = tiny_kepp(horizon=4, released_graph=str(other))
    with pytest.raises(ValueError, match=r"other.pkl: 2 of its 3 edges join actions of two "
                                         r"tasks of the taxonomy tiny.json, e.g. 2 \('c' of task "
                                         r"'T0'\) -> 3 \('d' of task 'T1'\); .*another taxonomy"):
        model.build_pkg(Dataset)


def test_a_checkpoint_graph_and_model_released_graph_must_agree(tmp_path):
    """Before: test.py used the checkpoint's graph whatever model.released_graph said, and the
    protocol marked (or did not mark) the row from the config alone."""
    from test_kepp import tiny_kepp
    from vpn_plugin.core import kepp_paths
    graph = write_graph(tmp_path / 'released.pkl', {0: {1: 1.0}, 1: {2: 1.0}})
    trained = tiny_kepp(horizon=4)  # its graph counted on "training videos"
    trained.set_graph(kepp_paths.build_graph([(0, [0, 1, 2, 3])]))
    with pytest.raises(ValueError, match=r"model.released_graph='.*released.pkl', but the "
                                         r"checkpoint's graph was counted on its training "
                                         r'videos.*would be ignored'):
        tiny_kepp(horizon=4, released_graph=str(graph)).load_state_dict(trained.state_dict())
    released = tiny_kepp(horizon=4, released_graph=str(graph))
    released.build_pkg(None)
    with pytest.raises(ValueError, match=r"the checkpoint's graph was read from a released "
                                         r'graph file \(test-set PKG\), but model.released_graph '
                                         r'is not set, so the results would not be marked'):
        tiny_kepp(horizon=4).load_state_dict(released.state_dict())
    other = write_graph(tmp_path / 'other.pkl', {0: {2: 1.0}})
    with pytest.raises(ValueError, match=r"the checkpoint's graph is not the graph of "
                                         r"model.released_graph='.*other.pkl'"):
        tiny_kepp(horizon=4, released_graph=str(other)).load_state_dict(released.state_dict())
    tiny_kepp(horizon=4, released_graph=str(graph)).load_state_dict(released.state_dict())
    tiny_kepp(horizon=4).load_state_dict(trained.state_dict())


@pytest.mark.parametrize('option, expected', [
    (dict(step_n_timesteps=0), r'model.step_n_timesteps=0; expected an integer >= 1 and '
                               r'<= 100000 \(or None\)'),
    (dict(plan_endpoint_weight=-1.0), r'model.plan_endpoint_weight=-1.0; expected a finite '
                                      r'number >= 0'),
    (dict(plan_endpoint_weight=float('nan')), r'model.plan_endpoint_weight=nan'),
    (dict(step_endpoint_weight=float('inf')), r'model.step_endpoint_weight=inf'),
])
def test_kepp_options_out_of_range_are_refused(option, expected):
    """Before: step_n_timesteps=0 silently meant "the plan model's", a negative or NaN
    endpoint weight trained (NaN checkpoints, exit 0)."""
    from test_kepp import tiny_kepp
    with pytest.raises(ValueError, match=expected):
        tiny_kepp(**option)


# ----------------------------------------------------------------------- CEFITO, hooks
def test_cefito_text_features_of_two_actions_of_a_task_must_differ(tiny_crosstask, tmp_path):
    """Before: a feature file with identical rows trained and planned: every plan of a task
    tied, decided by the tie-break alone."""
    from vpn_plugin.models.cefito import CEFITO
    options = dict(feature_dim=8, num_actions=133, num_tasks=18, horizon=3,
                   taxonomy=tiny_crosstask['taxonomy'], text_dim=4, hidden_dim=8, depth=1,
                   num_heads=2)
    features = np.random.default_rng(0).normal(size=(133, 4)).astype(np.float32)
    np.save(tmp_path / 'distinct.npy', features)
    CEFITO(**options, text_embeddings=dict(file=str(tmp_path / 'distinct.npy')))
    features[5] = features[2]  # actions 2 and 5: both of task 0 (23521)
    np.save(tmp_path / 'same.npy', features)
    with pytest.raises(ValueError, match=r'identical text features to actions 2 and 5 of task 0 '
                                         r'\(1 such pair'):
        CEFITO(**options, text_embeddings=dict(file=str(tmp_path / 'same.npy')))
    CEFITO(**options)  # no text features at all: zeros, logged as "none given (zeros)"
    with pytest.raises(ValueError, match=r'model.tokens_per_second=0; expected a finite number '
                                         r'> 0'):
        CEFITO(**options, tokens_per_second=0)


@pytest.mark.parametrize('hook, options, expected', [
    ('CEFITOEMAHook', dict(decay=1.5), r'CEFITOEMAHook: decay=1.5; expected a finite number > 0 '
                                       r'and < 1'),
    ('CEFITOEMAHook', dict(start_step=1.5), r'CEFITOEMAHook: start_step=1.5; expected an '
                                            r'integer >= 0'),
    ('PDPPEMAHook', dict(decay=1.5), r'PDPPEMAHook: decay=1.5'),
    ('PDPPEMAHook', dict(interval=0), r'PDPPEMAHook: interval=0; expected an integer >= 1'),
])
def test_ema_hook_settings_are_refused_by_name(hook, options, expected):
    """Before: PDPPEMAHook(decay=1.5) was accepted (momentum -0.5), interval=0 a
    ZeroDivisionError, CEFITOEMAHook(decay='0.9') a TypeError."""
    from mmaction.registry import HOOKS
    with pytest.raises(ValueError, match=expected):
        HOOKS.build(dict(type=hook, **options))


def test_text_features_in_an_npz_and_a_truncated_state_descriptions_file_are_named(tmp_path):
    """Before: an .npz ended in "'NpzFile' object has no attribute 'ndim'", a truncated
    state_descriptions.json in a JSONDecodeError naming no file."""
    from vpn_plugin.models.text_embeddings import load_state_features, state_texts
    np.savez(tmp_path / 'text.npz', np.zeros((3, 6, 4), np.float32))
    with pytest.raises(ValueError, match=r"text.npz: an npz archive \(members \['arr_0'\]\); "
                                         r'expected a plain .npy array \(N, 6, Dt\)'):
        load_state_features(file=str(tmp_path / 'text.npz'))
    text = (KITCHEN / 'kitchen/state_descriptions.json').read_text()
    (tmp_path / 'sd.json').write_text(text[:len(text) // 2])
    with pytest.raises(ValueError, match=r'state descriptions .*sd.json: line \d+ column \d+: '
                                         r'.*\(a truncated or edited file\?\)'):
        state_texts(['boil water'], ['make tea'], tmp_path / 'sd.json')


# ----------------------------------------------------------------------- videos, extraction
SIZE = 16


def still_image_and_audio(folder: Path) -> dict:
    """A PNG named .mp4 and an audio-only .mp4 (ffmpeg's sine source)."""
    from PIL import Image
    from vpn_plugin.video.decode import ffmpeg_executable
    folder.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((30, 40, 3), 100, np.uint8)).save(folder / 'picture.png')
    (folder / 'picture.png').rename(folder / 'picture.mp4')
    subprocess.run([ffmpeg_executable(), '-v', 'error', '-f', 'lavfi', '-i', 'sine=duration=1',
                    '-c:a', 'aac', str(folder / 'podcast.mp4')], check=True)
    return {'picture.mp4': r'a still image \(png_pipe\), not a video',
            'podcast.mp4': r'no video stream \(ffmpeg finds: Audio: aac'}


def test_a_file_that_is_no_video_is_named_for_what_it_is(tmp_path):
    """Before: a PNG named .mp4 gave one frame of features (exit 0), an audio-only file
    'ffmpeg failed (exit 234): Error opening output files: Invalid argument'."""
    from vpn_plugin.video import FrameRecipe, decode_video, list_videos
    for name, expected in still_image_and_audio(tmp_path).items():
        with pytest.raises(ValueError, match=rf'{name}: {expected}'):
            decode_video(tmp_path / name, FrameRecipe(size=SIZE))
    with pytest.raises(OSError, match=r'/dev/zero is a character device; expected a video file'):
        list_videos(['/dev/zero'])


@pytest.fixture(scope='module')
def s3d():
    from vpn_plugin.apis import init_s3d
    return init_s3d(random_weights=True)


@pytest.fixture(scope='module')
def two_videos(tmp_path_factory) -> Path:
    from test_extract_features import write_video
    folder = tmp_path_factory.mktemp('videos')
    write_video(folder / 'a.mp4', 20)
    write_video(folder / 'b.mp4', 20, seed=1)
    return folder


def test_extraction_into_a_dataset_feature_folder_is_refused(two_videos, s3d, tmp_path):
    """Before: the dataset's a.npz was counted "already there" and a random-weights
    extraction.json written among its features."""
    from vpn_plugin.video import FrameRecipe, extract_videos, list_videos
    features = tmp_path / 'features'
    features.mkdir()
    np.savez(features / 'a.npz', frames_features=np.zeros((3, 512), np.float32))
    with pytest.raises(ValueError, match=rf'--out {features} already holds 1 feature file\(s\) '
                                         r"\(a.npz\) but no extraction.json: .*a dataset's "
                                         r'feature folder\?\); nothing was written'):
        extract_videos(s3d, list_videos([two_videos]), features, FrameRecipe(size=SIZE),
                       num_workers=0)
    assert sorted(p.name for p in features.iterdir()) == ['a.npz']


@pytest.fixture(scope='module')
def extracted(two_videos, s3d, tmp_path_factory) -> Path:
    """The features of ``two_videos``, extracted once (tests copy the folder)."""
    from vpn_plugin.video import FrameRecipe, extract_videos, list_videos
    out = tmp_path_factory.mktemp('extracted') / 'out'
    extract_videos(s3d, list_videos([two_videos]), out, FrameRecipe(size=SIZE), num_workers=0)
    return out


@pytest.mark.parametrize('damage', ['truncated', 'foreign', 'other recipe'])
def test_a_feature_file_that_is_not_this_extractions_is_never_counted_done(
        two_videos, s3d, extracted, tmp_path, damage):
    """Before: a truncated or foreign a.npz in the output folder was "already there"."""
    from vpn_plugin.video import FrameRecipe, extract_videos, list_videos
    out, recipe = tmp_path / 'out', FrameRecipe(size=SIZE)
    shutil.copytree(extracted, out)
    target = out / 'a.npz'
    if damage == 'truncated':
        target.write_bytes(target.read_bytes()[:200])
    elif damage == 'foreign':
        np.savez(target, frames_features=np.zeros((3, 512), np.float32))
    else:
        with np.load(target) as archive:
            arrays = dict(archive)
        arrays['recipe'] = np.str_(json.dumps(FrameRecipe(size=SIZE, fps=8).as_dict()))
        np.savez(target, **arrays)
    expected = {'truncated': 'not a zip file', 'foreign': r"no member\(s\) \['num_frames', ",
                'other recipe': r'extracted with another recipe than this run asks for '
                                r'\(fps: 8 there, 16.0 asked now\)'}[damage]
    with pytest.raises(ValueError, match=rf'a.npz: already there, but not a complete feature '
                                         rf'file of this extraction \(.*{expected}.*remove it'):
        extract_videos(s3d, list_videos([two_videos]), out, recipe, num_workers=0)


def test_a_full_disk_during_extraction_names_the_feature_file(two_videos, s3d, tmp_path,
                                                              monkeypatch):
    """Before: 'error: [Errno 28] No space left on device' (no file named)."""
    from vpn_plugin.errors import OutputWriteError
    from vpn_plugin.video import FrameRecipe, extract_videos, list_videos

    def full(file, **arrays):
        raise OSError(errno.ENOSPC, 'No space left on device')
    monkeypatch.setattr(np, 'savez', full)
    out = tmp_path / 'out'
    with pytest.raises(OutputWriteError, match=rf'cannot write the feature file {out}/a.npz: '
                                               r'No space left on device \(ENOSPC\); it was not written'):
        extract_videos(s3d, list_videos([two_videos]), out, FrameRecipe(size=SIZE),
                       num_workers=0)
    assert not list(out.glob('*.npz')) and not list(out.glob('.*partial*'))


def test_extraction_flags_and_launch_counts_are_refused_before_anything_is_written(
        two_videos, tmp_path, capsys):
    """Before: --num-workers -1 wrote extraction.json, then DataLoader refused; NPROC 0 or abc
    ended in torchrun's AssertionError / ValueError traceback."""
    out = tmp_path / 'out'
    message = parser_error('extract_features', [two_videos, '--out', out, '--random-weights',
                                                '--num-workers', '-1'], capsys)
    assert 'argument --num-workers: -1: expected an integer >= 0' in message
    assert not out.exists()
    for nproc in ('0', 'abc'):
        result = subprocess.run(['bash', str(REPO_ROOT / 'tools/dist_extract.sh'), nproc,
                                 str(two_videos), '--out', str(out), '--random-weights'],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 2 and result.stderr == \
            f'error: NPROC={nproc}: expected an integer >= 1\n', result.stderr
    assert not out.exists()


def test_torchrun_ends_a_failed_rank_with_one_line(tmp_path):
    """Before: each rank's one-line message was followed by torchrun's 40-line traceback and
    failure table."""
    from test_tools_cli import free_port
    config = tmp_path / 'empty.py'
    config.write_text('')
    env = {**os.environ, 'PORT': str(free_port()), 'PYTHON': sys.executable}
    result = subprocess.run(['bash', str(REPO_ROOT / 'tools/dist_train.sh'), str(config), '2'],
                            capture_output=True, text=True, timeout=240, env=env, cwd=tmp_path)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert 'Traceback' not in result.stderr and 'ChildFailedError' not in result.stderr
    assert 'failed (each printed its message above)' in lines[-1], lines
    assert f'error: {config}: model = None; expected a model dict' in result.stderr
    assert len(lines) <= 5, lines  # one message and its hint per rank, then the summary


def test_a_goal_past_the_end_of_the_video_is_noted(two_videos, s3d, tiny_crosstask, tmp_path):
    """Before: a goal time past the video's last second was read at its last frame and the
    printed plan said nothing of it."""
    from test_apis import tiny_vpn_config
    from vpn_plugin.apis import init_planner, plan_from_video
    from vpn_plugin.apis.video import config_taxonomy, format_video_plan, goal_note
    from vpn_plugin.video import FrameRecipe
    model = init_planner(str(tiny_vpn_config(tiny_crosstask, tmp_path)))
    video = two_videos / 'a.mp4'  # 20 frames at 16 fps: 2 s of features
    taxonomy = config_taxonomy(model.cfg)
    assert goal_note(1, 2) == '' and goal_note(1.6, 2) != ''  # seconds round as annotations
    past = plan_from_video(model, s3d, video, 0, 7, FrameRecipe(size=SIZE))
    lines = format_video_plan(past, taxonomy, video, 0, 7)
    assert lines[2] == ("note: the goal time 7 s is at or past the end of the video's 2 s of "
                        'features: the goal state is read at its last second (1 s)')


# ----------------------------------------------------------------------- configs, paths
def test_config_file_problems_name_the_file(tmp_path, capsys):
    """Before: "'(' was never closed (<unknown>, line 1)", "error: model" for an empty file,
    "[Errno 2] No such file or directory" for a missing _base_, and a parser crash ("not enough
    values to unpack") for --cfg-options foo."""
    broken = tmp_path / 'broken.py'
    broken.write_text('model = dict(\nx = 1\n')
    child = tmp_path / 'child.py'
    child.write_text("_base_ = ['broken.py']\n")
    orphan = tmp_path / 'orphan.py'
    orphan.write_text("_base_ = ['gone.py']\n")
    empty = tmp_path / 'empty.py'
    empty.write_text('')
    for config, expected in (
            (broken, rf'{broken}: line 1: .*never closed; the config file does not parse'),
            (child, rf'{broken}: line 1: '),
            (orphan, rf'{orphan}: the file {tmp_path}/gone.py it inherits \(_base_\) or reads '
                     r'does not exist'),
            (empty, rf'{empty}: model = None; expected a model dict with a type \(an empty '
                    r'config\?')):
        assert __import__('re').search(expected, user_error('test', [config])), config
    message = parser_error('train', [REPO_ROOT / 'configs/vpn_niv_t3.py', '--cfg-options',
                                     'foo'], capsys)
    assert '--cfg-options foo: expected KEY=VALUE' in message


def test_a_fifo_or_a_device_is_named_for_what_it_is(tmp_path):
    """Before: a FIFO or /dev/zero given as a config, a checkpoint or a results file was
    reported as 'does not exist' (mmengine: 'file "/dev/zero" does not exist')."""
    fifo = tmp_path / 'fifo'
    os.mkfifo(fifo)
    config = REPO_ROOT / 'configs/vpn_niv_t3.py'
    cases = {
        'train': ([fifo], rf'config file {fifo} is a FIFO, not a regular file'),
        'test': ([config, '/dev/zero'], r'checkpoint /dev/zero is a character device, not a '
                                        r'regular file'),
        'report': ([tmp_path], rf'results file {tmp_path} is a folder, not a regular file'),
    }
    for tool, (argv, expected) in cases.items():
        assert __import__('re').search(expected, user_error(tool, argv)), tool
    message = user_error('test', [config, tmp_path / 'missing.pth'])
    assert f'checkpoint {tmp_path}/missing.pth does not exist' in message
    from vpn_plugin.apis import init_s3d
    from vpn_plugin.video import FrameRecipe, extract_videos
    with pytest.raises(OSError, match=rf'S3D weights {tmp_path} is a folder, not a regular file'):
        init_s3d(str(tmp_path))
    with pytest.raises(OSError, match=r'--out /dev/zero is a character device; expected a '
                                      r'folder \(made when missing\) for the feature files'):
        extract_videos(None, [], '/dev/zero', FrameRecipe())


def test_corrupt_records_name_their_file(tmp_path, two_videos, s3d):
    """Before: a corrupt extraction.json or fixture meta.json ended in a JSONDecodeError
    naming no file."""
    from vpn_plugin.oracles.compare import read_fixture_meta
    from vpn_plugin.video import FrameRecipe, extract_videos, list_videos
    out = tmp_path / 'out'
    out.mkdir()
    (out / 'extraction.json').write_text('{"recipe": ')
    with pytest.raises(ValueError, match=rf'extraction \(recipe, weights\) {out}/extraction.json: '
                                         r'line 1 column 12: Expecting value'):
        extract_videos(s3d, list_videos([two_videos]), out, FrameRecipe(size=SIZE),
                       num_workers=0)
    (tmp_path / 'meta.json').write_text('{"method": "PDPP",')
    with pytest.raises(ValueError, match=rf'fixture meta {tmp_path}/meta.json: line 1 column '
                                         r'19: '):
        read_fixture_meta(tmp_path)


# ----------------------------------------------------------------------- found by the hunt
@pytest.mark.parametrize('option, expected', [
    (dict(val_fraction=1.5), r'val_fraction=1.5; expected a finite number >= 0 and <= 1'),
    (dict(val_fraction='abc'), r"val_fraction='abc'"),
    (dict(split_seed=8.9), r'split_seed=8.9; expected an integer >= 0'),
    (dict(horizon=8.9), r'horizon=8.9; expected an integer >= 1'),
    (dict(skip_bad_videos='yes'), r"skip_bad_videos='yes'; expected True or False"),
])
def test_planning_dataset_values_are_checked(tiny_crosstask, option, expected):
    """Before: val_fraction=1.5, split_seed=8.9, horizon=8.9 and skip_bad_videos='yes' built
    a dataset (all videos held out, a seed nobody asked for, ...); 'abc' a TypeError."""
    from mmaction.registry import DATASETS
    with pytest.raises(ValueError, match=rf'PlanningDataset: {expected}'):
        DATASETS.build(dict(tiny_crosstask['val_dataset'], **option))


def test_loss_weights_must_be_finite_and_not_negative():
    """Before: model.loss_weights=dict(plan=nan) or -1 trained on a NaN or reversed loss."""
    from vpn_plugin.models.base_planner import check_loss_terms
    check_loss_terms(dict(plan=2.0), ('plan', 'task'))
    for weight in (float('nan'), -1.0, 'a'):
        with pytest.raises(ValueError, match=rf'model.loss_weights.plan={weight!r}; expected a '
                                             r'finite number >= 0'):
            check_loss_terms(dict(plan=weight), ('plan', 'task'))


@pytest.mark.parametrize('line, expected', [
    ('seeds = [8.9]', r'seeds entry=8.9; expected an integer >= 0'),
    ('seeds = []', r'seeds = \[\]; expected a non-empty list of seeds'),
    ('seeds = [1, 1]', r'seeds = \[1, 1\] repeats a seed'),
    ('max_epochs = 0', r'max_epochs=0; expected an integer >= 1'),
    ("runs = [dict(method='', config='configs/vpn_niv_t3.py')]",
     r"runs\[0\].method = ''; expected a non-empty name"),
])
def test_protocol_values_are_checked(tmp_path, line, expected):
    """Before: seed 8.9 ran as a seed, max_epochs=0 meant the config's schedule, an empty
    method name the config's stem, seeds=[] a protocol of 0 runs (exit 0)."""
    from vpn_plugin.protocol.runner import load_protocol
    protocol = tmp_path / 'protocol.py'
    protocol.write_text("protocol = 'p'\nruns = [dict(method='A', config='configs/vpn_niv_t3.py')]"
                        f"\n{line}\n")
    with pytest.raises(ValueError, match=rf'protocol.py: {expected}'):
        load_protocol(str(protocol))


@pytest.mark.parametrize('tool, argv', [
    ('dataset_stats', ['--dataset', 'niv', '--data-root', '']),
    ('plan', ['--checkpoint', 'x.pth', '--video', '', '--start-time', '0', '--goal-time', '1']),
    ('report', ['results.jsonl', '--out', '']),
    ('llm_eval', ['--config', 'c.py', '--model', 'm', '--method', '']),
])
def test_an_empty_value_is_refused_not_read_as_the_default(tool, argv, capsys):
    """Before: --data-root '' read ../shared/data, --video '' planned dataset samples instead,
    --out '' wrote no table, --method '' named the row after the model: without a word."""
    message = parser_error(tool, argv, capsys)
    assert "'' is empty" in message or "'' is an empty path" in message, message


def test_a_price_that_is_no_number_is_refused(capsys):
    """Before: --price-per-1k nan passed the check (nan < 0 is False): the row's cost was NaN."""
    message = parser_error('llm_eval', ['--config', 'c.py', '--model', 'm', '--price-per-1k',
                                        'nan'], capsys)
    assert 'argument --price-per-1k: nan: not a finite number; expected a number >= 0' in message
