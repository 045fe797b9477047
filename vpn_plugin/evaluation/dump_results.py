"""``AtomicDumpResults`` (METRICS): mmengine's ``DumpResults`` (``tools/test.py --out``) written
atomically, so a full disk or an unwritable folder leaves no 0-byte or truncated pickle."""
from mmengine.evaluator import DumpResults
from mmengine.fileio import dump
from mmengine.logging import print_log

from mmaction.registry import METRICS

from ..errors import OutputWriteError, replace_atomically


@METRICS.register_module()
class AtomicDumpResults(DumpResults):
    """``DumpResults`` whose pickle is the complete file or absent; a failed write raises
    ``OutputWriteError`` naming the file. It adds no metric; its prefix only keeps mmengine
    from warning "The prefix is not set" on every ``--out``."""

    default_prefix = 'dump'

    def compute_metrics(self, results: list) -> dict:
        replace_atomically(
            self.out_file_path, lambda temporary: dump(results, str(temporary), file_format='pkl'),
            lambda path, cause: OutputWriteError(
                f'cannot write the predictions {path} (--out): {cause}; nothing was written '
                'there (free disk space or choose a writable folder)'))
        print_log(f'Results has been saved to {self.out_file_path}.', logger='current')
        return {}
