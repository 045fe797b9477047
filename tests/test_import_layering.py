"""Every import inside vpn_plugin points down: no import circle, no arrow to a higher floor.

The graph has one node per module of vpn_plugin (a package is its ``__init__``) and one arrow
per ``import`` statement anywhere in the file, at module level or inside a function, read with
``ast`` (nothing is imported). A room is a top-level module or subpackage of vpn_plugin;
:data:`FLOORS` puts each room on a floor (docs/design.md, "Layout"). An import between two
rooms must go to a strictly lower floor (rooms of one floor do not import each other), and the
module graph has no cycle. ``vpn_plugin.mm`` is alone on the top floor: library code never
imports it, configs (``custom_imports``) and tools do.
"""
from __future__ import annotations

import ast
from collections import deque
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / 'vpn_plugin'

# room -> floor; a room imports only rooms of lower floors
FLOORS = {
    'vpn_plugin': 0,  # the package itself imports nothing
    'vpn_plugin.compat': 0,
    'vpn_plugin.locks': 0,
    'vpn_plugin.benchmark': 0,
    'vpn_plugin.progress': 0,
    'vpn_plugin.secret_keys': 0,
    'vpn_plugin.config_types': 0,  # the declared kinds of config options (pure Python)
    'vpn_plugin.tool_choices': 0,  # tools' flag choices, importable without torch
    'vpn_plugin.errors': 1,  # check_number / check_bool: config_types' kind rule
    'vpn_plugin.runner_keys': 1,  # the declared kinds of the runner's own keys (config_types)
    'vpn_plugin.compat_applied': 1,
    'vpn_plugin.outputs': 2,  # errors.file_on_the_way
    'vpn_plugin.core': 2,
    'vpn_plugin.video': 2,
    'vpn_plugin.data_paths': 3,
    'vpn_plugin.smoke': 3,
    'vpn_plugin.datasets': 4,
    'vpn_plugin.models': 5,
    'vpn_plugin.evaluation': 6,
    'vpn_plugin.engine': 7,
    'vpn_plugin.baselines': 7,
    'vpn_plugin.runner': 8,
    'vpn_plugin.apis': 8,
    'vpn_plugin.protocol': 9,
    'vpn_plugin.oracles': 9,
    'vpn_plugin.mm': 10,
}


def package_modules(package_dir: Path, name: str) -> dict:
    """``{dotted module name: file}`` of every ``.py`` file under ``package_dir``."""
    modules = {}
    for path in sorted(package_dir.rglob('*.py')):
        parts = [name, *path.relative_to(package_dir).with_suffix('').parts]
        if parts[-1] == '__init__':
            parts.pop()
        modules['.'.join(parts)] = path
    return modules


def imported_names(module: str, path: Path) -> set:
    """Absolute dotted names of every import in ``path`` (``from X import y`` gives ``X.y``:
    the module ``X.y`` or, when ``y`` is a name defined in ``X``, the module ``X``)."""
    is_package = path.name == '__init__.py'
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split('.') if is_package else module.split('.')[:-1]
                base = base[:len(base) - node.level + 1]
                source = '.'.join(base + ([node.module] if node.module else []))
            else:
                source = node.module
            names.update(f'{source}.{alias.name}' for alias in node.names)
    return names


def module_graph(package_dir: Path, name: str) -> dict:
    """``{module: set of modules of the same package it imports}`` (self-imports dropped)."""
    modules = package_modules(package_dir, name)

    def owner(dotted: str):
        while dotted not in modules and '.' in dotted:
            dotted = dotted.rsplit('.', 1)[0]
        return dotted if dotted in modules else None

    graph = {}
    for module, path in modules.items():
        targets = {owner(n) for n in imported_names(module, path)
                   if n == name or n.startswith(name + '.')}
        graph[module] = targets - {None, module}
    return graph


def find_cycles(graph: dict) -> list:
    """One shortest cycle (a list of modules, first = last) per strongly connected component
    of ``graph`` with more than one module."""
    cycles, seen = [], set()
    for start in sorted(graph):
        if start in seen:
            continue
        component = _component(graph, start)
        seen |= component
        if len(component) > 1:
            cycles.append(_shortest_cycle(graph, min(component), component))
    return cycles


