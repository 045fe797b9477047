"""`import vpn_plugin.core` (and `vpn_plugin.video`) loads only torch/numpy; `vpn_plugin.mm` loads
the MMAction2 side."""
import json
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
OPENMMLAB_SIDE = ('mmaction', 'mmengine', 'mmcv', 'transformers', 'vpn_plugin.compat',
                  'vpn_plugin.compat_applied', 'vpn_plugin.mm', 'vpn_plugin.models',
                  'vpn_plugin.datasets', 'vpn_plugin.evaluation', 'vpn_plugin.baselines',
                  'vpn_plugin.protocol')
LIST_MODULES = ('import json, sys; import {module}; '
                'print(json.dumps(sorted(sys.modules)))')


def modules_after_import(module: str) -> set:
    """Names in ``sys.modules`` after importing ``module`` in a fresh interpreter."""
    done = subprocess.run([sys.executable, '-c', LIST_MODULES.format(module=module)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def loaded_from(modules: set, prefixes) -> list:
    return sorted(name for name in modules
                  if any(name == p or name.startswith(p + '.') for p in prefixes))


def test_import_core_loads_no_openmmlab_compat_or_registration():
    """core/ and video/ (decoding workers, the extraction loop) are plain torch/numpy
    (vpn_plugin.video loads chunking and extract on first use of their names: imported here)."""
    modules = modules_after_import('vpn_plugin.core, vpn_plugin.video, vpn_plugin.video.chunking, '
                                   'vpn_plugin.video.extract')
    assert 'vpn_plugin.core.dvl' in modules and 'torch' in modules
    assert 'vpn_plugin.video.extract' in modules
    assert loaded_from(modules, OPENMMLAB_SIDE) == []


REGISTERED = """
import importlib.util, json, sys, threading
seen = {}
def other_thread_finds_transformers(event, args):  # while compat imports mmengine.optim
    if event == 'import' and args[0] == 'mmengine.optim.optimizer.builder' and not seen:
        look = lambda: seen.update(found=importlib.util.find_spec('transformers') is not None)
        thread = threading.Thread(target=look)
        thread.start()
        thread.join()
sys.addaudithook(other_thread_finds_transformers)
import vpn_plugin.mm
from mmaction.registry import DATASETS, HOOKS, METRICS, MODELS
registered = {name: sorted(registry.module_dict) for name, registry in
              dict(DATASETS=DATASETS, HOOKS=HOOKS, METRICS=METRICS, MODELS=MODELS).items()}
print(json.dumps(dict(registered, transformers_loaded='transformers' in sys.modules,
                      other_thread=seen)))
"""


def test_import_mm_registers_every_module_with_compat_applied_and_prints_nothing():
    done = subprocess.run([sys.executable, '-c', REGISTERED], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    # nothing but the child's own line: `import vpn_plugin.mm` prints nothing (default filters)
    assert done.stderr.strip() == '' and len(done.stdout.splitlines()) == 1, done.stdout + done.stderr
    registered = json.loads(done.stdout)
    assert 'PlanningDataset' in registered['DATASETS']
    assert 'PKGHook' in registered['HOOKS']
    assert {'PlanningMetric', 'AtomicDumpResults'} <= set(registered['METRICS'])
    assert {'ViterbiPlanNet', 'UniformEmissionPlanner', 'PKGBeamSearchPlanner',
            'DRN'} <= set(registered['MODELS'])  # DRN: compat's placeholder
    # no text model here: transformers (~1.2 s CPU) waits until one is built (compat's
    # fix_transformers_import; mmengine imported it for its Adafactor optimizer)
    assert registered['transformers_loaded'] is False
    # ... hidden from nothing but the thread importing mmengine.optim (compat, meanwhile)
    assert registered['other_thread'] == dict(found=True)


# every tool parses its arguments before importing torch / OpenMMLab, except these (their
# parsers take choices or defaults from modules that import torch, or are torch's own)
HEAVY_PARSING_TOOLS = {
    'benchmark_cefito_search': 'a benchmark of torch code (device default)',
    'benchmark_checked_arguments': 'a benchmark of torch code',
    'benchmark_dvl': 'a benchmark of torch code (device default)',
    'benchmark_epoch': 'a benchmark of torch code (device default)',
    'benchmark_extract': 'a benchmark of torch code (device default)',
    'dist_run': "torchrun's own parser",
    'convert_authors_checkpoint': 'tests replace its install_authors_weights',
}
HEAVY = ('torch', 'mmengine', 'mmaction', 'mmcv', 'transformers')
PARSE_ONLY = """
import contextlib, io, json, runpy, sys
import vpn_plugin.data_paths as data_paths  # every tool's flags: no torch / OpenMMLab either
loaded = sorted(name for name in {heavy} if name in sys.modules)
if loaded:
    print(json.dumps(dict(argv=['import vpn_plugin.data_paths'], loaded=loaded)))
    sys.exit(0)
for tool in sys.argv[1:]:
    for flag, status in (('--help', 0), ('--no-such-flag', 2)):
        sys.argv = [tool, flag]
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                runpy.run_path(tool, run_name='__main__')
                code = 'returned'
            except SystemExit as stop:
                code = stop.code
        loaded = sorted(name for name in {heavy} if name in sys.modules)
        if code != status or loaded:
            print(json.dumps(dict(argv=sys.argv, code=code, loaded=loaded,
                                  output=out.getvalue()[-500:])))
            sys.exit(0)
data_paths.read_config_file('configs/_base_/datasets/niv.py')  # its first use of mmengine
import mmengine.config.config, vpn_plugin.compat as compat
print(json.dumps(dict(compat_applied=mmengine.config.config.get_installed_path
                      is compat.get_installed_path, transformers='transformers' in sys.modules)))
""".replace('{heavy}', repr(HEAVY))


def test_tools_help_and_refusals_import_no_torch():
    """``--help`` and an unknown flag of every tool answer before torch / OpenMMLab load
    (about 0.1 s instead of 5 s of imports), in one interpreter: the first tool that loads one
    is named. Only :data:`HEAVY_PARSING_TOOLS` are left out, each a tool that exists.
    ``vpn_plugin.data_paths``, which the tools import for their flags, loads neither; its first
    read of a config applies the compat fixes first (same interpreter)."""
    every = sorted((REPO_ROOT / 'tools').glob('*.py'))
    assert set(HEAVY_PARSING_TOOLS) < {path.stem for path in every}
    tools = [str(path) for path in every if path.stem not in HEAVY_PARSING_TOOLS]
    assert len(tools) >= 14
    done = subprocess.run([sys.executable, '-c', PARSE_ONLY, *tools], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == dict(compat_applied=True,
                                                                   transformers=False)
