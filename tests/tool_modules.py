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
