"""From video files to the datasets' per-second S3D features, as P3IV made them: decoding
(ffmpeg of the imageio-ffmpeg package), the frame recipe, 16-frame chunking, sharding over
processes and the resumable extraction loop. Plain torch/numpy: the network (``models.S3D``)
is passed in by the caller (``vpn_plugin.apis.init_s3d``, ``tools/extract_features.py``)."""
from .decode import UnreadableVideoError, decode_video, iter_frame_blocks, jpeg_round_trip
from .recipe import FrameRecipe

# chunking and extract import torch: their names load on first use (PEP 562), so that the
# tools reading the recipe's flags (vpn_plugin.video.recipe) answer --help and refuse a flag
# without torch (tests/test_import_purity.py)
TORCH_EXPORTS = {'CHUNK_FRAMES': 'chunking', 'chunk_count': 'chunking',
                 'embed_frames': 'chunking', 'frames_to_chunks': 'chunking',
                 'ExtractionResult': 'extract', 'extract_videos': 'extract',
                 'feature_name': 'extract', 'list_videos': 'extract',
                 'merge_failures': 'extract', 'shard': 'extract'}


def __getattr__(name):
    if name not in TORCH_EXPORTS:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    import importlib
    return getattr(importlib.import_module(f'{__name__}.{TORCH_EXPORTS[name]}'), name)


__all__ = ['CHUNK_FRAMES', 'chunk_count', 'embed_frames', 'frames_to_chunks',
           'UnreadableVideoError', 'decode_video', 'iter_frame_blocks', 'jpeg_round_trip',
           'ExtractionResult', 'extract_videos', 'feature_name', 'list_videos',
           'merge_failures', 'shard', 'FrameRecipe']
