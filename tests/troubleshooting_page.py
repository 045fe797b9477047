"""docs/troubleshooting.md: every message the code raises to a user, grouped by situation.

The messages are read from the source (``raise X(<message>)``, ``parser.error(<message>)`` in
``vpn_plugin/`` and ``tools/``), so the page cannot miss one: ``tests/test_docs_commands.py``
checks that the committed page is the one this module writes. After adding or changing a
message, rewrite the page:

    .venv/bin/python tests/troubleshooting_page.py

A message of a file no section names lands in "Other messages"; give its file a section below.
"""
from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / 'docs' / 'troubleshooting.md'
NOT_FOR_USERS = {'AssertionError', '_Rejected', 'importlib.metadata.PackageNotFoundError'}

# (title, sources, fix): a source is a file, or 'file|words' for the messages of that file
# holding those words; each message goes to the first section that names it
SECTIONS = [
    ('Installing and importing',
     ['vpn_plugin/compat.py|localizers.drn', 'vpn_plugin/compat.py|mmaction2 is not installed',
      'vpn_plugin/compat.py|importlib-metadata', 'vpn_plugin/compat.py|can not infer',
      'vpn_plugin/compat.py|namespace package',
      'vpn_plugin/models/text_embeddings.py|needs the package'],
     'Run `make test` (or `.venv/bin/pip install -e .[test]`) to install what setup.cfg pins; '
     'see [install.md](install.md#compatibility-notes) for what `vpn_plugin/compat.py` works '
     'around.'),
    ('Config files, `--cfg-options` and tool flags',
     ['vpn_plugin/errors.py', 'vpn_plugin/data_paths.py', 'vpn_plugin/runner.py',
      'vpn_plugin/config_types.py', 'tools/train.py|--auto-scale-lr', 'tools/train.py|--amp',
      'tools/make_synthetic_features.py', 'tools/quickstart.py',
      'tools/convert_authors_checkpoint.py', 'vpn_plugin/compat.py|dist_cfg'],
     'The message names the config file, the key and the close match; a misspelled key is '
     'refused because it would be ignored, and so is a value of another kind than its option '
     'declares (`True` for a count, `nan` for a weight). Data locations are the top-level `data_root`, '
     '`feature_dir`, `cache_dir` (or `--data-root` / `--feature-dir`): [data.md](data.md); the '
     'horizon is set once (`horizon = T`, `--horizon T`): '
     '[methods.md](methods.md#configs-horizon-and-the-pkg).'),
    ('Output files',
     ['vpn_plugin/outputs.py'],
     'No tool writes over one of its inputs, a folder, a device or a file it did not write: '
     'choose another name, or pass `--overwrite` for an existing file of another kind; an '
     'earlier output of the same tool is replaced without it: '
     '[usage.md](usage.md#output-files).'),
    ('Feature files and text features',
     ['vpn_plugin/datasets/features.py', 'vpn_plugin/datasets/provenance.py',
      'vpn_plugin/datasets/safe_pickle.py',
      'tools/convert_features.py', 'tools/make_text_features.py',
      'vpn_plugin/models/text_embeddings.py'],
     'A missing feature folder prints the command that writes synthetic features for it. Real '
     'features load in every layout in circulation ([data.md](data.md#use-the-real-features)); '
     'a pickled file naming any global other than numpy arrays and plain data is refused: it '
     'could run code. Text features are `(N, 6, D)` float arrays (3 "before" + 3 "after" '
     'sentences per action) or computed from a taxonomy and state descriptions with a local '
     'encoder.'),
    ('Annotations, taxonomies, window files and splits',
     ['vpn_plugin/datasets/'],
     'Each message names the file, the entry or line, the video, the field and the value. Fix '
     'the file (formats: [data.md](data.md) and `../shared/data/README.md`), or, for errors '
     'confined to one video, set `skip_bad_videos=True` in the dataset config: such videos are '
     'then skipped, counted and logged.'),
    ('Models and their options',
     ['vpn_plugin/models/', 'vpn_plugin/engine/pdpp_training.py',
      'vpn_plugin/engine/kepp_training.py'],
     'Model options, their ranges and the PKG perturbations: [methods.md](methods.md). A '
     'planner refuses to predict before its PKG (and, for PDPP, its task classifier; for KEPP, '
     'its step model: [kepp.md](kepp.md)) is filled: train with the config (its hooks fill '
     'them) or load a checkpoint that carries them.'),
    ('Checkpoints, resume and work dirs',
     ['tools/train.py', 'tools/test.py', 'vpn_plugin/engine/', 'vpn_plugin/compat.py'],
     'Checkpoints load strictly and work dirs are never mixed between runs: continue a run with '
     '`--resume`, start afresh with `--overwrite`, test a checkpoint with the config it was '
     'trained with (its text features included), fine-tune from another model with '
     '`--cfg-options load_from=CKPT load_partial=True`; a checkpoint that records nothing of '
     'what it was trained for is scored only with `--cfg-options unchecked_checkpoint=True`, '
     'and marked: [reproducibility.md](reproducibility.md#resume-and-checkpoints).'),
    ('Whole trainings against the official code',
     ['vpn_plugin/protocol/official/', 'tools/compare_official_training.py'],
     'Pass a checkout of the official repository (`--official-dir`, never modified: a copy '
     'runs) and a python with its dependencies (`--official-python`); a rerun with the same '
     'settings reuses every finished seed, other settings need another `--out`: '
     '[reproducibility.md](reproducibility.md#whole-trainings-against-the-official-code).'),
    ('Protocol runs, results files, tables and figures',
     ['vpn_plugin/protocol/', 'tools/run_protocol.py', 'tools/report.py', 'tools/plots.py'],
     'Run `tools/run_protocol.py CONFIG --dry-run` first: it checks every config and option. A '
     'cell of a table averages the seeds of one run setting: filter with `--protocol`, '
     '`--variant` or `--methods`; a work dir made with other settings is never reused (delete '
     'it or give another `--out`): [protocol.md](protocol.md).'),
    ('LLM / VLM baselines',
     ['tools/llm_eval.py', 'vpn_plugin/baselines/llm/'],
     'A request that still fails after the retries stops the run without writing a row '
     '(replies that succeeded are cached, so a rerun pays only for the rest), unless '
     '`--allow-failures`. Replies that cannot be parsed or name actions outside the taxonomy '
     'are not errors: they are counted as wrong plans. [llm.md](llm.md).'),
    ('Oracle checks',
     ['vpn_plugin/oracles/', 'tools/check_'],
     'Each checker reads one fixture folder of `../shared/reference` (its `meta.json` names the '
     'method): [reproducibility.md](reproducibility.md#oracle-checks).'),
    ('Video files, S3D weights and feature extraction',
     ['vpn_plugin/video/', 'vpn_plugin/models/s3d.py', 'vpn_plugin/apis/video.py',
      'tools/extract_features.py', 'tools/benchmark_extract.py', 'tools/plan.py|--video',
      'tools/plan.py|--s3d-weights', 'tools/plan.py|checkpoint is given twice'],
     'The S3D weights and how the features are made: '
     '[video_features.md](video_features.md); an unreadable video is listed with the reason in '
     '`<out>/failures.tsv` and gets no feature file; a resumed run extracts only what is '
     'missing.'),
    ('The Python API, the metric and the core math',
     ['vpn_plugin/apis/', 'vpn_plugin/evaluation/', 'vpn_plugin/core/', 'tools/benchmark_dvl.py'],
     'Shapes and value ranges of every function: [core.md](core.md); the API: '
     '[usage.md](usage.md#python-api).'),
    ('Other messages', [''], 'See the page of the tool or method that printed it.'),
]

