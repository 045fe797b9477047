"""The declared kind of every config option, checked before a run.

A registered class declares its options' kinds by the annotations of its ``__init__``
(``num_actions: Count``, ``dropout: Probability``, ``allow_encode: bool``); the runner's own
keys, which mmengine and torch read, are declared in a table beside it
(:data:`vpn_plugin.runner_keys.RUNNER_KEYS`). :func:`check_value` holds a value to its kind with the same rules
everywhere, so that no option is read by its truth value or as a number it is not:

- ``bool``: only ``True`` / ``False`` (``1``, ``'yes'``, ``None`` are no switch);
- ``int``: an integer, never a bool (``True`` is no count) nor ``1.0``;
- ``float``: an int or float, never a bool, finite unless its :class:`Range` says
  ``finite=False``;
- ``str``: a string; ``list[X]`` / ``tuple[X, ...]`` / ``Sequence[X]``: a list or tuple (a
  string is no list of names); ``dict`` / ``Mapping``: a dict; ``Literal[...]``: one of them;
  ``Optional`` / ``Union``: any of the members;
- ``Annotated[X, Range(...)]`` bounds a number, ``Annotated[str, NON_EMPTY]`` refuses ``''``;
- :class:`PathLike`: a file or folder given by name, a non-empty ``str`` or an ``os.PathLike``
  whose ``os.fspath`` is a ``str`` (a ``pathlib.Path``); bytes, a file descriptor number and
  a name with a NUL character are refused naming the argument.

Any other annotation (a torch class, a callable) is not checked here: the class's own check
holds. Plain Python, importable without MMAction2.
"""
from __future__ import annotations

import collections.abc
import dataclasses
import inspect
import math
import numbers
import os
import sys
import types
import typing
from typing import Annotated, Any, Literal, Union


@dataclasses.dataclass(frozen=True)
class Range:
    """Bounds of a number (``*_open``: the bound itself excluded)."""
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    finite: bool = True

    def holds(self, value) -> bool:
        if not isinstance(value, numbers.Integral) and not _finite(value):
            return not self.finite and not math.isnan(value)
        return ((self.low is None or (value > self.low if self.low_open else value >= self.low))
                and (self.high is None or (value < self.high if self.high_open
                                           else value <= self.high)))

    def describe(self) -> str:
        bounds = [f'{">" if self.low_open else ">="} {_bound(self.low)}' if self.low is not None
                  else '',
                  f'{"<" if self.high_open else "<="} {_bound(self.high)}' if self.high is not None
                  else '']
        return ' and '.join(b for b in bounds if b)


