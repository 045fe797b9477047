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
