"""The suite's xdist order (tests/conftest.py): with --dist loadfile the longest files start
first; xdist alone queued them last (one or two tests each) and one worker ran them alone."""
from pathlib import Path
from types import SimpleNamespace

import conftest

TESTS = Path(__file__).resolve().parent


class Node:
    """A worker as the scheduler sees it: the indices it is sent, in order."""

    def __init__(self, name):
        self.gateway, self.shutting_down, self.sent = SimpleNamespace(id=name), False, []

    def send_runtest_some(self, indices):
        self.sent.append(indices)

    def shutdown(self):
        self.shutting_down = True


def first_files(collection, dist='loadfile'):
    """The files the two workers are sent first (two each at the start), in sending order."""
    options = dict(dist=dist, tx=['2*popen'])
    config = SimpleNamespace(getvalue=options.get, option=SimpleNamespace(loadscopereorder=True))
    scheduler = conftest.pytest_xdist_make_scheduler(config, None)
    if scheduler is None:
        return None
    nodes = [Node('gw0'), Node('gw1')]
    for node in nodes:
        scheduler.add_node(node)
    for node in nodes:
        scheduler.add_node_collection(node, collection)
    scheduler.schedule()
    sent = [(step, node) for node in nodes for step, _ in enumerate(node.sent)]
    return [collection[node.sent[step][0]].split('::')[0] for step, node in sorted(
        sent, key=lambda pair: (pair[0], pair[1].gateway.id))]


def test_the_longest_files_are_sent_first_longest_first():
    longest = sorted(conftest.LONGEST_FILES, key=conftest.LONGEST_FILES.get, reverse=True)
    # many tests in short files, one test in each long one: xdist's order would send the
    # short files first
    collection = [f'tests/test_short{i}.py::test_{j}' for i in range(3) for j in range(20)]
    collection += [f'{path}::test_it' for path in reversed(longest)]
    assert first_files(collection) == longest[:4]


def test_other_modes_keep_xdists_scheduler():
    assert first_files(['tests/test_a.py::test_a'], dist='load') is None


def test_every_listed_file_exists():
    """A renamed or removed file would silently lose its place at the front."""
    assert len(conftest.LONGEST_FILES) >= 5
    missing = [path for path in conftest.LONGEST_FILES if not (TESTS.parent / path).is_file()]
    assert not missing, f'tests/conftest.py LONGEST_FILES names no file: {missing}'
