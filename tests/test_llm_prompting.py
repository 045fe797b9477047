"""Prompt rendering and reply parsing of the LLM/VLM baselines (no server)."""
import os
from pathlib import Path

import numpy as np
import pytest

from vpn_plugin.baselines.llm.parsing import (ActionMatcher, OutOfTaxonomyError, ReplyParseError,
                                              json_values, parse_action,
                                              parse_plan)
from vpn_plugin.baselines.llm.prompting import (PlanningQuery, PromptBuilder, format_pkg,
                                                load_template, render_template)
from vpn_plugin.datasets.taxonomy import Taxonomy

REPO = Path(__file__).resolve().parents[1]


def make_taxonomy():
    names = ['grind beans', 'boil water', 'pour water', 'stir', 'add milk', 'serve',
             'loosen nuts', 'jack up car', 'remove wheel']
    return Taxonomy(action_names=names, task_names=['Make coffee', 'Change a tire'],
                    task_keys=['coffee', 'tire'], action_task=[0] * 6 + [1] * 3,
                    task_actions=[[0, 1, 2, 3, 4, 5], [6, 7, 8]])


TRAIN_PLANS = np.array([[0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 5], [6, 7, 8], [0, 1, 3]])
TRAIN_TASKS = np.array([0, 0, 0, 0, 1, 0])


def make_pkg():
    pkg = np.zeros((9, 9))
    pkg[0, 1], pkg[0, 2] = 0.75, 0.25
    pkg[6, 7] = 1.0
    return pkg


def query(index=0, first=0, last=2, task=0):
    return PlanningQuery(index=index, task=task, horizon=3, gt_plan=[first, 1, last],
                         first=first, last=last)


def test_completion_prompt_has_taxonomy_examples_and_placeholders():
    builder = PromptBuilder(make_taxonomy(), TRAIN_PLANS, TRAIN_TASKS, num_examples=2, seed=3)
    text = builder.completion_prompt(query(), 0, 2)
    assert '"Make coffee"' in text and '5: serve' in text
    assert 'loosen nuts' not in text  # task scope: other tasks' actions are not offered
    assert '[0, -1, 2]' in text and '[grind beans, ?, pour water]' in text
    assert '[6, 7, 8]' not in text  # examples come from the query's task only
    assert text.count(' = [') == 2
    assert 'probability' not in text  # the plain template has no PKG


def test_examples_are_seeded_per_query():
    builder = PromptBuilder(make_taxonomy(), TRAIN_PLANS, TRAIN_TASKS, num_examples=2, seed=3)
    again = PromptBuilder(make_taxonomy(), TRAIN_PLANS, TRAIN_TASKS, num_examples=2, seed=3)
    assert builder.examples(query(index=7)) == again.examples(query(index=7))
    other_seed = PromptBuilder(make_taxonomy(), TRAIN_PLANS, TRAIN_TASKS, num_examples=2, seed=4)
    drawn = {other_seed.examples(query(index=i)) for i in range(20)}
    assert len(drawn) > 1


def test_pkg_prompt_lists_edges_with_probabilities():
    builder = PromptBuilder(make_taxonomy(), TRAIN_PLANS, TRAIN_TASKS, pkg=make_pkg(),
                            with_pkg=True)
    text = builder.completion_prompt(query(), 0, 2)
    assert '0 -> 1: 0.75\n0 -> 2: 0.25' in text
    assert '6 -> 7' not in text  # edge of another task
    assert format_pkg(make_pkg(), [3, 4]) == '(no transitions observed)'
    with pytest.raises(ValueError, match='with_pkg=True needs a pkg'):
        PromptBuilder(make_taxonomy(), TRAIN_PLANS, TRAIN_TASKS, with_pkg=True)


def test_dataset_scope_offers_every_action():
    builder = PromptBuilder(make_taxonomy(), TRAIN_PLANS, TRAIN_TASKS, scope='dataset')
    assert '8: remove wheel' in builder.completion_prompt(query(), 0, 2)
    assert '8: remove wheel' in builder.identification_prompt(query(), 'start')


