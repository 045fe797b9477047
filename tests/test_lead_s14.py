"""Lead's fixes of session 14 (issue 37, sixteenth hostile pass): a cost below half a cent was
printed '0.00' (passL's note) and a price of 1e-9 per 1k tokens recorded a cost of 0.0."""
from __future__ import annotations

import pytest

from vpn_plugin.outputs import money_text


def _usage(prompt: int, completion: int) -> dict:
    usage = dict.fromkeys(('prompt_tokens', 'completion_tokens', 'cached_prompt_tokens',
                           'cached_completion_tokens'), 0)
    usage.update(prompt_tokens=prompt, completion_tokens=completion)
    return usage


@pytest.mark.parametrize('value, text', [(0, '0.00'), (11.564, '11.56'), (0.005, '0.01'),
                                         (0.000331, '0.00033'), (0.0049, '0.0049'),
                                         (2e-9, '0.0000000020'), (-0.0003, '-0.00030')])
def test_a_cost_is_never_printed_as_a_false_zero(value, text):
    assert money_text(value) == text
    assert money_text(value) != '0.00' or value == 0


def test_a_tiny_cost_is_recorded_and_printed_as_it_is():
    from vpn_plugin.baselines.llm.evaluate import cost_summary, usage_record
    record = usage_record(_usage(2014, 48), [1e-9])
    expected = (2014 * 1e-9 + 48 * 1e-9) / 1000  # 2.062e-09, hand computed
    assert record['cost_paid'] == pytest.approx(expected, rel=1e-9)
    record = usage_record(_usage(301, 30), [0.001])  # 0.000331
    assert record['cost_paid'] == pytest.approx(0.000331, rel=1e-12)
    line = cost_summary(record)
    assert 'cost paid in this run 0.00033;' in line and '0.00;' not in line
    assert usage_record(_usage(1, 2), [0.1])['cost_paid'] == 0.0003  # no float noise


def test_the_report_cost_column_shows_a_tiny_cost():
    from vpn_plugin.protocol.report import _usage_cell
    from types import SimpleNamespace
    table = SimpleNamespace(usage={'gpt': {'cost_paid': 0.000331, 'cost_of_answers': 12.5}})
    assert _usage_cell(table, 'cost_paid')('gpt') == '0.00033'
    assert _usage_cell(table, 'cost_of_answers')('gpt') == '12.50'


def test_the_test_set_pkg_legend_claims_nothing_the_run_cannot_know():
    """passM's note: the report said every released-graph row's file was 'built with test
    videos (KEPP's NIV graph)', also of a user's graph counted on the run's own training videos
    (the log and test_metrics.json say ``kepp.released_graph_note``: the run cannot tell)."""
    from vpn_plugin.protocol.report import pkg_source_sentence
    sentence = pkg_source_sentence({'KEPP': 'test-set PKG'})
    assert 'NIV graph' not in sentence and 'built with test videos' not in sentence
    assert 'model.released_graph' in sentence and 'cannot' in sentence
    assert 'not comparable' in sentence and pkg_source_sentence({}) == ''


def test_the_shortened_runs_legend_follows_the_tables_order():
    """passP's note: with ``--methods B A`` the caption listed shortened runs in the results
    file's order (A first) under a table whose rows read B, A."""
    from types import SimpleNamespace
    from vpn_plugin.protocol.report import _shortened_legend
    table = SimpleNamespace(methods=['B', 'A', 'C'], shortened={'A': ['limit=10'],
                                                                'B': ['max_epochs=3']})
    legend = _shortened_legend(table)
    assert '(B: max_epochs=3; A: limit=10)' in legend
    assert _shortened_legend(SimpleNamespace(methods=['A'], shortened={})) == ''