def _finite(value) -> bool:
    """``math.isfinite``, False (not OverflowError) for an integer beyond a float's range."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _bound(number) -> str:
    """A bound in words: integers in full (numpy's seed range ends at 4294967295, not 4.29e+09)."""
    return str(int(number)) if float(number).is_integer() else f'{number:g}'


@dataclasses.dataclass(frozen=True)
class NonEmpty:
    """A string that is not empty nor only blanks (a path, a name)."""


NON_EMPTY = NonEmpty()

Count = Annotated[int, Range(1)]                     # a size, a number of steps: >= 1
NonNegativeInt = Annotated[int, Range(0)]            # an index, a number that may be 0
Probability = Annotated[float, Range(0, 1)]          # [0, 1]
Fraction = Annotated[float, Range(0, 1, low_open=True)]  # (0, 1]: a share of something
DropoutRate = Annotated[float, Range(0, 1, high_open=True)]  # [0, 1)
Positive = Annotated[float, Range(0, low_open=True)]  # > 0: a temperature, a scale
NonNegative = Annotated[float, Range(0)]             # >= 0: a weight, a learning rate
Seed = Annotated[int, Range(0, 2 ** 32 - 1)]         # numpy's seed range
Text = Annotated[str, NON_EMPTY]                     # a name, a path


class PathLike:
    """The declared kind of a path argument (module docstring): ``str`` or ``os.PathLike``
    naming a file or folder. Never instantiated: an annotation only."""


def _is_path(value) -> bool:
    if isinstance(value, os.PathLike):
        try:
            value = os.fspath(value)
        except TypeError:
            return False
    return isinstance(value, str) and bool(value.strip()) and '\x00' not in value


def check_value(name: str, value, annotation) -> None:
    """``ValueError`` ``'<name>=<value>; expected <kind>'`` unless ``value`` is of the kind
    ``annotation`` declares (the rules of this module's docstring)."""
    if not conforms(value, annotation):
        name, value, annotation = _first_wrong_item(name, value, annotation)
        raise ValueError(f'{name}={value!r}; expected {describe(annotation)}')


def _first_wrong_item(name: str, value, annotation):
    """(name, value, annotation) of the first item of a list or dict of the right container
    kind that does not conform (``loss_weights.task='abc'``, ``extra_metrics[1]=0``), else
    the arguments themselves."""
    base, constraints = _unwrap(annotation)
    origin, args = typing.get_origin(base), typing.get_args(base)
    if origin in (Union, types.UnionType):
        containers = [m for m in args if _unwrap(m)[0] is not type(None)
                      and _container_kind_fits(value, m)]
        return _first_wrong_item(name, value, containers[0]) if len(containers) == 1 \
            else (name, value, annotation)
    if constraints or not _container_kind_fits(value, base):
        return name, value, annotation
    if _is_mapping(base, origin) and len(args) == 2:
        for key, item in value.items():
            if not conforms(key, args[0]):
                return f'{name} key', key, args[0]
            if not conforms(item, args[1]):
                return _first_wrong_item(f'{name}.{key}', item, args[1])
    members = [a for a in args if a is not Ellipsis]
    if _is_sequence(base, origin) and members and (origin is not tuple or Ellipsis in args):
        for index, item in enumerate(value):
            if not conforms(item, members[0]):
                return _first_wrong_item(f'{name}[{index}]', item, members[0])
    return name, value, annotation


def _container_kind_fits(value, annotation) -> bool:
    base = _unwrap(annotation)[0]
    origin = typing.get_origin(base)
    return ((_is_mapping(base, origin) and isinstance(value, collections.abc.Mapping))
            or (_is_sequence(base, origin) and isinstance(value, (list, tuple))))


def conforms(value, annotation) -> bool:
    """Whether ``value`` is of the kind ``annotation`` declares (unknown kinds: True)."""
    annotation, constraints = _unwrap(annotation)
    infinite = any(isinstance(c, Range) and not c.finite for c in constraints)
    if not _conforms_base(value, annotation, infinite):
        return False
    for constraint in constraints:
        if isinstance(constraint, Range) and not constraint.holds(value):
            return False
        if isinstance(constraint, NonEmpty) and not value.strip():
            return False
    return True


def _conforms_base(value, annotation, infinite: bool = False) -> bool:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is Any or annotation is inspect.Parameter.empty:
        return True
    if annotation is None or annotation is type(None):
        return value is None
    if origin in (Union, types.UnionType):
        return any(conforms(value, member) for member in args)
    if origin is Literal:
        return any(_literal_matches(value, choice) for choice in args)
    if annotation is bool:
        return _is_bool(value)
    if annotation is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if annotation is float:
        return (isinstance(value, numbers.Real) and not isinstance(value, bool)
                and (_finite(value) or (infinite and not isinstance(value, numbers.Integral)
                                        and not math.isnan(value))))
    if annotation is str:
        return isinstance(value, str)
    if annotation is PathLike:
        return _is_path(value)
    if isinstance(annotation, type) and issubclass(annotation, os.PathLike):
        return isinstance(value, os.PathLike)  # a Path (a config's path is a string)
    if _is_sequence(annotation, origin):
        if not isinstance(value, (list, tuple)):
            return False
        members = [a for a in args if a is not Ellipsis]
        if origin is tuple and members and Ellipsis not in args:
            return len(value) == len(members) and all(map(conforms, value, members))
        return not members or all(conforms(item, members[0]) for item in value)
    if _is_mapping(annotation, origin):
        if not isinstance(value, collections.abc.Mapping):
            return False
        if len(args) == 2:
            return all(conforms(k, args[0]) and conforms(v, args[1]) for k, v in value.items())
        return True
    return True  # a class of its own (a module, a tensor, a callable): not a config kind


def _is_bool(value) -> bool:
    """True or False, numpy's too (``np.True_ == True``, as numpy integers are integers); a
    numpy value exists only once numpy is imported (no import here: the tools' --help)."""
    numpy = sys.modules.get('numpy')
    return isinstance(value, bool) or (numpy is not None and isinstance(value, numpy.bool_))


def refuse_bool_ids(values, name: str) -> None:
    """``TypeError`` when nested lists / tuples ``values`` of action ids hold a True or False:
    numpy reads ``[True, 2]`` as the integers ``[1, 2]``, so a reader of integer ids (action
    plans, sequences) asks this before ``np.asarray`` (an array of dtype bool it refuses
    itself)."""
    stack = [values]
    while stack:
        value = stack.pop()
        if _is_bool(value):
            raise TypeError(f'{name} holds {value!r} among its action ids; expected integer '
                            'action ids (a bool would be read as the id 0 or 1)')
        if isinstance(value, (list, tuple)):
            stack.extend(reversed(value))


def _literal_matches(value, choice) -> bool:
    """``value`` is the ``Literal`` choice: equal and of its kind (a numpy string or integer of
    the same value is; a bool is no 1, a '1' no 1)."""
    if isinstance(value, bool) or isinstance(choice, bool):
        return type(value) is type(choice) and value == choice
    if isinstance(choice, str):
        return isinstance(value, str) and value == choice
    if isinstance(choice, int):
        return isinstance(value, numbers.Integral) and value == choice
    return type(value) is type(choice) and value == choice


def describe(annotation) -> str:
    """The kind ``annotation`` declares, in words: 'an integer >= 1 (or None)'."""
    annotation, constraints = _unwrap(annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    bounds = ' and '.join(c.describe() for c in constraints if isinstance(c, Range)
                          and c.describe())
    infinite = any(isinstance(c, Range) and not c.finite for c in constraints)
    if origin in (Union, types.UnionType):
        members = [m for m in args if m is not type(None)]
        words = ' or '.join(describe(m) for m in members)
        return words + (' (or None)' if len(members) < len(args) else '')
    if origin is Literal:
        return 'one of ' + ', '.join(repr(choice) for choice in args)
    if annotation is bool:
        return 'True or False'
    if annotation is int:
        return 'an integer' + (f' {bounds}' if bounds else '')
    if annotation is float:
        kind = 'a number' if infinite else 'a finite number'
        return kind + (f' {bounds}' if bounds else '')
    if annotation is str:
        return 'a non-empty string' if any(isinstance(c, NonEmpty) for c in constraints) \
            else 'a string'
    if annotation is None or annotation is type(None):
        return 'None'
    if annotation is PathLike:
        return ('a path (a non-empty str or a pathlib.Path; bytes and file descriptors are not '
                'read)')
    if _is_sequence(annotation, origin):
        members = [a for a in args if a is not Ellipsis]
        fixed = [describe(member) for member in members]  # betas: (b1, b2), each in [0, 1)
        return 'a list' + (f' (each {describe(members[0])})' if members and
                           (origin is not tuple or Ellipsis in args) else
                           f' of {len(members)} values'
                           + (f' (each {fixed[0]})' if len(set(fixed)) == 1
                              else f' ({", ".join(fixed)})') if members else '')
    if _is_mapping(annotation, origin):
        return 'a dict' + (f' (each value {describe(args[1])})' if len(args) == 2 and
                           args[1] is not Any else '')
    return getattr(annotation, '__name__', str(annotation))


def _unwrap(annotation):
    """(base annotation, its Annotated constraints)."""
    if typing.get_origin(annotation) is Annotated:
        base, *constraints = typing.get_args(annotation)
        return base, constraints
    return annotation, []


def _is_sequence(annotation, origin) -> bool:
    kind = origin or annotation
    return kind in (list, tuple, collections.abc.Sequence, typing.Sequence, typing.List,
                    typing.Tuple)


def _is_mapping(annotation, origin) -> bool:
    kind = origin or annotation
    return kind in (dict, collections.abc.Mapping, typing.Dict, typing.Mapping)


def option_types(cls) -> dict:
    """``{option: annotation}`` of the ``__init__`` of ``cls`` (string annotations resolved in
    its module; an option whose annotation cannot be resolved is left out)."""
    function = cls.__init__ if isinstance(cls, type) else cls
    try:
        hints = typing.get_type_hints(function, include_extras=True)
    except Exception:  # a name only imported for type checkers: resolve option by option
        hints = {}
        namespace = getattr(inspect.getmodule(function), '__dict__', {})
        for name, parameter in inspect.signature(function).parameters.items():
            try:
                annotation = parameter.annotation
                hints[name] = eval(annotation, namespace) if isinstance(annotation, str) \
                    else annotation
            except Exception:
                continue
    hints.pop('return', None)
    return {name: hint for name, hint in hints.items() if name != 'self'}


def option_defaults(cls) -> dict:
    """``{option: default}`` of the ``__init__`` of ``cls`` (or of the function ``cls``): the
    options that have one."""
    function = cls.__init__ if isinstance(cls, type) else cls
    return {name: parameter.default
            for name, parameter in inspect.signature(function).parameters.items()
            if parameter.default is not inspect.Parameter.empty}


def check_options(where: str, cls, options: dict) -> None:
    """:func:`check_value` of each of ``options`` (a config entry without its ``type``)
    against the annotation of that option of ``cls.__init__``; ``where`` names the entry
    (``'cfg.py: model'`` gives ``'cfg.py: model.dropout=True; expected ...'``)."""
    declared = option_types(cls)
    for name, value in options.items():
        if name in declared:
            check_value(f'{where}.{name}', value, declared[name])


class OptionsError(TypeError, ValueError):
    """A call whose options do not fit the signature (a required one missing, an unknown
    one): the ``TypeError`` Python gives, and a user error for the tools (``errors``), since
    a config entry gives the options."""


def argument_error(error: TypeError, where, args, function, config: bool = True) -> str:
    """``inspect.Signature.bind``'s refusal naming the option as a config does
    (``model.num_actions``) and whose it is (a ``_delete_=True`` entry keeps none of its
    base's options); ``config=False`` (a function called from Python, named
    ``f() argument x``): a missing one is asked for as the call's argument."""
    import re
    owner = type(args[0]).__name__ if args and function.__name__ == '__init__' \
        else function.__qualname__
    named = re.search(r"argument:? '(\w+)'", str(error))
    if not named:
        return f'{owner}: {error}'
    name = named.group(1)
    if 'missing' in str(error) and config:
        return (f'{where(name)} is missing: a required option of {owner} (an entry with '
                "_delete_=True keeps none of its base config's options)")
    if 'missing' in str(error):  # a direct Python call: no config entry to blame
        return (f'{where(name)} is missing: a required argument of {owner}(); expected '
                f'{owner}(..., {name}=...) in a Python call (from a config, the entry '
                'that builds it must set it: one with _delete_=True keeps none of its base '
                "config's options)")
    return f'{where(name)}: {error}'


def checked_arguments(function=None, *, prefix: str | None = None):
    """Decorator for a public function: each argument is held to its parameter's annotation
    as a config value is (``bootstrap(num_resamples=True)`` is refused, not read as 1):
    ``ValueError`` ``'<function>() argument <name>=<value>; expected <kind>'``.

    On a registered class's ``__init__``, ``@checked_arguments(prefix='model.')`` names an
    option as its config does (``'model.dropout=1.0; expected ...'``), so that a class built
    in Python is held to the same kinds as one built from a config (the runner checks those
    before it builds anything); the ``__init__`` body keeps only what a kind cannot say (one
    option against another, sizes of files)."""
    if function is None:
        return lambda function: checked_arguments(function, prefix=prefix)
    import functools
    signature = inspect.signature(function)
    declared = {}
    where = (lambda name: f'{prefix}{name}') if prefix is not None else \
        (lambda name: f'{function.__qualname__}() argument {name}')

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        if not declared:
            declared.update(option_types(function) or {None: None})
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as error:  # "missing a required argument: 'num_actions'"
            raise OptionsError(argument_error(error, where, args, function,
                                              config=prefix is not None)) from None
        for name, value in bound.arguments.items():
            if name in declared:
                check_value(where(name), value, declared[name])
                if prefix is not None:  # a class's options, not a function's data (its dtype)
                    bound.arguments[name] = plain_numbers(value)
        return function(*bound.args, **bound.kwargs)
    wrapper.checked_arguments = True  # the marker tests walk the package for
    return wrapper


def plain_numbers(value):
    """``value`` with every numpy bool, integer or float in it (itself, or an item of a list,
    tuple or dict) as the Python ``bool`` / ``int`` / ``float`` of the same value: the kinds
    accept numpy's scalars, and torch refuses some of them where a Python one is expected
    (``torch.Generator().manual_seed(np.int64(0))``, ``is_causal=np.True_``); ``value`` itself
    when it holds none."""
    numpy = sys.modules.get('numpy')
    if numpy is None:
        return value
    if isinstance(value, numpy.generic) and value.dtype.kind in 'biuf':
        return value.item()
    if type(value) in (list, tuple):
        items = [plain_numbers(item) for item in value]
        return value if all(a is b for a, b in zip(items, value)) else type(value)(items)
    if isinstance(value, dict):
        items = {key: plain_numbers(item) for key, item in value.items()}
        return value if all(items[key] is item for key, item in value.items()) \
            else type(value)(items)
    return value