def test_template_missing_placeholder_names_file(tmp_path):
    path = tmp_path / 'bad.txt'
    path.write_text('Plan $task_name with $nonexistent')
    template, resolved = load_template(path)
    with pytest.raises(KeyError, match=r'bad.txt: placeholder \$nonexistent'):
        render_template(template, resolved, {'task_name': 'x'})
    with pytest.raises(FileNotFoundError, match='no file'):
        load_template(tmp_path / 'absent.txt')


@pytest.mark.parametrize('reply', [
    '{"plan": [0, 1, 2]}',
    'Here it is:\n```json\n{"plan": [0, 1, 2]}\n```\nHope it helps {not json}.',
    'The plan {is} below. [0, "Boil   WATER", {"action_id": 2, "action_name": "pour water"}]',
    '{"sequence": ["0", 1, "pour water "]}',
    # the prompt's incomplete sequence echoed before the answer object is not the plan
    'Given [0, -1, 2], the answer is {"plan": [0, 1, 2]}.',
    # actions written as the prompt lists them, "<id>: <name>"
    '{"plan": ["0: grind beans", "1 - Boil water", "2. pour  water"]}',
])
def test_parse_plan_accepts_ids_names_and_wrappers(reply):
    matcher = ActionMatcher(make_taxonomy().action_names, range(6))
    assert parse_plan(reply, matcher, 3) == [0, 1, 2]


@pytest.mark.parametrize('reply, error', [
    ('{"plan": [0, 1,', ReplyParseError),
    ('no json here', ReplyParseError),
    ('{"plan": [0, 1]}', ReplyParseError),
    ('{"answer": [0, 1, 2]}', ReplyParseError),
    ('{"plan": [0, true, 2]}', ReplyParseError),
    ('{"plan": [0, 7, 2]}', OutOfTaxonomyError),
    ('{"plan": [0, "make tea", 2]}', OutOfTaxonomyError),
    ('{"plan": [0, 1, 2]', ReplyParseError),              # truncated object: no nested list
    ('{"plan": [0, 1, 2] extra}', ReplyParseError),       # malformed object
    ('{"plan": ["0: grind beans", "1: stir", 2]}', ReplyParseError),  # id and name disagree
    ('{"plan": [0, "7: jack up car", 2]}', OutOfTaxonomyError),
])
def test_parse_plan_rejects(reply, error):
    matcher = ActionMatcher(make_taxonomy().action_names, range(6))
    with pytest.raises(error):
        parse_plan(reply, matcher, 3)


def test_parse_action():
    matcher = ActionMatcher(make_taxonomy().action_names, range(6))
    assert parse_action('```{"action_id": 4, "action_name": "add milk"}```', matcher) == 4
    assert parse_action('{"action_name": "ADD MILK"}', matcher) == 4
    with pytest.raises(OutOfTaxonomyError):
        parse_action('{"action_id": 8}', matcher)
    assert parse_action('I see [1, 2] frames. {"action_id": "3: stir"}', matcher) == 3
    with pytest.raises(ReplyParseError, match='no JSON object'):
        parse_action('[1, 2]', matcher)
    assert json_values('x [1, 2] y') == [[1, 2]]
    assert json_values('{"a": [1} {"b": 2} ```\n[3]\n```') == [[3], {'b': 2}, [3]]


def test_anchors_outside_the_task_stay_legal():
    builder = PromptBuilder(make_taxonomy(), TRAIN_PLANS, TRAIN_TASKS)
    outside = query(first=0, last=8)  # a step model predicted an action of another task
    assert builder.allowed(outside) == [0, 1, 2, 3, 4, 5, 8]
    assert '8: remove wheel' in builder.completion_prompt(outside, 0, 8)


