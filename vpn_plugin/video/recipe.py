"""The frame recipe of the public S3D features (P3IV's ``raw_data_process``), each step named.

Default = P3IV: the whole video at 16 fps (ffmpeg ``fps``), the centre square of side
min(w, h), scaled to 224 x 224 (ffmpeg ``scale``, default flags), RGB; each frame through a
JPEG quality-95 round trip (PIL, ``optimize=True``; P3IV stored frames as JPEG in TFRecords);
non-overlapping 16-frame chunks, the last one padded with black; uint8 / 255, no mean/std.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

CROPS = ('center', 'none')


@dataclasses.dataclass(frozen=True)
class FrameRecipe:
    """How frames are made from a video file (module docstring).

    fps: frames per second sampled by ffmpeg's ``fps`` filter (None: the file's own frames).
    crop: 'center' (square of side min(w, h), as P3IV) or 'none' (the whole frame, squashed).
    size: output side in pixels (square frames).
    jpeg_quality: JPEG round trip quality (1-100), None for no round trip.
    chunk: frames per network input (one feature row per chunk).
    """
    fps: Optional[float] = 16.0
    crop: str = 'center'
    size: int = 224
    jpeg_quality: Optional[int] = 95
    chunk: int = 16

    def __post_init__(self):
        if self.fps is not None and not self.fps > 0:
            raise ValueError(f'fps={self.fps}: expected a positive number or None')
        if self.crop not in CROPS:
            raise ValueError(f'crop={self.crop!r} is unknown; expected one of {CROPS}')
        if self.size < 2 or self.size % 2:
            raise ValueError(f'size={self.size}: expected an even number of pixels >= 2 (S3D '
                             'pairs pixels)')
        if self.jpeg_quality is not None and not 1 <= self.jpeg_quality <= 100:
            raise ValueError(f'jpeg_quality={self.jpeg_quality}: expected 1..100 or None')
        if self.chunk < 2 or self.chunk % 2:
            raise ValueError(f'chunk={self.chunk}: expected an even number of frames >= 2')

    def ffmpeg_filter(self) -> str:
        """The ``-vf`` chain: P3IV's ffmpeg-python graph ``fps -> crop -> scale`` (commas in
        the expressions escaped, as ffmpeg's filtergraph syntax needs)."""
        steps = [] if self.fps is None else [f'fps={self.fps:g}']
        if self.crop == 'center':
            side = r'min(iw\,ih)'
            steps.append(f'crop={side}:{side}:(iw-{side})*0.5:(ih-{side})*0.5')
        steps.append(f'scale={self.size}:{self.size}')
        return ','.join(steps)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)