def _reachable(graph: dict, start: str, reverse: bool = False) -> set:
    edges = graph if not reverse else {
        node: {source for source, targets in graph.items() if node in targets} for node in graph}
    found, todo = {start}, [start]
    while todo:
        for target in edges.get(todo.pop(), ()):
            if target not in found:
                found.add(target)
                todo.append(target)
    return found


def _component(graph: dict, start: str) -> set:
    return _reachable(graph, start) & _reachable(graph, start, reverse=True)


def _shortest_cycle(graph: dict, start: str, component: set) -> list:
    parent, todo = {start: None}, deque([start])
    while todo:
        node = todo.popleft()
        for target in sorted(graph[node] & component):
            if target == start:
                path = [node]
                while parent[path[-1]] is not None:
                    path.append(parent[path[-1]])
                return [start, *reversed(path[:-1]), start] if len(path) > 1 else [start, start]
            if target not in parent:
                parent[target] = node
                todo.append(target)
    raise AssertionError(f'{start} is in no cycle of {sorted(component)}')


def room(module: str) -> str:
    return '.'.join(module.split('.')[:2])


def upward_imports(graph: dict, floors: dict) -> list:
    """``'a (floor i) -> b (floor j)'`` for each import between rooms with j >= i."""
    found = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            here, there = floors[room(module)], floors[room(target)]
            if room(module) != room(target) and there >= here:
                found.append(f'{module} (floor {here}) -> {target} (floor {there})')
    return found


# ----------------------------------------------------------------------------- vpn_plugin
def test_every_room_has_a_floor():
    rooms = {room(m) for m in package_modules(PACKAGE, 'vpn_plugin')}
    assert not rooms - set(FLOORS), (f'rooms without a floor: {sorted(rooms - set(FLOORS))}; '
                                     'add them to FLOORS and docs/design.md')
    assert not set(FLOORS) - rooms, f'FLOORS names missing rooms: {sorted(set(FLOORS) - rooms)}'


def test_no_import_cycle():
    cycles = find_cycles(module_graph(PACKAGE, 'vpn_plugin'))
    assert not cycles, 'import cycles: ' + '; '.join(' -> '.join(c) for c in cycles)


def test_every_import_points_down():
    upward = upward_imports(module_graph(PACKAGE, 'vpn_plugin'), FLOORS)
    assert not upward, 'imports that do not point to a lower floor:\n' + '\n'.join(upward)


def test_the_registration_module_is_imported_by_no_library_module():
    graph = module_graph(PACKAGE, 'vpn_plugin')
    assert not [m for m, targets in graph.items() if 'vpn_plugin.mm' in targets]


# ----------------------------------------------------------------------------- the detector
def write_package(root: Path, files: dict) -> Path:
    for name, text in files.items():
        path = root / 'pkg' / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / 'pkg'


def test_detector_names_a_cycle_through_a_function_level_import(tmp_path):
    package = write_package(tmp_path, {
        '__init__.py': '',
        'low/__init__.py': 'from .base import helper\n',
        'low/base.py': 'def helper():\n    from pkg.high import api  # lazy, still an arrow\n',
        'high.py': 'from .low import helper\n\ndef api():\n    pass\n',
        'alone.py': 'import os\n',
    })
    graph = module_graph(package, 'pkg')
    assert graph['pkg.low.base'] == {'pkg.high'}
    assert graph['pkg.high'] == {'pkg.low'}
    assert find_cycles(graph) == [['pkg.high', 'pkg.low', 'pkg.low.base', 'pkg.high']]


def test_detector_flags_an_import_to_a_higher_floor(tmp_path):
    package = write_package(tmp_path, {
        '__init__.py': '',
        'low.py': 'def f():\n    from . import high\n',
        'high.py': 'from pkg import low\n',
        'side.py': 'from .low import f\n',
    })
    graph = module_graph(package, 'pkg')
    floors = {'pkg': 0, 'pkg.low': 0, 'pkg.side': 1, 'pkg.high': 1}
    assert upward_imports(graph, floors) == ['pkg.low (floor 0) -> pkg.high (floor 1)']
    floors['pkg.side'] = 0  # same floor, another room: refused too
    assert upward_imports(graph, floors) == ['pkg.low (floor 0) -> pkg.high (floor 1)',
                                             'pkg.side (floor 0) -> pkg.low (floor 0)']
    assert find_cycles({'a': {'b'}, 'b': {'c'}, 'c': {'a'}, 'd': {'a'}}) == [['a', 'b', 'c', 'a']]