def test_step_model_queries_name_the_task_of_the_first_action():
    from vpn_plugin.baselines.llm.evaluate import build_queries
    plans, tasks = np.array([[0, 1, 2], [6, 7, 8]]), np.array([0, 1])
    taxonomy = make_taxonomy()
    oracle = build_queries(plans, tasks)
    assert [(q.first, q.last, q.task) for q in oracle] == [(0, 2, 0), (6, 8, 1)]
    predicted = build_queries(plans, tasks, anchors=(np.array([7, 3]), np.array([8, 5])),
                              action_task=taxonomy.action_task, indices=[0])
    assert [(q.first, q.last, q.task, q.gt_plan) for q in predicted] == [(7, 8, 1, [0, 1, 2])]
    assert [q.first for q in build_queries(plans, tasks, anchors=None)] == [None, None]


PAPER_PROMPTS = (Path(os.environ.get('VPN_SHARED_DATA', REPO / '../shared/data')).parent
                 / 'reference' / 'paper_prompts')
PAPER_FIELDS = {'taxonomy': '{ taxonomy }', 'examples': '{ training data }',
                'incomplete_ids': '{ value }', 'pkg': '{ pkg details }'}


@pytest.mark.parametrize('name', ['completion', 'completion_pkg', 'identification'])
def test_paper_prompt_set_is_the_papers_text(name):
    """prompts/paper/ with the paper's placeholders put back = the transcription of the
    paper's prompts in ../shared/reference/paper_prompts (drift fails here)."""
    template, path = load_template(name, 'paper')
    transcription = PAPER_PROMPTS / path.name
    if not transcription.is_file():
        pytest.skip(f'the transcription of the paper prompts is not at {transcription}')
    assert render_template(template, path, PAPER_FIELDS) == transcription.read_text()


def test_paper_prompt_set_renders_our_serialisation_and_reads_free_form_json():
    builder = PromptBuilder(make_taxonomy(), TRAIN_PLANS, TRAIN_TASKS, pkg=make_pkg(),
                            with_pkg=True, num_examples=1, seed=3, prompt_set='paper')
    text = builder.completion_prompt(query(), 0, 2)
    assert text.startswith('Task:\nYou will receive:') and '{ ' not in text
    assert 'Taxonomy:\n0: grind beans\n1: boil water\n' in text
    assert 'Procedural Knowledge Graph (PKG):\n0 -> 1: 0.75\n0 -> 2: 0.25\n' in text
    assert text.endswith('Incomplete sequence:\n[0, -1, 2]\n')
    assert 'Example sequences:\n[' in text and ' = [' in text
    vlm = builder.identification_prompt(query(), 'start')
    assert vlm.startswith('Task:\nYou will receive:\n1. A video') and '5: serve' in vlm
    matcher = ActionMatcher(make_taxonomy().action_names, range(6))
    reply = '{"completed_sequence": ["grind beans", "boil water", "pour water"]}'
    assert parse_plan(reply, matcher, 3, any_key=True) == [0, 1, 2]
    with pytest.raises(ReplyParseError):  # our prompts ask for {"plan": [...]}: strict
        parse_plan(reply, matcher, 3)
    with pytest.raises(ValueError, match="prompt set 'mine' is unknown"):
        load_template('completion', 'mine')


def test_configs_of_the_papers_llm_rows_use_the_paper_prompt_set():
    from vpn_plugin.data_paths import load_config
    ours = load_config(REPO / 'configs/llm/llm_crosstask_t3.py').model
    plain = load_config(REPO / 'configs/llm/paper_llm_crosstask_t3.py').model
    with_pkg = load_config(REPO / 'configs/llm/paper_llm_pkg_crosstask_t3.py').model
    assert ours.prompt_set == 'ours'
    assert (plain.prompt_set, plain.with_pkg, with_pkg.prompt_set, with_pkg.with_pkg) == (
        'paper', False, 'paper', True)
    builder = PromptBuilder(make_taxonomy(), TRAIN_PLANS, TRAIN_TASKS, pkg=make_pkg(),
                            with_pkg=with_pkg.with_pkg, prompt_set=with_pkg.prompt_set)
    assert builder.completion[1] == REPO / 'prompts/paper/sequence_completion_pkg.txt'
