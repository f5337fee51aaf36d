"""Measurements of the tiny model: VAE PSNR, latent spectrum, flow-matching loss against a
linear baseline, and prompt following.

Clips here are numpy ``(T, H, W, 3)``; ``[-1, 1]`` for model inputs, ``[0, 1]`` where noted
(pipeline output with ``output_type="np"`` is ``[0, 1]``). PSNR uses peak 1 on ``[0, 1]``
pixels (equivalently peak 2 on ``[-1, 1]``), averaged over clips of per-clip PSNR.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch

from kaleido.tiny import data as D

# ------------------------------------------------------------------ prompt following


@dataclass
class PromptCheck:
    """Result of checking one clip against a prompted colour and direction."""

    colour: str
    direction: str
    detected_colour: str | None
    colour_fraction: float  # share of saturated pixels closest to the prompted colour
    displacement_px: tuple[float, float]  # centroid (dx, dy), last frames minus first frames
    colour_ok: bool
    direction_ok: bool

    @property
    def ok(self) -> bool:
        return self.colour_ok and self.direction_ok

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ok"] = self.ok
        return d


def check_prompt_following(clip01: np.ndarray, colour: str, direction: str, saturation_min: float = 0.3,
                           min_area_fraction: float = 0.004, min_shift_fraction: float = 0.08,
                           edge_frames: int = 3) -> PromptCheck:
    """Does ``clip01`` (``(T, H, W, 3)`` in [0, 1]) show a ``colour`` object moving ``direction``?

    Saturated pixels (max - min channel >= ``saturation_min``) are labelled with the nearest
    palette colour (``data.COLOURS``). The colour matches when the prompted colour labels the
    most saturated pixels and covers at least ``min_area_fraction`` of the frame on average.
    The direction matches when the centroid of the prompted colour's pixels, averaged over the
    last ``edge_frames`` frames minus the first ``edge_frames``, moves at least
    ``min_shift_fraction`` x frame width along the prompted direction and more along it than across.
    """
    if colour not in D.COLOURS:
        raise ValueError(f"colour {colour!r} is not one of {list(D.COLOURS)}")
    if direction not in D.DIRECTIONS:
        raise ValueError(f"direction {direction!r} is not one of {list(D.DIRECTIONS)}")
    clip01 = np.asarray(clip01, dtype=np.float32)
    if clip01.ndim != 4 or clip01.shape[-1] != 3 or clip01.shape[0] < 2 * edge_frames:
        raise ValueError(f"clip shape {clip01.shape}: expected (T >= {2 * edge_frames}, H, W, 3) in [0, 1]")
    T, H, W, _ = clip01.shape
    names = list(D.COLOURS)
    palette = np.array([D.COLOURS[n] for n in names], np.float32)
    sat = clip01.max(-1) - clip01.min(-1)
    mask = sat >= saturation_min
    dist = ((clip01[..., None, :] - palette) ** 2).sum(-1)  # (T, H, W, K)
    label = dist.argmin(-1)
    counts = np.array([(mask & (label == k)).sum() for k in range(len(names))])
    target = names.index(colour)
    detected = names[int(counts.argmax())] if counts.sum() > 0 else None
    colour_fraction = float(counts[target] / counts.sum()) if counts.sum() > 0 else 0.0
    obj = mask & (label == target)  # (T, H, W)
    area = obj.reshape(T, -1).mean(1)
    colour_ok = detected == colour and float(area.mean()) >= min_area_fraction
    yy, xx = np.mgrid[0:H, 0:W].astype(np.float32) + 0.5

    def centroid(frames: range):
        w = obj[list(frames)].astype(np.float32)
        total = w.sum()
        if total == 0:
            return None
        return np.array([(w * xx).sum() / total, (w * yy).sum() / total])

    first, last = centroid(range(edge_frames)), centroid(range(T - edge_frames, T))
    if first is None or last is None:
        disp = (0.0, 0.0)
        direction_ok = False
    else:
        d = last - first
        disp = (float(d[0]), float(d[1]))
        ux, uy = D.DIRECTIONS[direction]
        along = d[0] * ux + d[1] * uy
        across = abs(d[0] * uy - d[1] * ux)
        direction_ok = bool(along >= min_shift_fraction * W and along > across)
    return PromptCheck(colour, direction, detected, colour_fraction, disp, bool(colour_ok), direction_ok)


#: prompts of the prompt-following measurement: 6 colours x 4 directions, 2 shapes, 2 backgrounds
EVAL_PROMPTS: list[tuple[str, str, str, str]] = [
    ("red", "circle", "left", "plain"),
    ("green", "square", "right", "striped"),
    ("blue", "triangle", "up", "gradient"),
    ("yellow", "circle", "down", "checkered"),
    ("purple", "square", "left", "cloudy"),
    ("cyan", "circle", "right", "plain"),
    ("red", "square", "up", "checkered"),
    ("blue", "circle", "down", "striped"),
    ("green", "triangle", "left", "gradient"),
    ("yellow", "square", "right", "cloudy"),
    ("purple", "circle", "up", "striped"),
    ("cyan", "triangle", "down", "checkered"),
]


def eval_prompt(colour: str, shape: str, direction: str, background: str) -> str:
    return D.ShapeSpec(colour, shape, "moving", direction, background).prompt


#: the word each attribute is swapped for when measuring how much the model uses it
WORD_SWAPS: dict[str, dict[str, str]] = {
    "direction": {"left": "right", "right": "left", "up": "down", "down": "up"},
    "colour": {"red": "blue", "blue": "green", "green": "red", "yellow": "purple", "purple": "cyan", "cyan": "yellow"},
}


def swapped_prompt(spec: dict, attribute: str | None) -> str:
    """The prompt of a moving procedural clip's ``spec`` with one attribute's word swapped
    (``WORD_SWAPS``); ``None``: the true prompt."""
    if spec.get("motion") != "moving":
        raise ValueError(f"spec {spec} is not a moving clip; word swaps need a colour and a direction")
    spec = dict(spec)
    if attribute is not None:
        if attribute not in WORD_SWAPS:
            raise ValueError(f"attribute {attribute!r} is not one of {list(WORD_SWAPS)}")
        spec[attribute] = WORD_SWAPS[attribute][spec[attribute]]
    return D.ShapeSpec(**spec).prompt


# ------------------------------------------------------------------ VAE


def psnr01(a: np.ndarray, b: np.ndarray) -> float:
    """PSNR (dB, peak 1) of two ``[0, 1]`` arrays."""
    mse = float(np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2))
    return float(10 * np.log10(1.0 / max(mse, 1e-12)))


@torch.no_grad()
def reconstruct(vae, clips: np.ndarray) -> np.ndarray:
    """Encode (posterior mean) and decode ``(N, T, H, W, 3)`` clips in [-1, 1]; same layout back."""
    out = []
    for clip in clips:
        x = D.to_video_tensor(clip[None])
        z = vae.encode(x).latent_dist.mode()
        rec = vae.decode(z).sample
        out.append(rec[0].permute(1, 2, 3, 0).numpy())
    return np.stack(out)


def vae_psnr(vae, clips: np.ndarray) -> list[float]:
    """Per-clip reconstruction PSNR (dB) of ``(N, T, H, W, 3)`` clips in [-1, 1]."""
    rec = reconstruct(vae, clips)
    return [psnr01((c + 1) / 2, (r + 1) / 2) for c, r in zip(clips, rec)]


def heldout_real_windows(n: int, num_frames: int = 17, size: int = 64, seed: int = 99) -> np.ndarray:
    """``n`` windows from the held-out (late) frames of the training clips, same crop protocol as training."""
    rng = np.random.default_rng([seed, 3])
    return D.real_batch(rng, n, num_frames, size, split="heldout")[0]


def heldout_procedural_clips(n: int, num_frames: int = 17, size: int = 64, seed: int = 99):
    rng = np.random.default_rng([seed, 4])
    clips, prompts, specs = D.procedural_batch(rng, n, num_frames, size)
    return clips, prompts, specs


def carphone_clip(num_frames: int = 17, start: int = 0) -> np.ndarray:
    """The first ``num_frames`` frames of ``carphone_pristine`` (176x144, cropped to 176x144 -> 144x176)
    in [-1, 1], ``(1, T, 144, 176, 3)``; never used for training."""
    video = D.split_frames("carphone_pristine", "heldout")[start : start + num_frames]
    return (video.astype(np.float32) / 127.5 - 1.0)[None]


# ------------------------------------------------------------------ flow matching vs linear baseline


def fit_linear_predictors(x_train: torch.Tensor, sigmas: list[float], n_clips: int = 512, seed: int = 5) -> list[torch.Tensor]:
    """Best per-token linear map (channel mixing + bias) from ``x_sigma`` to ``v = eps - x0`` at each sigma,
    least squares on (normalised) training latents ``(N, C, t, h, w)``. Returns ``(C + 1, C)`` matrices."""
    gen = torch.Generator().manual_seed(seed)
    idx = torch.randperm(len(x_train), generator=gen)[:n_clips]
    x0 = x_train[idx].double()
    maps = []
    for s in sigmas:
        noise = torch.randn(x0.shape, generator=gen, dtype=torch.float64)
        x_t = (1 - s) * x0 + s * noise
        v = noise - x0
        X = x_t.transpose(0, 1).reshape(x0.shape[1], -1).T
        X = torch.cat([X, torch.ones(len(X), 1, dtype=X.dtype)], 1)
        Y = v.transpose(0, 1).reshape(x0.shape[1], -1).T
        maps.append(torch.linalg.lstsq(X, Y).solution.float())
    return maps


def linear_predict(weights: torch.Tensor, x_t: torch.Tensor) -> torch.Tensor:
    """Apply a ``(C + 1, C)`` channel map to ``(B, C, t, h, w)``."""
    x = x_t.movedim(1, -1)
    return (x @ weights[:-1] + weights[-1]).movedim(-1, 1)


def save_loss_curve_plot(sigmas: list[float], model_loss: list[float], linear_loss: list[float], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.plot(sigmas, model_loss, "o-", label="tiny Wan transformer (EMA)")
    ax.plot(sigmas, linear_loss, "s--", label="best per-token linear predictor")
    ax.set_xlabel("noise level sigma (t = 1000 sigma)")
    ax.set_ylabel("flow-matching MSE (held-out)")
    ax.set_title("Validation loss per timestep")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    from kaleido.atomic import open_atomic

    with open_atomic(path, "wb") as out:
        fig.savefig(out, format="png", dpi=100)
    plt.close(fig)
