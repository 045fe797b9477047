"""Convert EgoPER's annotation.json and split lists into the plugin's custom JSON dataset.

    python tools/convert_egoper.py EgoPER/annotation.json --split-dir EgoPER/splits \
        --out data/egoper --errors drop [--feature-stem '{vid}'] [--feature-dir DIR]

Writes ``<out>/{taxonomy,train,test}.json`` (format: configs/_base_/datasets/custom_json.py),
``<out>/conversion.json`` (the choices and the counts of dropped / kept segments) and
``<out>/dataset.py``, a dataset config for them: all of them or none (one conversion into an
``--out`` at a time: a second is refused while the first holds ``--out``'s lock). Background
segments (action 0) are dropped; segments with ``action_type > 0`` (an error kind) are kept as their action or dropped, as
``--errors`` says (no default: it changes the task); the choice is recorded in
conversion.json and, through ``dataset.py``'s ``dataset_variant``, in every protocol results
row. Feature files: ``<feature dir>/<stem>.npy|.npz`` with the stem from ``--feature-stem``
({vid}, {task}). Format details: vpn_plugin/datasets/egoper.py.
"""
import argparse
import json
import sys

from pathlib import Path

from vpn_plugin.errors import parse_once, path_argument, tool_main
from vpn_plugin.locks import exclusive_lock, lock_path_of
from vpn_plugin.outputs import add_overwrite_argument
from vpn_plugin.tool_choices import ERROR_CHOICES
# the converter (vpn_plugin.datasets: torch) is imported after the arguments are parsed
# (--help and refusals answer in ~0.1 s; tests/test_import_purity.py)


@tool_main
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('annotation', type=path_argument, help="EgoPER's annotation.json")
    parser.add_argument('--split-dir', type=path_argument, required=True,
                        help='folder with training.txt and test.txt (or <task>/training.txt ...)')
    parser.add_argument('--out', type=path_argument, required=True, help='output folder')
    parser.add_argument('--errors', choices=ERROR_CHOICES, required=True,
                        help='keep error segments (action_type > 0) as their action, or drop them')
    parser.add_argument('--feature-stem', default='{vid}',
                        help='feature file name (no extension) of a video: {vid}, {task}')
    parser.add_argument('--feature-dir', type=path_argument,
                        help='folder of the feature files written into '
                        'dataset.py (default: <out>/features)')
    add_overwrite_argument(parser, 'files in --out that an earlier conversion did not write')
    args = parse_once(parser, argv)
    from vpn_plugin.datasets.egoper import SPLIT_FILES, check_out_dir, convert_egoper
    split_files = [p for name in SPLIT_FILES.values()
                   for p in Path(args.split_dir).glob(f'**/{name}')]
    check_out_dir(args.out, [args.annotation, *split_files], args.overwrite)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)  # the lock file's folder
    with exclusive_lock(lock_path_of(args.out), wait=False,
                        what=f'--out {args.out} (an EgoPER conversion)', discard_if_refused=True):
        check_out_dir(args.out, [args.annotation, *split_files], args.overwrite)
        earlier = earlier_conversion(args.out)
        record = convert_egoper(args.annotation, args.split_dir, args.out, args.errors,
                                args.feature_stem, args.feature_dir)
    print(json.dumps(record, indent=1))
    say_replaced(args.out, earlier, record)
    return 0


def earlier_conversion(out) -> dict:
    """The ``conversion.json`` an earlier conversion left in ``out`` ({} if none; check_out_dir
    has refused any other file there)."""
    path = Path(out) / 'conversion.json'
    return json.loads(path.read_text()) if path.is_file() else {}


def say_replaced(out, earlier: dict, record: dict) -> None:
    """An earlier conversion in ``out`` with other choices or inputs (``--errors drop`` ->
    ``keep``, another annotation.json) was replaced: said, so that a checkpoint or result of
    the earlier dataset is not taken to still match."""
    changed = [f'{key} {earlier.get(key)!r} -> {record.get(key)!r}' for key in record
               if earlier and earlier.get(key) != record.get(key)]
    if changed:
        print(f'{out}: replaced the earlier conversion there ({"; ".join(changed)}); '
              'checkpoints and results of the earlier dataset no longer match it',
              file=sys.stderr)


if __name__ == '__main__':
    sys.exit(main())
