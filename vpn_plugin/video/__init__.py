"""From video files to the datasets' per-second S3D features, as P3IV made them: decoding
(ffmpeg of the imageio-ffmpeg package), the frame recipe, 16-frame chunking, sharding over
processes and the resumable extraction loop. Plain torch/numpy: the network (``models.S3D``)
is passed in by the caller (``vpn_plugin.apis.init_s3d``, ``tools/extract_features.py``)."""
from .chunking import CHUNK_FRAMES, chunk_count, embed_frames, frames_to_chunks
from .decode import UnreadableVideoError, decode_video, iter_frame_blocks, jpeg_round_trip
from .extract import (ExtractionResult, extract_videos, feature_name, list_videos,
                      merge_failures, shard)
from .recipe import FrameRecipe

__all__ = ['CHUNK_FRAMES', 'chunk_count', 'embed_frames', 'frames_to_chunks',
           'UnreadableVideoError', 'decode_video', 'iter_frame_blocks', 'jpeg_round_trip',
           'ExtractionResult', 'extract_videos', 'feature_name', 'list_videos',
           'merge_failures', 'shard', 'FrameRecipe']
