"""Write and read videos: MP4 (PyAV, H.264), GIF (Pillow), and side-by-side panels.

Frames are ``(F, H, W, 3)`` arrays, float in ``[0, 1]`` or ``uint8``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def to_uint8(frames: np.ndarray) -> np.ndarray:
    """``(F, H, W, 3)`` float ``[0, 1]`` or uint8 -> uint8."""
    f = np.asarray(frames)
    if f.ndim != 4 or f.shape[-1] != 3:
        raise ValueError(f"expected (frames, height, width, 3) RGB frames, got shape {f.shape}")
    if f.dtype == np.uint8:
        return f
    if not np.isfinite(f).all():
        raise ValueError("frames hold NaN/inf values")
    return (np.clip(f, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)


def upscale(frames: np.ndarray, factor: int) -> np.ndarray:
    """Nearest-neighbour upscaling by an integer ``factor`` (for viewing tiny videos)."""
    if factor < 1:
        raise ValueError(f"upscale factor must be >= 1, got {factor}")
    if factor == 1:
        return frames
    return frames.repeat(factor, axis=1).repeat(factor, axis=2)


def write_mp4(frames: np.ndarray, path: str | Path, fps: int = 8) -> Path:
    """H.264 MP4 (yuv420p; odd sizes are padded by one pixel)."""
    import av

    f = to_uint8(frames)
    pad_h, pad_w = f.shape[1] % 2, f.shape[2] % 2
    if pad_h or pad_w:
        f = np.pad(f, ((0, 0), (0, pad_h), (0, pad_w), (0, 0)), mode="edge")
    path = Path(path)
    from kaleido.atomic import atomic_path

    with atomic_path(path) as tmp, av.open(str(tmp), mode="w", format="mp4") as container:
        stream = container.add_stream("libx264" if "libx264" in av.codecs_available else "mpeg4", rate=fps)
        stream.width, stream.height = f.shape[2], f.shape[1]
        stream.pix_fmt = "yuv420p"
        stream.options = {"crf": "12"} if stream.codec_context.name == "libx264" else {}
        for frame in f:
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def read_video(path: str | Path) -> np.ndarray:
    """Decode an MP4/GIF into ``(F, H, W, 3)`` uint8."""
    import av

    with av.open(str(path)) as container:
        return np.stack([fr.to_ndarray(format="rgb24") for fr in container.decode(video=0)])


def write_gif(frames: np.ndarray, path: str | Path, fps: int = 8) -> Path:
    """Looping GIF (lossless palette per frame, Pillow)."""
    from PIL import Image

    f = to_uint8(frames)
    images = [Image.fromarray(x) for x in f]
    path = Path(path)
    from kaleido.atomic import open_atomic

    with open_atomic(path, "wb") as out:
        images[0].save(out, format="GIF", save_all=True, append_images=images[1:], duration=int(round(1000 / fps)),
                       loop=0)
    return path


def side_by_side(left: np.ndarray, right: np.ndarray, diff_gain: float | None = 4.0, gap: int = 2) -> np.ndarray:
    """``[left | right | gain*|left-right|]`` panels, uint8, separated by ``gap`` white columns.

    ``diff_gain=None`` leaves out the difference panel.
    """
    a, b = to_uint8(left), to_uint8(right)
    if a.shape != b.shape:
        raise ValueError(f"side_by_side needs equal shapes, got {a.shape} and {b.shape}")
    panels = [a, b]
    if diff_gain is not None:
        d = np.abs(a.astype(np.float32) - b.astype(np.float32)) * diff_gain
        panels.append(np.clip(d, 0, 255).astype(np.uint8))
    sep = np.full((a.shape[0], a.shape[1], gap, 3), 255, np.uint8)
    out = [panels[0]]
    for p in panels[1:]:
        out += [sep, p]
    return np.concatenate(out, axis=2)


def write_video_set(frames: np.ndarray, stem: str | Path, fps: int = 8, scale: int = 1) -> dict[str, str]:
    """Write ``<stem>.mp4`` and ``<stem>.gif``; returns their paths."""
    stem = Path(stem)
    f = upscale(to_uint8(frames), scale)
    return {
        "mp4": str(write_mp4(f, stem.with_suffix(".mp4"), fps)),
        "gif": str(write_gif(f, stem.with_suffix(".gif"), fps)),
    }
