"""A restricted unpickler for feature files: numpy arrays and plain data, never code.

A pickle names the callables it calls (``GLOBAL`` / ``STACK_GLOBAL`` opcodes); an ordinary
``pickle.load`` imports and calls whatever is named (``posix.system``...). This unpickler
admits only the callables that rebuild numpy arrays, dtypes and scalars (numpy 1.x and 2.x
spellings) and ``_codecs.encode`` for the latin-1 bytes of protocol-2 pickles; dicts, lists,
tuples, str, bytes, int, float, bool and None need no global. Anything else raises
``RefusedGlobalError`` naming the global, before it is imported.
"""
import codecs
import io
import pickle

import numpy as np


class RefusedGlobalError(pickle.UnpicklingError):
    """The pickle names a global outside the allow-list; ``.global_name`` is 'module.name'."""

    def __init__(self, global_name: str):
        super().__init__(f'refused to unpickle global {global_name!r}: a feature file holds '
                         'only numpy arrays, numbers and strings')
        self.global_name = global_name


def _latin1_encode(text, encoding='latin1', errors='strict'):
    """``_codecs.encode`` as protocol-2 pickles use it for bytes; only latin-1 is admitted."""
    if codecs.lookup(encoding).name != 'iso8859-1' or errors != 'strict':
        raise RefusedGlobalError(f'_codecs.encode(encoding={encoding!r}, errors={errors!r})')
    return codecs.encode(text, 'latin1')


def _numpy_callables() -> dict:
    """name -> the numpy function a pickle of an array / scalar / buffer calls."""
    return {'_reconstruct': np.ndarray.__reduce__(np.zeros(1))[0],
            'scalar': np.float32(0).__reduce__()[0],
            '_frombuffer': np.zeros(1).__reduce_ex__(5)[0]}


def _allowed_globals() -> dict:
    found = _numpy_callables()
    allowed = {('numpy', 'ndarray'): np.ndarray, ('numpy', 'dtype'): np.dtype,
               ('_codecs', 'encode'): _latin1_encode}
    for core in ('numpy.core', 'numpy._core'):
        allowed[(f'{core}.multiarray', '_reconstruct')] = found['_reconstruct']
        allowed[(f'{core}.multiarray', 'scalar')] = found['scalar']
        allowed[(f'{core}.numeric', '_frombuffer')] = found['_frombuffer']
    return allowed


ALLOWED_GLOBALS = _allowed_globals()


class SafeUnpickler(pickle.Unpickler):
    """``pickle.Unpickler`` whose ``find_class`` admits only ``ALLOWED_GLOBALS``."""

    def find_class(self, module, name):
        try:
            return ALLOWED_GLOBALS[(module, name)]
        except KeyError:
            raise RefusedGlobalError(f'{module}.{name}') from None

    def persistent_load(self, pid):
        raise RefusedGlobalError(f'persistent id {pid!r}')


def safe_load(file):
    """Unpickle one object from a binary file object with ``SafeUnpickler``."""
    return SafeUnpickler(file, encoding='latin1').load()


def safe_loads(data: bytes):
    """Unpickle one object from bytes with ``SafeUnpickler``."""
    return safe_load(io.BytesIO(data))


# ---------------------------------------------------------------------- networkx graphs
class PickledObject:
    """Stand-in for the one class a graph pickle may name: keeps its pickled state as a
    plain dict (``state``), runs nothing of networkx (which need not be installed)."""

    def __init__(self, *args):
        self.state = {}

    def __setstate__(self, state):
        if not isinstance(state, dict):
            raise RefusedGlobalError(f'graph state of type {type(state).__name__}')
        self.state = state


# a DiGraph pickles the views it has cached (networkx 3: ``G.nodes``, ``G.adj`` / ``G.succ`` once
# read, as KEPP's PKG/graph_creation.py reads them; ``G.edges``, ``G.in_edges``, ``G.degree``
# ... of a user's own graph): kept as inert state, never run
GRAPH_VIEWS = ('NodeView', 'OutEdgeView', 'InEdgeView', 'DiDegreeView', 'InDegreeView',
               'OutDegreeView')
