"""The consistency student's model-card figures: how close the distribution of its videos comes to its teacher's.

Under the consistency sampler every step re-noises with fresh noise, so a seed's video is not the teacher's
video of that seed, and PSNR against the teacher says little. This card scores **distributions** instead, on
the comparison's 8 held-out prompts (never trained on) x ``n_seeds`` seeds per contender:

* **Frechet distance** (FD) between the feature statistics (mean, covariance) of a contender's videos and of a
  reference set of the teacher's (``tiny``, 25 Euler steps, guidance 5) drawn from *other* seeds. The feature
  space is fixed and hand-made (:func:`video_features`, 20 numbers per video: the mean colour of each spatial
  quadrant, the colour spread, the saturation, the frame-to-frame change and the motion of the saturated pixels'
  centroid), standardised by the reference set's own mean and spread. Why not a learned video network (FVD's
  I3D): none can be downloaded here, and one trained on natural video would score 64x64 shapes on backgrounds
  on features they do not have; these 20 are what the miniature world varies in (which colour where, how much
  it moves, which way), and they depend on no model under test. The teacher against itself on other seeds
  (``teacher-25``) gives the distance that sampling alone leaves.
* **The prompt-following probe** (:func:`kaleido.tiny.evaluate.check_prompt_following`): is the prompted colour
  the dominant saturated one, and does it move the prompted way.

Contenders: the teacher run naively at 4 and 8 steps with each sampler (two calls per step), ``tiny-turbo``
(its own Euler sampler, and the consistency sampler) and ``tiny-rcm`` (consistency, TurboDiffusion's times).
FD intervals: 95% bootstrap over videos (both sets resampled), shifted by the bootstrap's bias estimate
(:func:`fd_with_interval`).

``python -m kaleido.tiny.distribution_card --json docs/tiny-rcm/card.json --samples docs/samples/tiny-rcm``
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

#: the reference set's seeds start here (the contenders' at 0): the teacher's reference videos are never a
#: contender's
REFERENCE_SEED_BASE = 10_000
N_FEATURES = 20


def video_features(clip01: np.ndarray, saturation_min: float = 0.3) -> np.ndarray:
    """20 numbers of one video ``(T, H, W, 3)`` in [0, 1] (see the module docstring), in this order: the mean
    colour (RGB) of each spatial quadrant (12), the colour spread (std of each channel, 3), the mean saturation
    (max - min channel, 1), the mean absolute frame-to-frame change (1), the spread of the frame means over time
    (1), the displacement of the saturated pixels' centroid from the first to the last third of the frames in x
    and y (2, fractions of the frame; 0 where no pixel is saturated)."""
    x = np.asarray(clip01, dtype=np.float64)
    if x.ndim != 4 or x.shape[-1] != 3:
        raise ValueError(f"a video is (T, H, W, 3); got shape {x.shape}")
    t, h, w, _ = x.shape
    quads = [x[:, :h // 2, :w // 2], x[:, :h // 2, w // 2:], x[:, h // 2:, :w // 2], x[:, h // 2:, w // 2:]]
    out = [q.mean(axis=(0, 1, 2)) for q in quads]
    out.append(x.reshape(-1, 3).std(axis=0))
    sat = x.max(axis=-1) - x.min(axis=-1)
    out.append([sat.mean()])
    out.append([np.abs(np.diff(x, axis=0)).mean() if t > 1 else 0.0])
    out.append([x.mean(axis=(1, 2, 3)).std()])
    mask = sat >= saturation_min
    ys, xs = np.mgrid[0:h, 0:w]
    cents = []
    for k in range(t):
        m = mask[k]
        cents.append((xs[m].mean() / w, ys[m].mean() / h) if m.any() else (np.nan, np.nan))
    cents = np.asarray(cents)
    third = max(1, t // 3)
    first, last = np.nanmean(cents[:third], axis=0) if np.isfinite(cents[:third]).any() else (np.nan, np.nan), \
        np.nanmean(cents[-third:], axis=0) if np.isfinite(cents[-third:]).any() else (np.nan, np.nan)
    shift = np.nan_to_num(np.asarray(last, dtype=float) - np.asarray(first, dtype=float))
    out.append(shift)
    return np.concatenate([np.ravel(v) for v in out])


def frechet_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Frechet distance between Gaussians fitted to the rows of ``a`` and ``b``:
    ``|mu_a - mu_b|^2 + tr(S_a + S_b - 2 (S_a S_b)^(1/2))``."""
    mu_a, mu_b = a.mean(0), b.mean(0)
    sa, sb = np.atleast_2d(np.cov(a, rowvar=False)), np.atleast_2d(np.cov(b, rowvar=False))
    # tr (S_a S_b)^(1/2) is the sum of the square roots of S_a S_b's eigenvalues (real and >= 0 for PSD S_a, S_b;
    # clipped where rounding leaves them a hair below 0 or complex)
    eig = np.linalg.eigvals(sa @ sb)
    root_trace = np.sqrt(np.clip(eig.real, 0.0, None)).sum()
    return float(((mu_a - mu_b) ** 2).sum() + np.trace(sa) + np.trace(sb) - 2 * root_trace)


