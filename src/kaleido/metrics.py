"""Video quality against a reference: PSNR and SSIM per frame, LPIPS when possible.

Videos are decoded RGB arrays ``(F, H, W, 3)`` with values in ``[0, 1]`` (what
diffusers pipelines return with ``output_type="np"``).  PSNR uses peak 1.0
(``inf`` for identical frames); SSIM is scikit-image's (Gaussian-free 7x7 window,
channel-averaged, ``data_range=1``).  LPIPS needs the ``lpips`` package, torchvision
and its backbone's pretrained weights on disk; it is never downloaded here: when
any of them is missing the comparison records LPIPS as skipped, with the reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np


def _check_pair(ref: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ref = np.asarray(ref, dtype=np.float64)
    test = np.asarray(test, dtype=np.float64)
    if ref.shape != test.shape:
        raise ValueError(f"videos differ in shape: reference {ref.shape} vs test {test.shape}")
    if ref.ndim != 4 or ref.shape[-1] != 3:
        raise ValueError(f"expected (frames, height, width, 3) RGB videos, got shape {ref.shape}")
    for name, v in (("reference", ref), ("test", test)):
        if not np.isfinite(v).all():
            raise ValueError(f"the {name} video holds NaN/inf values")
        if v.min() < -1e-6 or v.max() > 1 + 1e-6:
            raise ValueError(f"the {name} video has values in [{v.min():.3g}, {v.max():.3g}]; expected [0, 1]")
    return ref, test


def psnr_per_frame(ref: np.ndarray, test: np.ndarray) -> np.ndarray:
    """``(F,)`` PSNR in dB with peak 1.0; ``inf`` where a frame is identical."""
    ref, test = _check_pair(ref, test)
    mse = ((ref - test) ** 2).reshape(ref.shape[0], -1).mean(axis=1)
    with np.errstate(divide="ignore"):
        return np.where(mse > 0, 10.0 * np.log10(1.0 / np.maximum(mse, 1e-300)), np.inf)


def ssim_per_frame(ref: np.ndarray, test: np.ndarray) -> np.ndarray:
    """``(F,)`` SSIM of each RGB frame (scikit-image, ``data_range=1``)."""
    from skimage.metrics import structural_similarity

    ref, test = _check_pair(ref, test)
    win = min(7, ref.shape[1], ref.shape[2])
    win -= 1 - win % 2  # odd window
    return np.array(
        [structural_similarity(r, t, data_range=1.0, channel_axis=-1, win_size=win) for r, t in zip(ref, test)]
    )


def lpips_availability() -> tuple[bool, str]:
    """Whether LPIPS can run offline here, and why not."""
    try:
        import lpips  # noqa: F401
    except Exception as e:  # ImportError, or torchvision failing inside it
        return False, f"the lpips package does not import ({type(e).__name__}: {str(e)[:120]})"
    try:
        import torchvision  # noqa: F401
    except Exception as e:
        return False, f"torchvision does not import beside this torch ({type(e).__name__}: {str(e)[:120]})"
    import torch

    ckpt = torch.hub.get_dir() + "/checkpoints"
    import os

    have = os.path.isdir(ckpt) and any(f.startswith("alexnet") for f in os.listdir(ckpt))
    if not have:
        return False, f"the AlexNet backbone weights are not in {ckpt} and are never downloaded here"
    return True, ""


def lpips_per_frame(ref: np.ndarray, test: np.ndarray) -> np.ndarray:
    """``(F,)`` LPIPS (AlexNet); call only when :func:`lpips_availability` says so."""
    import lpips
    import torch

    ref, test = _check_pair(ref, test)
    net = lpips.LPIPS(net="alex", verbose=False)
    to_t = lambda v: torch.from_numpy(v).permute(0, 3, 1, 2).float() * 2 - 1  # noqa: E731
    with torch.no_grad():
        return net(to_t(ref), to_t(test)).reshape(-1).numpy()


def _jsonable(x: float) -> float | str:
    return "inf" if math.isinf(x) else float(x)


def json_float(x):
    """``x`` as results files keep it: ``"inf"`` for an infinite float (PSNR of identical frames), anything else as
    it is (JSON has no infinity)."""
    return "inf" if isinstance(x, float) and math.isinf(x) else x


@dataclass
class VideoComparison:
    """PSNR/SSIM (and LPIPS, or why not) of a test video against a reference."""

    psnr_db: np.ndarray
    ssim: np.ndarray
    max_abs_diff: float
    lpips: np.ndarray | None = None
    lpips_skipped_reason: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def psnr_mean_db(self) -> float:
        """Mean of the finite per-frame PSNRs (identical frames are counted in
        :attr:`identical_frames`); ``inf`` when every frame is identical."""
        p = self.psnr_db
        if np.isinf(p).all():
            return math.inf
        return float(np.mean(p[np.isfinite(p)]))

    @property
    def identical_frames(self) -> int:
        return int(np.isinf(self.psnr_db).sum())

    @property
    def ssim_mean(self) -> float:
        return float(np.mean(self.ssim))

    def to_dict(self) -> dict:
        return {
            "psnr_db": [_jsonable(x) for x in self.psnr_db],
            "psnr_mean_db": _jsonable(self.psnr_mean_db),
            "identical_frames": self.identical_frames,
            "ssim": [float(x) for x in self.ssim],
            "ssim_mean": self.ssim_mean,
            "max_abs_diff": self.max_abs_diff,
            "lpips": (
                {"status": "computed", "per_frame": [float(x) for x in self.lpips], "mean": float(np.mean(self.lpips))}
                if self.lpips is not None
                else {"status": "skipped", "reason": self.lpips_skipped_reason}
            ),
            **self.extra,
        }


def compare_videos(ref: np.ndarray, test: np.ndarray, lpips: bool = True) -> VideoComparison:
    """Compare ``test`` with ``ref`` (both ``(F, H, W, 3)`` in ``[0, 1]``)."""
    ref, test = _check_pair(ref, test)
    cmp = VideoComparison(psnr_per_frame(ref, test), ssim_per_frame(ref, test), float(np.abs(ref - test).max()))
    if lpips:
        ok, why = lpips_availability()
        if ok:
            cmp.lpips = lpips_per_frame(ref, test)
        else:
            cmp.lpips_skipped_reason = why
    else:
        cmp.lpips_skipped_reason = "not requested"
    return cmp


def bootstrap_interval(per_prompt, n: int = 2000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval (``level``, default 95%) of the mean of ``per_prompt`` (one value per
    prompt, e.g. averaged over its seeds): resample the prompts with replacement ``n`` times. One value gives
    ``(value, value)``; non-finite values are dropped first."""
    x = np.asarray([v for v in per_prompt if np.isfinite(v)], dtype=np.float64)
    if len(x) == 0:
        return float("nan"), float("nan")
    if len(x) < 2:
        return float(x[0]), float(x[0])
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(n, len(x)))].mean(axis=1)
    lo = 100 * (1 - level) / 2
    return float(np.percentile(means, lo)), float(np.percentile(means, 100 - lo))


def rate_interval(successes: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval (``level``, default 95%) of a rate of ``successes`` in ``n`` trials: unlike the
    normal approximation it stays inside [0, 1] and is not empty at 0 or ``n`` successes."""
    from statistics import NormalDist

    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"successes={successes} of n={n}: need 0 <= successes <= n and n >= 1")
    z = NormalDist().inv_cdf(0.5 + level / 2)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    return lo, (1.0 if successes == n else min(1.0, centre + half))
