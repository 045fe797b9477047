"""Issue 37, the fifteenth hostile pass (passM: KEPP graph files, the API, the oracle checkers;
log /tmp/passM_log.md). Each test fails on e251d41."""
import json
import pickle
import shutil
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
import torch

from reference_fixtures import REFERENCE
from tool_modules import load_tool
from vpn_plugin.apis.inference import (_given_tasks, _observation_batch, _sample_indices,
                                       inference_planner)
from vpn_plugin.core import kepp_paths
from vpn_plugin.models.kepp import check_saved_graph, released_graph
from vpn_plugin.oracles import kepp as kepp_oracle
from vpn_plugin.oracles.compare import read_fixture_meta

PKG = REFERENCE / 'kepp_small_t3' / 'pkg'
# a graph of one task's actions 0..5 (CrossTask taxonomy_133: Make Jello Shots), rows sum to 1
EDGES = {0: [(1, 0.5), (2, 0.5)], 1: [(2, 1.0)], 2: [(3, 0.25), (0, 0.75)], 3: [(0, 1.0)]}


def digraph(edges=EDGES) -> nx.DiGraph:
    graph = nx.DiGraph()
    for u, row in edges.items():
        graph.add_node(u)
        for v, w in row:
            graph.add_edge(u, v, weight=w)
    return graph


def dumped(tmp_path, graph, protocol=pickle.HIGHEST_PROTOCOL, name='graph.pkl') -> Path:
    path = tmp_path / name
    path.write_bytes(pickle.dumps(graph, protocol=protocol))
    return path


def as_edges(graph: kepp_paths.KEPPGraph) -> dict:
    return {u: graph.successors[u] for u in graph.nodes}


# ------------------------------------------------ G3/G4: graph pickles of protocols 0 and 1
@pytest.mark.parametrize('protocol', [0, 1, 2, 5])
def test_g3_g4_a_graph_pickled_with_any_protocol_is_read(tmp_path, protocol):
    """G3/G4: a DiGraph pickled with protocol 0 or 1 (copy_reg._reconstructor) was refused as
    'not a networkx.DiGraph of plain data' (a false refusal); every protocol reads the same."""
    graph = released_graph(dumped(tmp_path, digraph(), protocol), 133, 4)
    assert graph.nodes == [0, 1, 2, 3] and as_edges(graph) == EDGES


def test_g3_protocol_0_still_refuses_other_classes(tmp_path):
    """The protocol-0 constructor is admitted for the graph only: another class is named."""
    import argparse
    path = dumped(tmp_path, argparse.Namespace(a=1), protocol=0)
    with pytest.raises(ValueError, match=r"refused: the pickle names 'argparse.Namespace'"):
        released_graph(path, 133, 4)


# ------------------------------------------------ K0: an edge of weight 0 in a released graph
def test_k0_a_released_graph_with_a_zero_edge_reloads_from_its_checkpoint(tmp_path):
    """K0: a released graph with an edge of weight 0 (rows summing to 1) trained, but its
    checkpoint was refused at test time as 'edited or damaged' (check_saved_graph wanted every
    edge in (0, 1]); a counted graph still may not hold one."""
    edges = {**EDGES, 0: [(1, 0.0), (2, 1.0)]}
    graph = released_graph(dumped(tmp_path, digraph(edges)), 133, 4)
    weights, node_rank, successor_rank = (torch.from_numpy(a) for a in graph.to_arrays(133))
    state = {'graph_weights': weights, 'graph_successor_rank': successor_rank}
    check_saved_graph(state, '', counted=False)  # the run's own checkpoint: reloads
    with pytest.raises(ValueError, match=r'edge \(0, 1\) has weight 0.0'):
        check_saved_graph(state, '', counted=True)


@pytest.mark.parametrize('edit', ['zero', 'self_loop'])
def test_g31_g33_a_released_graph_whose_rows_do_not_sum_to_1_is_named(tmp_path, edit):
    """G31-G33: the refusal said only 'pkg row 0 sums to 0.7', naming no file or option."""
    edges = ({**EDGES, 0: [(1, 0.0), (2, 0.5)]} if edit == 'zero'
             else {**EDGES, 0: EDGES[0] + [(0, 0.5)]})
    path = dumped(tmp_path, digraph(edges))
    with pytest.raises(ValueError, match=r'graph.pkl \(model.released_graph\): .* row 0 sums '
                                         r'to (0.5|1.5); expected each row to sum to 1'):
        released_graph(path, 133, 4)


