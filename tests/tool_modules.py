"""``load_tool(name)``: the script ``tools/<name>.py`` as a fresh module, by path (``tools/``
is no package, and ``test`` would import the standard library's package)."""
import importlib.util
from pathlib import Path

TOOLS = Path(__file__).resolve().parents[1] / 'tools'


def load_tool(name: str):
    spec = importlib.util.spec_from_file_location(f'vpn_tool_{name}', TOOLS / f'{name}.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_logs(work_dir) -> str:
    """The mmengine log files of a work dir (``<work_dir>/<timestamp>/<timestamp>.log``): what
    PlanningRunner keeps off the console (environment, hook list) is there."""
    return '\n'.join(path.read_text() for path in sorted(Path(work_dir).glob('*/*.log')))
