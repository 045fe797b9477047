"""Fifteenth hostile pass, engineer passL (LLM/VLM baselines, core math, configs before
training): each test fails on e251d41 (checked in a worktree of it). Log: /tmp/passL_log.md.

- LA1-3/LA11-13/LA23: the literal config reader returned a base's value as read after the
  file changed it in place (mmengine's ``_base_`` is the bases' merged dict itself:
  ``_base_.lst.append(3)``, ``ds = _base_.train_dataloader.dataset; ds['horizon'] = 6``).
  LA27/LA28/LA31-35/LA38: a function of the file changed a value when called (``global h``,
  a closure, a default argument, an argument passed: ``f(d)``) and the stale value was read.
  LA4/LA5: configs mmengine / Python refuse (two bases setting one key, ``dict(**a, h=4)``
  with ``h`` in ``a``) were read as values.
"""
import numpy as np
import pytest

# ------------------------------------------------ the literal config reader (data_paths)
BASE = "horizon = 3\ntrain_dataloader = dict(dataset=dict(type='X', horizon=3))\nlst = [1, 2]\n"
CHANGED = [
    "_base_ = ['b.py']\nds = _base_.train_dataloader.dataset\nds['horizon'] = 6\n",
    "_base_ = ['b.py']\n_base_.lst.append(3)\n",
    "_base_ = ['b.py']\n_base_['train_dataloader']['dataset']['horizon'] = 7\n",
    "_base_ = ['b.py']\nl = _base_.lst\nl += [9]\n",
    "_base_ = ['b.py']\nx = [_base_.train_dataloader]\nx[0]['dataset']['horizon'] = 11\n",
    "h = 3\ndef f():\n    global h\n    h = 13\nf()\n",
    "h = 3\ndef deco(fn):\n    global h\n    h = 14\n    return fn\n@deco\ndef g(): pass\n",
    "def f():\n    d['h'] = 9\nd = dict(h=3)\nf()\n",
    "g = lambda: d.update(h=8)\nd = dict(h=3)\ng()\n",
    "def f():\n    global h\n    h = 13\nh = 3\nf()\n",
    "d = dict(h=3)\ndef f(x=d):\n    x['h'] = 17\nf()\n",
    "def f(x):\n    x['h'] = 18\nd = dict(h=3)\nf(d)\n",
    "def f(x):\n    x.append(5)\nl = [1]\nf(l)\n",
]


@pytest.mark.parametrize('text', CHANGED)
def test_a_value_changed_in_place_or_by_a_function_is_never_read_stale(tmp_path, text):
    """The oracle is mmengine running the file: every value the literal reading gives is
    mmengine's; what the file changed out of its assignments' sight is UNREAD."""
    from mmengine.config import Config
    from vpn_plugin.data_paths import literal_config
    (tmp_path / 'b.py').write_text(BASE)
    path = tmp_path / 'c.py'
    path.write_text(text)
    assert Config.fromfile(str(path)).to_dict()  # mmengine runs it
    with pytest.raises(ValueError, match=r'c\.py:\d+: .*in this subset'):  # since passC s14:
        literal_config(path)  # a change in place or a call is outside the subset: refused


@pytest.mark.parametrize('text,match', [
    ("_base_ = ['b.py']\n_base_.horizon = 5\n", r'c.py:2: a store into an object'),
    ("_base_ = ['b.py']\n_base_.setdefault('extra', 1)\n", r'c.py:2: a statement outside'),
    ("_base_ = ['b.py', 'b4.py']\n", r"its _base_ files .*b.py and .*b4.py both set 'horizon'"),
    ("a = {'h': 3}\nd = dict(**a, h=4)\n", r"c.py:2: dict\(\) gets the key 'h' twice"),
])
def test_a_config_whose_values_cannot_be_known_or_that_mmengine_refuses_is_refused(
        tmp_path, text, match):
    from vpn_plugin.data_paths import literal_config
    (tmp_path / 'b.py').write_text(BASE)
    (tmp_path / 'b4.py').write_text('horizon = 4\n')
    path = tmp_path / 'c.py'
    path.write_text(text)
    with pytest.raises(ValueError, match=match):
        literal_config(path)