def standardise(reference: np.ndarray, *others: np.ndarray) -> list[np.ndarray]:
    """``reference`` and ``others`` z-scored with the reference's mean and spread (a constant feature: spread 1)."""
    mu, sd = reference.mean(0), reference.std(0)
    sd = np.where(sd > 1e-9, sd, 1.0)
    return [(m - mu) / sd for m in (reference, *others)]


def fd_with_interval(ref: np.ndarray, other: np.ndarray, n: int = 300, seed: int = 0) -> tuple[float, list[float]]:
    """FD of ``other`` to ``ref`` (both already standardised) and its 95% bootstrap interval (both sets resampled).

    A resampled set repeats videos, which shrinks its spread and raises the FD (with 64 videos in 20 dimensions
    the bootstrap FDs lie almost all above the estimate), so the interval is the bootstrap percentiles shifted by
    the bootstrap's own bias estimate (mean of the resampled FDs minus the estimate)."""
    rng = np.random.default_rng(seed)
    vals = np.asarray([frechet_distance(ref[rng.integers(len(ref), size=len(ref))],
                                        other[rng.integers(len(other), size=len(other))]) for _ in range(n)])
    fd = frechet_distance(ref, other)
    shifted = vals - (vals.mean() - fd)
    return fd, [float(np.percentile(shifted, 2.5)), float(np.percentile(shifted, 97.5))]


@dataclass(frozen=True)
class Contender:
    name: str
    model: str
    steps: int | None  # None: the model's own
    sampler: str | None  # None: the model's own
    calls_per_step: int


CONTENDERS = (
    Contender("teacher-25", "tiny", None, None, 2),
    Contender("teacher-8 euler", "tiny", 8, None, 2),
    Contender("teacher-8 consistency", "tiny", 8, "consistency", 2),
    Contender("teacher-4 euler", "tiny", 4, None, 2),
    Contender("teacher-4 consistency", "tiny", 4, "consistency", 2),
    Contender("tiny-turbo euler", "tiny-turbo", None, None, 1),
    Contender("tiny-turbo consistency", "tiny-turbo", None, "consistency", 1),
    Contender("tiny-rcm consistency", "tiny-rcm", None, None, 1),
)


def _videos(pipe, prompts: list[str], seeds: list[int], steps: int | None, sampler: str | None) -> np.ndarray:
    """One video per (prompt, seed) pair, in one batched call per seed (generators of the seed, one per prompt)."""
    from kaleido.sampling import using

    out = []
    kw = {} if steps is None else dict(num_inference_steps=steps)
    for seed in seeds:
        gens = [torch.Generator().manual_seed(seed) for _ in prompts]
        with torch.no_grad(), using(pipe, sampler, seed):
            out.append(np.asarray(pipe(list(prompts), generator=gens, output_type="np", **kw).frames))
    return np.concatenate(out)


def _probe(videos: np.ndarray, prompts: list[str]) -> tuple[float, float]:
    from kaleido.tiny.evaluate import check_prompt_following

    colour, direction = [], []
    for v, p in zip(videos, prompts):
        words = p.split()
        c = check_prompt_following(np.clip(v, 0, 1), words[1], words[words.index("moving") + 1])
        colour.append(c.colour_ok)
        direction.append(c.direction_ok)
    return float(np.mean(colour)), float(np.mean(direction))


def probe_fields(colour: float, direction: float, n: int) -> dict:
    """The probe's two rates over ``n`` videos with their 95% Wilson intervals (:func:`kaleido.metrics.
    rate_interval`): at 64 videos a rate moves by 1.6 points per video, so the intervals say what can be told apart."""
    from kaleido.metrics import rate_interval

    out = {}
    for name, rate in (("colour", colour), ("direction", direction)):
        out[f"{name}_rate"] = rate
        out[f"{name}_ci95"] = [round(v, 4) for v in rate_interval(round(rate * n), n)]
    return out