def _reconstructor(cls, base, state):
    """``copyreg._reconstructor`` as pickle protocols 0 and 1 call it to make an instance
    (``object.__new__(cls)``, then ``BUILD`` sets its state): admitted for the graph's
    :class:`PickledObject` only."""
    if cls is not PickledObject or base is not object or state is not None:
        raise RefusedGlobalError(f'copyreg._reconstructor({getattr(cls, "__name__", cls)}, '
                                 f'{getattr(base, "__name__", base)}, {type(state).__name__})')
    return PickledObject()


def _frozen(*args, **kwargs):
    """Stand-in for ``networkx.classes.function.frozen``: ``nx.freeze(G)`` stores that function
    as the graph's mutators (``G.add_node`` ...), so a frozen graph's pickle names it as a
    value of its state (inert: KEPP reads the nodes and edges); a pickle that calls it is
    refused."""
    raise RefusedGlobalError('networkx.classes.function.frozen called')


# protocols 0 and 1 (a graph pickled with pickle.dump(g, f, 0)) build the DiGraph through
# copyreg._reconstructor(DiGraph, object, None), in Python 2 spellings
PROTOCOL_0_GLOBALS = {(module, '_reconstructor'): _reconstructor
                      for module in ('copy_reg', 'copyreg')}
PROTOCOL_0_GLOBALS.update({(module, 'object'): object for module in ('__builtin__', 'builtins')})
GRAPH_GLOBALS = {('networkx.classes.digraph', 'DiGraph'): PickledObject, **PROTOCOL_0_GLOBALS,
                 **{('networkx.classes.reportviews', view): PickledObject
                    for view in GRAPH_VIEWS},
                 ('networkx.classes.coreviews', 'AdjacencyView'): PickledObject,
                 ('networkx.classes.function', 'frozen'): _frozen,  # nx.freeze(G)
                 ('builtins', 'dict'): dict}


class GraphUnpickler(SafeUnpickler):
    """``SafeUnpickler`` that also admits a ``networkx.DiGraph`` (and its cached ``NodeView`` and
    ``AdjacencyView``) as a :class:`PickledObject`, ``dict`` (its factories) and the mutators
    of a frozen graph (``nx.freeze``, inert): nothing else."""

    def find_class(self, module, name):
        if (module, name) in GRAPH_GLOBALS:
            return GRAPH_GLOBALS[(module, name)]
        return super().find_class(module, name)


def safe_load_digraph(path):
    """(nodes in insertion order, {node: [(successor, attributes dict), ...]}) of a pickled
    ``networkx.DiGraph`` file, read with :class:`GraphUnpickler` (a payload never runs)."""
    with open(path, 'rb') as file:
        try:
            graph = GraphUnpickler(file, encoding='latin1').load()
        except RefusedGlobalError as error:
            raise ValueError(f'{path}: refused: the pickle names {error.global_name!r}; a graph '
                             'file holds only a networkx.DiGraph of plain data') from None
        except (pickle.UnpicklingError, EOFError, AttributeError, TypeError) as error:
            raise ValueError(f'{path}: not a pickled networkx.DiGraph ({error})') from None
    state = graph.state if isinstance(graph, PickledObject) else None
    adjacency = (state or {}).get('_succ', (state or {}).get('_adj'))
    if not isinstance(adjacency, dict) or not isinstance(state.get('_node'), dict):
        raise ValueError(f'{path}: not a pickled networkx.DiGraph (no _node/_succ dicts)')
    successors = {}
    for node, row in adjacency.items():
        if not isinstance(row, dict) or not all(isinstance(a, dict) for a in row.values()):
            raise ValueError(f'{path}: node {node!r} has successors {row!r}; expected a dict '
                             'of edge attribute dicts')
        successors[node] = list(row.items())
    return list(state['_node']), successors