def test_values_of_a_base_read_but_not_changed_are_still_read(tmp_path):
    """No false refusal: reading a base's values, copying them, calling builtins that change
    nothing, and a function defined but never called keep every value read."""
    from vpn_plugin.data_paths import literal_config
    (tmp_path / 'b.py').write_text(BASE)
    path = tmp_path / 'c.py'
    path.write_text("_base_ = ['b.py']\nh = _base_.horizon + 1\nds = _base_.train_dataloader\n"
                    "n = [1, 2]\nother = dict(**ds, extra=1)\nm = list(_base_.lst)\n"
                    "test_horizon = {{_base_.horizon}}\n")
    literal = literal_config(path)
    assert literal['h'] == 4 and literal['ds'] == {'dataset': {'type': 'X', 'horizon': 3}}
    assert literal['train_dataloader'] == literal['ds'] and literal['lst'] == [1, 2]
    assert literal['other']['extra'] == 1 and literal['test_horizon'] == 3


# ------------------------------------------- NC10: a taxonomy listing a task's actions reordered
def reordered_taxonomy(shared_data, tmp_path, reverse_tasks=True):
    import json
    taxonomy = json.loads((shared_data / 'crosstask/taxonomy_133.json').read_text())
    tasks = list(taxonomy.items())[::-1] if reverse_tasks else list(taxonomy.items())
    path = tmp_path / 'taxonomy_rev.json'
    path.write_text(json.dumps({key: dict(list(actions.items())[::-1]) for key, actions in tasks}))
    return path


def test_a_task_listing_its_actions_out_of_step_order_is_refused_not_relabelled(shared_data,
                                                                               tmp_path):
    """NC10: CSV step i+1 was read as the i-th action of the file's order: the same taxonomy
    with each task's (id: name) pairs reversed relabelled every step (window [2, -1, 3] "pour
    jello powder ... pour alcohol" became [5, -1, 1] "pour mixture into cup ... pour juice")."""
    from vpn_plugin.datasets import crosstask_videos
    from vpn_plugin.datasets.annotations import check_crosstask_taxonomy, read_crosstask_tasks
    from vpn_plugin.datasets.taxonomy import load_taxonomy
    root = shared_data / 'crosstask'
    taxonomy = load_taxonomy(reordered_taxonomy(shared_data, tmp_path))
    with pytest.raises(ValueError, match=r"task '0_23521_Make Jello Shots' lists its action ids "
                                         r'in the order \[5, 4, 3, 2, 1, 0\]; .* expected '
                                         'ascending ids'):
        crosstask_videos(root / 'splits/test_videos.json', root / 'crosstask_release/annotations',
                         taxonomy)
    primary = read_crosstask_tasks(root / 'crosstask_release/tasks_primary.txt')
    with pytest.raises(ValueError, match=r"task 23521 lists action 5 \('pour mixture into cup'\) "
                                         r"as step 1, but tasks_primary.txt names step 1 'pour "
                                         "water'"):
        check_crosstask_taxonomy(taxonomy, primary)


def test_tasks_reordered_but_actions_in_step_order_still_read(shared_data, tmp_path):
    """No false refusal: the released file, and its tasks listed in reverse order (the keys
    carry their index), read the same windows."""
    import json
    from vpn_plugin.datasets import crosstask_videos
    from vpn_plugin.datasets.taxonomy import load_taxonomy
    root = shared_data / 'crosstask'
    released = json.loads((root / 'taxonomy_133.json').read_text())
    path = tmp_path / 'tasks_rev.json'
    path.write_text(json.dumps(dict(list(released.items())[::-1]), indent=3))
    read = [crosstask_videos(root / 'splits/test_videos.json',
                             root / 'crosstask_release/annotations', load_taxonomy(p),
                             root / 'crosstask_release/tasks_primary.txt')[0]
            for p in (root / 'taxonomy_133.json', path)]
    assert [(v.vid, v.steps) for v in read[0]] == [(v.vid, v.steps) for v in read[1]]


# ------------------------------------------------------- R2/R3/R4: replies naming actions
def matcher_of(names, allowed=None):
    from vpn_plugin.baselines.llm.parsing import ActionMatcher
    return ActionMatcher(names, range(len(names)) if allowed is None else allowed)


@pytest.mark.parametrize('plan,match', [
    ('["pour water", "stir", "pour water"]', r"action name 'pour water' names actions \[0, 3\]"),
    ('[0, {"action_id": 1, "id": 2}, 0]', 'gives 2 ids and 0 names that disagree'),
    ('[0, {"action_name": "stir", "name": "add egg"}, 0]', 'gives 0 ids and 2 names that disagree'),
])
def test_an_action_named_ambiguously_or_twice_differently_is_unparseable(plan, match):
    """R2: with --scope dataset CrossTask lists "pour water" for 5 tasks; a reply naming it was
    scored as the LAST of them (the given first step of a Jello window scored wrong: first
    accuracy 75 for given anchors). R3/R4: two id keys (or two name keys) of one item that
    disagree were read as the first."""
    from vpn_plugin.baselines.llm.parsing import ReplyParseError, parse_plan
    matcher = matcher_of(['pour water', 'stir', 'add egg', 'pour water'])
    with pytest.raises(ReplyParseError, match=match):
        parse_plan('{"plan": %s}' % plan, matcher, 3)