HEAD = '''# Troubleshooting: every error message, by situation

Back to [README](../README.md).

Bad input ends every tool with one message on stderr and exit status 1, and writes nothing:

    error: <the message: the file, the field, the value, what was expected, the fix>
    (set VPN_TRACEBACK=1 for the traceback)

`VPN_TRACEBACK=1` keeps the traceback (for a bug report). The messages below are those the code
raises ({count} of them, `vpn_plugin/` and `tools/`, in the words of the code: `<name>` stands
for the value the message shows), grouped by the situation you meet them in, with the fix. Find
yours with your browser's search on a few fixed words of it. An option of a tool that does not
exist, or a value outside its choices, is refused by the tool's argument parser before anything
runs (argparse: the usage line and exit status 2). This page is written by
`tests/troubleshooting_page.py` from the source.

## The most common

- `PlanningDataset: feature_dir ... does not exist.`: the features were never made; the message
  prints the command that writes synthetic ones (`tools/make_synthetic_features.py --dataset
  <dataset> ...`), or point `--feature-dir DIR` at real ones ([data.md](data.md)).
- `the work dir ... already holds checkpoints of another run`: continue that run with `--resume`,
  start afresh with `--overwrite` (deletes its checkpoints), or give another `--work-dir`.
- `checkpoint ... does not fit the model ...`: test a checkpoint with the config it was trained
  with (same model, horizon, dataset); to start a fine-tuning from it:
  `--cfg-options load_from=CKPT load_partial=True`.
- `--api-key-env NAME: environment variable is not set`: export NAME; a local server (vLLM,
  Ollama) needs no key: leave `--api-key-env` out (the key is then `OPENAI_API_KEY` when set,
  else `EMPTY`).
- `rows of method ... differ in ...`: a table cell averages the seeds of one run setting; keep
  one with `--protocol`, `--variant` or `--methods`.
- `... is unknown; did you mean ...?`: a misspelled config key or option; a new key would be
  ignored, so it is refused (name a helper variable of a config with a leading `_`).
'''


