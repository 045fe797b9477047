"""``AtomicDumpResults`` (METRICS): mmengine's ``DumpResults`` (``tools/test.py --out``) written
atomically, so a full disk or an unwritable folder leaves no 0-byte or truncated pickle."""
from mmengine.evaluator import BaseMetric, DumpResults
from mmengine.fileio import dump
from mmengine.logging import print_log

from mmaction.registry import METRICS

from ..errors import OutputWriteError, replace_atomically
from ..outputs import has_suffix

SUFFIXES = ('.pkl', '.pickle')


@METRICS.register_module()
class AtomicDumpResults(DumpResults):
    """``DumpResults`` whose pickle is the complete file or absent; a failed write raises
    ``OutputWriteError`` naming the file. It adds no metric; its prefix only keeps mmengine
    from warning "The prefix is not set" on every ``--out``."""

    default_prefix = 'dump'

    def __init__(self, out_file_path: str, collect_device: str = 'cpu',
                 collect_dir=None) -> None:
        # DumpResults compares the suffix with case: test.py accepted --out X.PKL (the one
        # rule, outputs.has_suffix), then mmengine refused "The output file must be a pkl
        # file." (passT H70)
        if not isinstance(out_file_path, str) or not has_suffix(out_file_path, SUFFIXES):
            raise ValueError(f'--out {out_file_path!r}: expected a file name ending in .pkl or '
                             '.pickle (the predictions are pickled)')
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