def measure(prompts, n_seeds: int = 8, samples_dir: Path | None = None, progress: bool = True,
            contenders=CONTENDERS) -> dict:
    """The card's figures (see the module docstring)."""
    from kaleido.tiny.pipeline import load_pipeline
    from kaleido.tiny.report import sample_stem, save_gif

    prompts = list(prompts)
    pipes: dict[str, object] = {}

    def pipe_of(model):
        if model not in pipes:
            pipes[model] = load_pipeline(model)
            pipes[model].set_progress_bar_config(disable=True)
        return pipes[model]

    t0 = time.time()
    ref_seeds = [REFERENCE_SEED_BASE + s for s in range(n_seeds)]
    ref_videos = _videos(pipe_of("tiny"), prompts, ref_seeds, None, None)
    ref_prompts = prompts * n_seeds
    ref_feats = np.stack([video_features(v) for v in ref_videos])
    ref_probe = _probe(ref_videos, ref_prompts)
    if progress:
        print(f"reference: {len(ref_videos)} teacher videos in {time.time() - t0:.0f} s", flush=True)
    rows = []
    for c in contenders:
        t1 = time.time()
        videos = _videos(pipe_of(c.model), prompts, list(range(n_seeds)), c.steps, c.sampler)
        seconds = time.time() - t1
        feats = np.stack([video_features(v) for v in videos])
        ref_z, z = standardise(ref_feats, feats)
        fd, ci = fd_with_interval(ref_z, z)
        colour, direction = _probe(videos, ref_prompts)
        steps = c.steps or pipe_of(c.model).demo.num_inference_steps
        rows.append(dict(name=c.name, model=c.model, sampler=c.sampler or ("consistency" if c.model == "tiny-rcm"
                                                                             else "euler"),
                         steps=steps, transformer_calls=steps * c.calls_per_step, videos=len(videos),
                         fd=round(fd, 4), fd_ci95=[round(v, 4) for v in ci],
                         **probe_fields(colour, direction, len(videos)), seconds=round(seconds, 1)))
        if progress:
            print(json.dumps(rows[-1]), flush=True)
        if samples_dir is not None and c.model == "tiny-rcm":
            samples_dir.mkdir(parents=True, exist_ok=True)
            for i, p in enumerate(prompts[:4]):
                save_gif(np.clip(videos[i], 0, 1), samples_dir / f"{sample_stem(p)}.gif")
                save_gif(np.clip(ref_videos[i], 0, 1), samples_dir / f"{sample_stem(p)}_teacher25.gif")
    return dict(prompts=prompts, seeds=list(range(n_seeds)), reference_seeds=ref_seeds,
                features=N_FEATURES, reference=dict(name="teacher-25 (reference seeds)", videos=len(ref_videos),
                                                    colour_rate=ref_probe[0], direction_rate=ref_probe[1]),
                rows=rows, seconds=round(time.time() - t0, 1))


def check_same_setup(kept: dict, setup: dict) -> None:
    """Refuse, in one line, to update card ``kept`` from a measurement whose ``setup`` (a card, or the keys it
    would have) differs in its prompts, seeds, reference seeds or features."""
    for key in ("prompts", "seeds", "reference_seeds", "features"):
        if key in setup and kept.get(key) != setup[key]:
            raise SystemExit(f"error: the card to update was measured with other {key}; re-run it whole "
                             "(without --only)")


def merge_rows(kept: dict, fresh: dict) -> dict:
    """``fresh``'s rows in place of ``kept``'s of the same name, the rest of ``kept`` as it was, in the card's
    order; refused in one line when the two were measured on different prompts, seeds or reference seeds."""
    check_same_setup(kept, fresh)
    by_name = {r["name"]: r for r in kept["rows"]} | {r["name"]: r for r in fresh["rows"]}
    names = [c.name for c in CONTENDERS]
    order = names + [n for n in by_name if n not in names]
    # each row keeps its own seconds; the card's is the whole run's that made it
    return {**kept, "rows": [by_name[n] for n in order if n in by_name]}


def main() -> None:  # pragma: no cover - a measurement: python -m kaleido.tiny.distribution_card ...
    import argparse

    from kaleido.atomic import write_atomic
    from kaleido.tiny.data import HELDOUT_PROMPTS

    p = argparse.ArgumentParser(description="Distribution figures of the consistency student and its contenders.")
    p.add_argument("--json", default=None)
    p.add_argument("--samples", default=None)
    p.add_argument("--seeds", type=int, default=8, help="seeds per prompt (8 prompts x 8 seeds = 64 videos)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--only", action="append", default=None, choices=[c.name for c in CONTENDERS],
                   help="measure these contenders again and keep the other rows of --json (repeatable)")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    kept = None
    if a.only:
        if not (a.json and Path(a.json).is_file()):
            p.error("--only re-measures rows of an existing card: give its --json file")
        kept = json.loads(Path(a.json).read_text())
        check_same_setup(kept, dict(prompts=list(HELDOUT_PROMPTS), seeds=list(range(a.seeds))))  # before measuring
    contenders = [c for c in CONTENDERS if a.only is None or c.name in a.only]
    card = measure(HELDOUT_PROMPTS, a.seeds, Path(a.samples) if a.samples else None, contenders=contenders)
    if kept is not None:
        card = merge_rows(kept, card)
    text = json.dumps(card, indent=1)
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        write_atomic(a.json, text)
    print(text)


if __name__ == "__main__":  # pragma: no cover
    main()