def test_a_shared_name_of_one_listed_action_and_agreeing_keys_still_parse():
    """No false refusal: a name shared with an action outside the prompt's list (task scope),
    an id with a shared name ("3: pour water"), and two keys that agree read as before."""
    from vpn_plugin.baselines.llm.parsing import parse_plan
    names = ['pour water', 'stir', 'add egg', 'pour water']
    assert parse_plan('{"plan": ["pour water", "stir", "add egg"]}',
                      matcher_of(names, [0, 1, 2]), 3) == [0, 1, 2]
    assert parse_plan('{"plan": ["3: pour water", {"action_id": 1, "id": 1, "name": "Stir"}, '
                      '{"action_name": "add egg", "name": "add  egg"}]}', matcher_of(names), 3) \
        == [3, 1, 2]


# ------------------------------------------------------------ K39: a number below float's range
def test_a_nonzero_number_below_floats_range_is_refused_not_read_as_zero():
    """K39: --cfg-options optim_wrapper.optimizer.lr=1e-400 trained with a learning rate of
    0.0 (1e400 was refused as inf, its mirror read as 0 without a word)."""
    from vpn_plugin.errors import number_text_problem
    assert 'below the smallest float' in number_text_problem('1e-400')
    assert 'below the smallest float' in number_text_problem(' -2.5E-999 ')
    for text in ('0', '0.0', '0e-400', '-0.0', '1e-320', '1e-3', 'abc', '0x0'):
        assert number_text_problem(text) is None, text


# ------------------------------------- vague refusals made clear (VF4 family, VF21, CF11, K3, K27)
@pytest.mark.parametrize('damage,shown', [
    ('link', r'a symbolic link to nowhere.jpg, which leads to no file \(a dangling link\)'),
    ('empty', r'empty \(0 bytes\)'),
    ('text', 'OpenCV cannot decode it as an image'),
    ('folder', 'a folder, not an image file'),
])
def test_a_frame_that_is_no_image_says_why(tmp_path, damage, shown):
    """VF4/VF16/VF18/VF2b: "frame .../0014.jpg: cannot be read as an image" said neither why
    nor what was expected."""
    import os
    import cv2
    from vpn_plugin.baselines.llm.frames import read_clip_frames
    for number in range(1, 31):
        if number != 14:
            cv2.imwrite(str(tmp_path / f'{number:04d}.jpg'), np.zeros((8, 8, 3), np.uint8))
    frame = tmp_path / '0014.jpg'
    {'link': lambda: os.symlink('nowhere.jpg', frame), 'empty': lambda: frame.write_bytes(b''),
     'text': lambda: frame.write_text('not an image'), 'folder': frame.mkdir}[damage]()
    with pytest.raises(ValueError, match=f'0014.jpg: {shown}; expected an image file OpenCV '
                                         r'decodes \(.jpg'):
        read_clip_frames(tmp_path, 12, 14, 1)


def test_a_video_whose_extension_differs_by_case_is_named(tmp_path):
    """VF21: only vidB.MP4 there: "neither a folder .../vidB nor a file .../vidB{.mp4,...}"."""
    from vpn_plugin.baselines.llm.frames import find_video_source
    (tmp_path / 'vidB.MP4').write_bytes(b'x')
    (tmp_path / 'vidBB.mp4').write_bytes(b'x')
    with pytest.raises(FileNotFoundError, match=r'the folder holds vidB.MP4, whose extension '
                                                'differs only by case'):
        find_video_source(tmp_path, 'vidB')
    assert find_video_source(tmp_path, 'vidBB') == tmp_path / 'vidBB.mp4'


def test_a_file_where_the_cache_keeps_an_entry_folder_is_named_before_any_request(tmp_path):
    """CF11: a file "39" beside the entry folders ended the run, after its requests, in
    "[Errno 17] File exists: '.../cache/39'"."""
    from vpn_plugin.baselines.llm.backends import ResponseCache
    ResponseCache(tmp_path / 'cache')  # a new cache, then one of its entry folders a file
    (tmp_path / 'cache/39').write_text('x')
    (tmp_path / 'cache/4a').mkdir()
    with pytest.raises(ValueError, match=r'cache: 39 is a file, where the cache keeps its entry '
                                         r'folder 39/ \(1 such file\(s\)\); expected folders'):
        ResponseCache(tmp_path / 'cache')