# ------------------------------------------------ H1-H14: the API's arrays and indices
class Planner(torch.nn.Module):
    feature_dim, num_tasks = 4, 3


@pytest.mark.parametrize('dtype', ['>f4', '>f8', '<f4', '=f8'])
def test_h1_h2_big_endian_observations_are_observations(dtype):
    """H1/H2: big-endian observations were refused with torch's 'byte order' words."""
    values = np.arange(8, dtype=np.float32).reshape(2, 4)
    got = _observation_batch(Planner(), values.astype(dtype), 'start')
    assert got.dtype == torch.float32 and torch.equal(got, torch.from_numpy(values))


@pytest.mark.parametrize('dtype', ['>i8', '>i2', '>u4', '<i4'])
def test_h7_h9_big_endian_indices_and_tasks_are_indices(dtype):
    """H7-H9: np.array([3, 4], '>i8') as index (or task) was refused saying it is no index."""
    assert _sample_indices(np.array([1, 2], dtype), 2).tolist() == [1, 2]
    assert _given_tasks(Planner(), np.array([0, 2], dtype), 2).tolist() == [0, 2]


class Echo(torch.nn.Module):
    """A planner whose 'plans' are the sample indices it was given."""

    def data_preprocessor(self, batch, training):
        return batch

    def forward(self, inputs, data_samples, mode):
        return inputs['i'].tolist()


ECHO_DATASET = [{'inputs': {'i': torch.tensor(k)}, 'data_samples': torch.tensor(k)}
                for k in range(6)]


@pytest.mark.parametrize('indices', [torch.tensor([3, 4]), [torch.tensor(3), torch.tensor(4)],
                                     torch.tensor([3, 4], dtype=torch.int16), [3, np.int8(4)]])
def test_h13_h14_integer_tensors_are_sample_indices(indices):
    """H13/H14: inference_planner(model, ds, torch.tensor([3, 4])) was refused ('is a Tensor;
    expected an integer')."""
    assert inference_planner(Echo(), ECHO_DATASET, indices) == [3, 4]


@pytest.mark.parametrize('indices', [[torch.tensor(3.0)], [torch.tensor(True)], torch.tensor(3)])
def test_h13_other_tensors_are_still_refused(indices):
    with pytest.raises(TypeError, match='expected'):
        inference_planner(Echo(), ECHO_DATASET, indices)


# ------------------------------------------------ PM/PK: the JSON of oracle fixtures
def pkg_copy(tmp_path, edit=None, name='pkg') -> Path:
    folder = tmp_path / name
    shutil.copytree(PKG, folder)
    if edit:
        outputs = json.loads((folder / 'outputs.json').read_text())
        (folder / 'outputs.json').write_text(edit(outputs))
    return folder


def test_pm4_a_pkg_output_given_twice_is_refused(tmp_path):
    """PM4: outputs.json holding a wrong "graph" and then the right one PASSED (json keeps the
    last); PK6: a second "validate" was refused as 'an entry removed'."""
    def twice(outputs):
        wrong = dict(outputs['graph'], nodes=outputs['graph']['nodes'][::-1])
        return '{"graph": ' + json.dumps(wrong) + ', ' + json.dumps(outputs)[1:]
    with pytest.raises(ValueError, match=r"the key 'graph' is given twice"):
        kepp_oracle.read_pkg(pkg_copy(tmp_path, twice))


def test_pm3_a_meta_key_given_twice_is_refused(tmp_path):
    """PM2/PM3: meta.json with "method" twice was read as the last one."""
    folder = pkg_copy(tmp_path)
    text = (folder / 'meta.json').read_text()
    (folder / 'meta.json').write_text(text.replace('"method": "KEPP",',
                                                   '"method": "PDPP",\n "method": "KEPP",'))
    with pytest.raises(ValueError, match=r"the key 'method' is given twice in one object: "
                                         r"'PDPP' and 'KEPP'"):
        read_fixture_meta(folder)


