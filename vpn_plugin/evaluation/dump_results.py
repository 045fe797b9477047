"""``AtomicDumpResults`` (METRICS): mmengine's ``DumpResults`` (``tools/test.py --out``) written
atomically, so a full disk or an unwritable folder leaves no 0-byte or truncated pickle."""
from typing import Optional

from mmengine.evaluator import BaseMetric, DumpResults
from mmengine.fileio import dump
from mmengine.logging import print_log

from mmaction.registry import METRICS

from ..config_types import checked_arguments
from ..errors import OutputWriteError, replace_atomically
from ..outputs import has_suffix


@METRICS.register_module()
class AtomicDumpResults(DumpResults):
    """``DumpResults`` whose pickle is the complete file or absent; a failed write raises
    ``OutputWriteError`` naming the file. It adds no metric; its prefix only keeps mmengine
    from warning "The prefix is not set" on every ``--out``."""

    default_prefix = 'dump'

    @checked_arguments(prefix='AtomicDumpResults: ')
    def __init__(self, out_file_path: str, collect_device: str = 'cpu',
                 collect_dir: Optional[str] = None):
        # mmengine's check compares the suffix with its case: `--out preds.PKL`, which
        # tools/test.py accepts (outputs.has_suffix, the one rule), was refused by it
        if not has_suffix(out_file_path, ('.pkl', '.pickle')):
            raise ValueError(f'--out {out_file_path}: expected a file name ending in .pkl or '
                             '.pickle (the predictions pickle of tools/test.py)')
        BaseMetric.__init__(self, collect_device=collect_device, collect_dir=collect_dir)
        self.out_file_path = out_file_path

    def compute_metrics(self, results: list) -> dict:
        replace_atomically(
            self.out_file_path, lambda temporary: dump(results, str(temporary), file_format='pkl'),
            lambda path, cause: OutputWriteError(
                f'cannot write the predictions {path} (--out): {cause}; nothing was written '
                'there (free disk space or choose a writable folder)'))
        print_log(f'Results has been saved to {self.out_file_path}.', logger='current')
        return {}
