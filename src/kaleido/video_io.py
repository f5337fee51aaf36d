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


def side_by_side(left: np.ndarray, right: np.ndarray, diff_gain: float | None = 4.0, gap: int = 2, scale: int = 1,
                 labels: tuple[str, str] | None = None) -> np.ndarray:
    """``[left | right | gain*|left-right|]`` panels, uint8, separated by ``gap`` white columns.

    Each panel is upscaled by ``scale`` (nearest) first; with ``labels`` (e.g. ``("dense", "Kaleido")``,
    what ``kaleido generate`` writes) a white band above the panels names each one (``labels`` for the
    first two, ``|difference| x<gain>`` for the third), so a GIF says what it shows. ``diff_gain=None``
    leaves out the difference panel.
    """
    a, b = to_uint8(left), to_uint8(right)
    if a.shape != b.shape:
        raise ValueError(f"side_by_side needs equal shapes, got {a.shape} and {b.shape}")
    panels = [a, b]
    names = list(labels or ())
    if diff_gain is not None:
        d = np.abs(a.astype(np.float32) - b.astype(np.float32)) * diff_gain
        panels.append(np.clip(d, 0, 255).astype(np.uint8))
        names.append(f"|difference| x{diff_gain:g}")
    panels = [upscale(p, scale) for p in panels]
    sep = np.full((a.shape[0], panels[0].shape[1], gap, 3), 255, np.uint8)
    out = [panels[0]]
    for p in panels[1:]:
        out += [sep, p]
    video = np.concatenate(out, axis=2)
    if labels is None:
        return video
    band = label_band(names, panels[0].shape[2], gap)
    return np.concatenate([np.broadcast_to(band, (video.shape[0], *band.shape)), video], axis=1)


def label_band(names: list[str], panel_width: int, gap: int) -> np.ndarray:
    """``(h, W, 3)`` uint8: black text on white, each name centred over its panel of ``panel_width``
    pixels (panels ``gap`` apart). The font is the largest (up to 16 px, 1/8 of a panel) at which every name
    fits its panel; a name that does not fit at 6 px says "diff" for "difference", then is cut to what fits."""
    from PIL import Image, ImageDraw, ImageFont

    width = len(names) * panel_width + (len(names) - 1) * gap
    size = max(6, min(16, panel_width // 8))

    def text_w(font, t):
        box = ImageDraw.Draw(Image.new("RGB", (1, 1))).textbbox((0, 0), t, font=font)
        return box[2] - box[0]

    font = ImageFont.load_default(size=size)
    while size > 6 and max(text_w(font, n) for n in names) > panel_width - 2:
        size -= 1
        font = ImageFont.load_default(size=size)
    fitted = []
    for n in names:
        if text_w(font, n) > panel_width - 2:
            n = n.replace("difference", "diff")
        while len(n) > 1 and text_w(font, n) > panel_width - 2:
            n = n[:-1]
        fitted.append(n)
    height = size + 6
    img = Image.new("RGB", (width, height), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    for i, n in enumerate(fitted):
        x0 = i * (panel_width + gap) + (panel_width - text_w(font, n)) // 2
        draw.text((x0, 2), n, fill=(0, 0, 0), font=font)
    return np.asarray(img, dtype=np.uint8)


def write_video_set(frames: np.ndarray, stem: str | Path, fps: int = 8, scale: int = 1) -> dict[str, str]:
    """Write ``<stem>.mp4`` and ``<stem>.gif``; returns their paths."""
    stem = Path(stem)
    f = upscale(to_uint8(frames), scale)
    return {
        "mp4": str(write_mp4(f, stem.with_suffix(".mp4"), fps)),
        "gif": str(write_gif(f, stem.with_suffix(".gif"), fps)),
    }