@pytest.mark.parametrize('where, value', [('nodes', True), ('nodes', 1.0), ('num_paths', 6.0)])
def test_pk12_pk14_recorded_ids_of_another_kind_are_refused(tmp_path, where, value):
    """PK12-PK14: a recorded action id `true` / `1.0` or a path count `6.0` PASSED."""
    def edit(outputs):
        if where == 'nodes':
            nodes = outputs['graph']['nodes']
            nodes[nodes.index(1)] = value
        else:
            outputs['queries'][0]['num_paths'] = value
        return json.dumps(outputs)
    with pytest.raises(ValueError, match=rf'outputs.json: .*{where} holds {value!r} '
                                         r'\((bool|float)\); expected integers'):
        kepp_oracle.read_pkg(pkg_copy(tmp_path, edit))


@pytest.mark.parametrize('where', ['edge', 'path'])
def test_pk_a_weight_recorded_as_text_is_refused(tmp_path, where):
    """(After the stop, pk/weights_str) an edge weight "0.2666..." written as text PASSED: the
    weights row read it as the number."""
    def edit(outputs):
        entry = (outputs['graph']['edges'][3] if where == 'edge'
                 else outputs['queries'][0]['top2'][0])
        entry[-1] = str(entry[-1])
        return json.dumps(outputs)
    with pytest.raises(ValueError, match=r"outputs.json: (graph.edges\[3\]\[2\]|queries\[0\]"
                                         r".top2\[0\]\[1\]) = '0.\d+' \(str\); expected a number"):
        kepp_oracle.read_pkg(pkg_copy(tmp_path, edit))


def test_pk_the_plain_pkg_in_other_json_forms_still_reads_the_same(tmp_path):
    """No false refusal: indented, keys sorted, CRLF: the same recorded answers."""
    plain = kepp_oracle.read_pkg(pkg_copy(tmp_path, name='plain'))
    sorted_copy = pkg_copy(tmp_path, lambda o: json.dumps(o, indent=4, sort_keys=True)
                           .replace('\n', '\r\n'), name='sorted')
    assert kepp_oracle.read_pkg(sorted_copy) == plain


def test_pk8_swapped_edges_fail_on_order_and_their_weights_are_compared(tmp_path):
    """PK8: with the edge list in another order the weights row said 'inf over 1 weights'
    without comparing them."""
    def swap(outputs):
        edges = outputs['graph']['edges']
        edges[0], edges[1] = edges[1], edges[0]
        return json.dumps(outputs)
    folder = pkg_copy(tmp_path, swap)
    graph = kepp_oracle.pkg_graph(kepp_oracle.read_pkg(folder)[0])
    rows = {row[0]: row for row in kepp_oracle.pkg_rows(folder, graph)}
    assert not rows['pkg:graph edges (order) (1 compared)'][-1]
    weights = rows['pkg:graph edge weights (49 weights)']
    assert weights[1] == 0 and weights[-1]


def test_pm10_a_count_written_as_text_is_shown_as_text(tmp_path, capsys):
    """PM10: "num_nodes": "9" printed 'setting num_nodes=9 (files: 9): MISMATCH'."""
    folder = pkg_copy(tmp_path)
    meta = json.loads((folder / 'meta.json').read_text())
    _, header_ok = kepp_oracle.check_pkg_fixture(folder, dict(meta, num_nodes='9'))
    assert not header_ok and "setting num_nodes='9' (files: 9): MISMATCH" in capsys.readouterr().out


@pytest.mark.parametrize('tool', ['check_reference', 'check_authors_reference',
                                  'check_authors_loader'])
def test_a4_an_empty_fixture_argument_is_refused(tool, capsys):
    """A4: check_reference.py '' checked the working directory ('meta.json: no meta.json')."""
    with pytest.raises(SystemExit) as stopped:
        load_tool(tool).main([''])
    assert stopped.value.code == 2
    assert "'' is an empty path (an unset shell variable?)" in capsys.readouterr().err


# ------------------------------------------------ B6/B7/B11: test_metrics.json
def test_b6_test_metrics_carry_the_test_set_pkg_note():
    """B6: test_metrics.json of a KEPP test on a released graph had no test-set PKG mark."""
    note = load_tool('test').test_set_pkg_note
    model = torch.nn.Module()
    model.register_buffer('test_set_pkg', torch.tensor(True))
    model.released_graph = 'graphs/mine.pkl'
    assert 'test-set PKG' in note(model) and "'graphs/mine.pkl'" in note(model)
    model.test_set_pkg.fill_(False)
    assert note(model) == '' and note(torch.nn.Module()) == ''