def test_a_long_method_name_makes_short_side_file_names():
    """M6: --method of 300 letters ended in "[Errno 36] File name too long"."""
    from types import SimpleNamespace
    from tool_modules import load_tool
    slug = load_tool('llm_eval').method_slug(SimpleNamespace(method='A' * 300), 'oracle')
    assert slug == 'a' * 60


def test_a_model_type_that_is_no_name_is_refused_naming_it():
    """K3: --cfg-options model.type=VPN, (a list) ended in mmengine's raw traceback "The key
    argument of `Registry.get` must be a str, got <class 'list'>"."""
    from vpn_plugin.runner_keys import check_runner_kinds
    with pytest.raises(ValueError, match=r"c.py: model.type=\['VPN'\]; expected a non-empty"):
        check_runner_kinds({'model': {'type': ['VPN']}}, 'c.py')
    check_runner_kinds({'model': {'type': 'ViterbiPlanNet'}}, 'c.py')


def test_an_empty_video_list_is_named_as_empty():
    """K27: --cfg-options test_dataloader.dataset.video_list= was refused as "got none"."""
    from vpn_plugin.datasets.sources import read_source
    with pytest.raises(ValueError, match=r"got none \(video_list='' is empty: expected a file "):
        read_source('.', None, 3, video_list='')


# ------------------------------------------------ R19: the model that answered is recorded
def test_replies_from_another_model_than_asked_are_counted_and_kept_in_the_cache(tmp_path):
    """R19: a response naming "gpt-other" (asked "fake") left no trace in the row, the
    outcomes, the summary or the cache. Now counted in the usage (the row keeps it) and
    signed into the cache entry (a rerun from the cache counts it again; an edit is refused);
    replies of the model asked, and entries written before, are read as before."""
    import json
    from vpn_plugin.baselines.llm.backends import ChatReply, ResponseCache, UsageCounter
    from vpn_plugin.baselines.llm.evaluate import token_summary, usage_record
    cache = ResponseCache(tmp_path / 'cache')
    key = 'ab' * 32
    cache.put(key, ChatReply('{"plan": [0, 1, 2]}', 10, 3, served_model='gpt-other'), {})
    usage = UsageCounter()
    for reply in (cache.get(key, {}), ChatReply('x', 1, 1, served_model='fake'),
                  ChatReply('x', 1, 1)):
        usage.record_reply(reply, 'fake')
    record = usage_record(usage.counts)
    assert record['replies_from_other_models'] == {'gpt-other': 1}
    assert "1 replies name another model than the one asked: {'gpt-other': 1}" in \
        token_summary(record)
    path = next((tmp_path / 'cache').glob('*/*.json'))
    entry = json.loads(path.read_text())
    path.write_text(json.dumps({**entry, 'served_model': 'fake'}))
    assert cache.get(key, {}) is None  # an edited model name: checksum mismatch, discarded
    cache.put(key, ChatReply('{"plan": [0, 1, 2]}', 10, 3), {})
    assert 'served_model' not in json.loads(path.read_text())
    assert cache.get(key, {}).served_model == ''


# ------------------------------------- VF20: a frames folder beside a video file of its name
def test_what_the_frames_came_from_is_returned_and_a_folder_beside_a_video_is_said(tmp_path,
                                                                                     capsys):
    """VF20: with vidA/ (frames) and vidA.mp4 both in --video-root the folder was read, at the
    assumed --frames-fps, without a word or a record. Now attach_frames says it and returns
    the sources (llm_eval writes them into the row's settings.video_sources)."""
    from test_llm_endpoint import write_frames_folder, write_video
    from vpn_plugin.baselines.llm.evaluate import attach_frames, build_queries
    from vpn_plugin.datasets import Window
    write_frames_folder(tmp_path / 'vid0', 12)
    write_video(tmp_path / 'vid1.mp4', 12)
    windows = [Window(vid=f'vid{i}', task=0, feature=f'c_vid{i}', steps=(0, 1, 2),
                      times=((0, 3), (4, 7), (8, 11)), video_num_steps=3) for i in (0, 1)]
    queries = build_queries(np.array([[0, 1, 2]] * 2), np.array([0, 0]))
    assert attach_frames(queries, windows, tmp_path, num_frames=1) == {
        'frames_folders': 1, 'video_files': 1}
    assert 'note:' not in capsys.readouterr().err  # one source each: nothing to say
    write_video(tmp_path / 'vid0.mp4', 12)
    assert attach_frames(queries, windows, tmp_path, num_frames=1) == {
        'frames_folders': 1, 'video_files': 1, 'frames_folders_beside_a_video': 1}
    assert 'note: 1 frames folder(s) have a video file of their name beside them' in \
        capsys.readouterr().err
