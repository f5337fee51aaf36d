"""The consistency student's last phase: regression on its own re-noised states.

The consistency regression of :mod:`kaleido.tiny.distill` trains the student's ``x0`` prediction on the
teacher's ODE states. Those have the marginal of ``(1 - t) x0 + t z`` for a *sharp* ``x0``; the sampler gives
the student ``(1 - t) x0_pred + t z`` instead, where ``x0_pred`` is its own (blurrier) prediction from the step
before. This phase trains it on those inputs: from each training trajectory's noise the student samples itself
down to its last ``last`` times (fresh noise at every step, drawn from a seed of that trajectory), and the
teacher's target for each such state is the teacher's own ODE solution from it - its 25-step Euler path (with
guidance) from the state's time to 0, the sigmas of its schedule below that time. The phase's batches are half
these pairs and half the regression's pairs (so the earlier times keep their training).

Why only the last times: the student's sample *is* its prediction from the last time, and a teacher run from a
state at ``t = 0.609`` costs about half of a full run (its steps below 0.609); a target for every time would
cost more teacher calls than all the trajectories did. The targets are built once, from the student the phase
starts with (one round of learning on one's own states; resumable chunks under ``out_dir/onpolicy/``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from kaleido.atomic import atomic_path, write_atomic


def student_states(student, noise: torch.Tensor, sigmas: list[float], text: torch.Tensor, seeds: list[int],
                   upto: int) -> list[torch.Tensor]:
    """The consistency sampler's inputs at ``sigmas[0..upto]`` from ``noise`` (at ``sigmas[0]``): at each step the
    student's ``x0 = x - t v``, re-noised to the next time with noise drawn from a generator seeded ``seeds[b]``
    for sample ``b``. Returns ``upto + 1`` states (the first is ``noise``)."""
    from kaleido.tiny.train_transformer import predict

    gens = [torch.Generator().manual_seed(int(s)) for s in seeds]
    x, out = noise, [noise]
    with torch.no_grad():
        for i in range(upto):
            s, s_next = sigmas[i], sigmas[i + 1]
            x0 = x - s * predict(student, x, torch.full((len(x),), s), text)
            z = torch.stack([torch.randn(x.shape[1:], generator=g) for g in gens])
            x = (1 - s_next) * x0 + s_next * z
            out.append(x)
    return out


def teacher_from(teacher, x: torch.Tensor, t0: float, teacher_sigmas: list[float], text: torch.Tensor,
                 uncond: torch.Tensor, guidance: float) -> torch.Tensor:
    """The teacher's Euler solution from ``x`` at time ``t0`` to 0 along its own sigmas below ``t0``, with
    classifier-free guidance ``guidance`` (``uncond``: the unconditional text embedding, batched)."""
    from kaleido.tiny.train_transformer import predict

    path = [t0] + [s for s in teacher_sigmas if s < t0]
    if path[-1] != 0.0:
        path.append(0.0)
    with torch.no_grad():
        for s, s_next in zip(path[:-1], path[1:]):
            t = torch.full((len(x),), s)
            vc, vu = predict(teacher, x, t, text), predict(teacher, x, t, uncond)
            x = x + (s_next - s) * (vu + guidance * (vc - vu))
    return x


def _paths(root: Path, i: int) -> tuple[Path, Path]:
    return root / f"chunk-{i:04d}.safetensors", root / f"chunk-{i:04d}.json"


def make_targets(out_dir: Path, student, teacher, noise: torch.Tensor, text: torch.Tensor, uncond: torch.Tensor,
                 sigmas: list[float], teacher_sigmas: list[float], guidance: float, last: int, seed_base: int,
                 chunk: int = 16, progress: bool = True) -> Path:
    """Every chunk of (student state, teacher target) pairs not yet on disk, at the student's last ``last`` times
    (``noise``: the trajectories' initial noise, ``(N, C, T, H, W)``; trajectory ``n``'s step noise is seeded
    ``seed_base + n``)."""
    from safetensors.torch import save_file

    root = Path(out_dir) / "onpolicy"
    root.mkdir(parents=True, exist_ok=True)
    steps = len(sigmas) - 1
    times = list(range(steps - last, steps))
    for i in range((len(noise) + chunk - 1) // chunk):
        st, js = _paths(root, i)
        if st.is_file() and js.is_file():
            continue
        lo, hi = i * chunk, min(len(noise), (i + 1) * chunk)
        t0 = time.time()
        states = student_states(student, noise[lo:hi], sigmas, text[lo:hi], [seed_base + n for n in range(lo, hi)],
                                times[-1])
        inputs = torch.stack([states[k] for k in times], 1)
        targets = torch.stack([teacher_from(teacher, states[k], sigmas[k], teacher_sigmas, text[lo:hi],
                                            uncond[lo:hi], guidance) for k in times], 1)
        with atomic_path(st) as tmp:
            save_file({"inputs": inputs.contiguous(), "targets": targets.contiguous()}, str(tmp))
        write_atomic(js, json.dumps(dict(first=lo, count=hi - lo, times=[sigmas[k] for k in times],
                                         seconds=round(time.time() - t0, 1))))
        if progress:
            print(f"own-state targets {hi}/{len(noise)} ({time.time() - t0:.1f} s for {hi - lo})", flush=True)
    return root


def load_targets(root: Path) -> tuple[torch.Tensor, torch.Tensor, list[float], float]:
    """``(inputs, targets)`` of shape ``(N, last, C, T, H, W)``, their times and the seconds they took."""
    from safetensors.torch import load_file

    ins, outs, times, secs = [], [], None, 0.0
    for js in sorted(Path(root).glob("chunk-*.json")):
        meta = json.loads(js.read_text())
        d = load_file(str(js.with_suffix(".safetensors")))
        ins.append(d["inputs"])
        outs.append(d["targets"])
        times, secs = meta["times"], secs + meta.get("seconds", 0.0)
    if not ins:
        raise ValueError(f"no own-state targets under {root}: run the phase's target stage first")
    return torch.cat(ins), torch.cat(outs), times, secs