def _placeholder(node) -> str:
    if isinstance(node, ast.Attribute):
        return f'<{node.attr}>'
    if isinstance(node, ast.Name):
        return f'<{node.id}>'
    if isinstance(node, ast.Call) and getattr(node.func, 'id', '') == 'len':
        return '<n>'
    if isinstance(node, ast.Subscript):
        return _placeholder(node.value)
    return '<…>'


def _text(node) -> str | None:
    """The message an expression builds, its values as ``<name>`` (None if it builds none)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return ''.join(part.value if isinstance(part, ast.Constant) else _placeholder(part.value)
                       for part in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return (_text(node.left) or '<…>') + (_text(node.right) or '<…>')
    if isinstance(node, ast.Call) and getattr(node.func, 'attr', '') == 'format':
        return _text(node.func.value)
    return None


def raised_messages() -> dict[str, list[str]]:
    """``{source file: [message, ...]}`` of every raise and parser error with a message."""
    found = {}
    files = sorted((REPO / 'vpn_plugin').rglob('*.py')) + sorted((REPO / 'tools').glob('*.py'))
    for path in files:
        messages = []
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                call, kind = node.exc, ast.unparse(node.exc.func)
            elif isinstance(node, ast.Call) and ast.unparse(node.func).endswith('parser.error'):
                call, kind = node, 'usage'
            else:
                continue
            if not call.args or kind in NOT_FOR_USERS:
                continue
            # BadVideoError(vid, reason, message)
            text = _text(call.args[-1] if kind.endswith('BadVideoError') else call.args[0])
            if text and len(text) >= 12:
                text = re.sub(r'\s+', ' ', text).strip()
                if text not in messages:
                    messages.append(text)
        if messages:
            found[str(path.relative_to(REPO))] = messages
    return found


def _bullet(text: str) -> str:
    return f'  - `` {text} ``' if '`' in text else f'  - `{text}`'


def render_page(messages: dict | None = None) -> str:
    messages = raised_messages() if messages is None else messages
    placed, body = set(), []
    for title, sources, fix in SECTIONS:
        items = []
        for source in sources:
            prefix, _, words = source.partition('|')
            for file, texts in messages.items():
                items += [(file, text) for text in texts if file.startswith(prefix)
                          and words in text and (file, text) not in placed]
                placed.update(items)
        if not items:
            continue
        body += ['', f'## {title}', '', textwrap.fill(fix, 100), '']
        current = None
        for file, text in items:
            if file != current:
                body.append(f'- `{file}`:')
                current = file
            body.append(_bullet(text))
    return HEAD.format(count=len(placed)) + '\n'.join(body).rstrip() + '\n'


if __name__ == '__main__':
    PAGE.write_text(render_page())
    print(f'wrote {PAGE.relative_to(REPO)}')
