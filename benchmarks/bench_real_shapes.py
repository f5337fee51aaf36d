"""Kaleido at real model sizes: random-weight transformers with published per-layer shapes.

Each model is a diffusers transformer of its real class built with the published hidden
size, heads, head_dim, FFN width, text width and RoPE split (``docs/results/real-shapes.md``
lists them), but only ``--blocks`` transformer blocks and random seeded weights, fed
latents of the real 480p spatial token grid with ``--frames`` latent frames (so a CPU run
fits) and the model's real text length.  ``kaleido.apply`` patches it with the default
``KaleidoConfig`` (or ``--config``) on the float path.  Printed per model, all measured
in this run:

* Kaleido / dense time of one transformer forward: the median over ``--repeats`` pairs of
  the ratio of a Kaleido forward to the dense forward run just before it (interleaved, so that
  outside load hits both alike), with the pairs' range; the same ratio per block, as every
  block is patched alike; target <= 1.10.  Kaleido is applied once, as a pipeline applies it,
  to a twin of the dense model sharing its weights; the first forward after ``apply`` (which
  makes Kaleido's effective-operand buffers) is timed apart;
* peak-memory ratio: the forward's peak resident memory above the loaded model and its
  inputs (Linux's VmHWM, reset before the forward), Kaleido over dense, each measured in a
  fresh process after one untimed forward, with glibc's mmap threshold fixed at 64 KiB so
  freed tensors leave the resident set; target <= 1.25;
* trace bytes per step (one forward = one step) saved without and with full mode maps;
  target < 1 MB without;
* the decision's share of Kaleido's forward: CPU time inside the ``kaleido.*`` profiler
  ranges of the hot path (quantise, decide, gather, record) over the forward's wall time.

The float path emulates reuse: it computes the same dense GEMMs on the effective
operands, so on a CPU or GPU its time can only approach dense from above; what it adds
is the decision's own work.

Run: ``OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_real_shapes.py`` (all four models,
about 10 minutes on 2 cores) or ``--models wan-1.3b --repeats 3``; ``--json FILE`` writes
the figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402


@dataclass(frozen=True)
class Shape:
    """Published per-layer shapes of one model (``../shared/notes/facts.md``) and its 480p grid."""

    name: str
    family: str
    dim: int
    heads: int
    head_dim: int
    ffn: int
    text_dim: int
    text_len: int
    grid_hw: tuple[int, int]  # 480p spatial token grid (after the VAE's 8x and the 2x2 patch)
    rope: tuple[int, int, int]


SHAPES = {
    "wan-1.3b": Shape("wan-1.3b", "wan", 1536, 12, 128, 8960, 4096, 512, (30, 52), (44, 42, 42)),
    "wan-14b": Shape("wan-14b", "wan", 5120, 40, 128, 13824, 4096, 512, (30, 52), (44, 42, 42)),
    "hunyuan": Shape("hunyuan", "hunyuan", 3072, 24, 128, 4 * 3072, 4096, 256, (30, 53), (16, 56, 56)),
    "cogvideox-5b": Shape("cogvideox-5b", "cogvideox", 3072, 48, 64, 4 * 3072, 4096, 226, (30, 45), (16, 24, 24)),
}


#: published depth (blocks; HunyuanVideo: 20 dual- + 40 single-stream) and transformer calls per denoising
#: step with classifier-free guidance (Wan calls cond and uncond separately; HunyuanVideo distils guidance
#: into one call; CogVideoX batches both into one call of batch 2)
DEPTH = {"wan-1.3b": (30, 2), "wan-14b": (40, 2), "hunyuan": (60, 1), "cogvideox-5b": (42, 1)}

#: blocks per model by default: two (HunyuanVideo: one dual- and one single-stream), one for Wan 14B
#: (2.8 GB of float32 weights per two blocks, ~40 s per forward on 2 cores)
DEFAULT_BLOCKS = {"wan-1.3b": 2, "wan-14b": 1, "hunyuan": 2, "cogvideox-5b": 2}


def build(shape: Shape, blocks: int, frames: int, seed: int = 0):
    """``(transformer, forward_kwargs)`` with random weights of ``shape`` and ``blocks`` blocks."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed + 1)
    H, W = shape.grid_hw
    lat = (1, 16, frames, 2 * H, 2 * W)

    def video_latent():
        # frames of one scene plus 10% fresh noise each (a mid-denoising latent is this alike along t),
        # so reuse fires as it would on a video; pure noise would make every token compute
        scene = torch.randn(1, 16, 1, 2 * H, 2 * W, generator=g)
        return scene + 0.1 * torch.randn(*lat, generator=g)

    if shape.family == "wan":
        from diffusers import WanTransformer3DModel

        model = WanTransformer3DModel(
            patch_size=(1, 2, 2), num_attention_heads=shape.heads, attention_head_dim=shape.head_dim,
            in_channels=16, out_channels=16, text_dim=shape.text_dim, freq_dim=256, ffn_dim=shape.ffn,
            num_layers=blocks, cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-6,
        )
        kwargs = dict(hidden_states=video_latent(), timestep=torch.tensor([500]),
                      encoder_hidden_states=torch.randn(1, shape.text_len, shape.text_dim, generator=g))
    elif shape.family == "hunyuan":
        from diffusers import HunyuanVideoTransformer3DModel

        model = HunyuanVideoTransformer3DModel(
            in_channels=16, out_channels=16, num_attention_heads=shape.heads, attention_head_dim=shape.head_dim,
            num_layers=max(1, blocks // 2), num_single_layers=max(1, blocks - blocks // 2), num_refiner_layers=1,
            mlp_ratio=shape.ffn / shape.dim, patch_size=2, patch_size_t=1, qk_norm="rms_norm", guidance_embeds=True,
            text_embed_dim=shape.text_dim, pooled_projection_dim=768, rope_theta=256.0, rope_axes_dim=shape.rope,
        )
        kwargs = dict(hidden_states=video_latent(), timestep=torch.tensor([500]),
                      encoder_hidden_states=torch.randn(1, shape.text_len, shape.text_dim, generator=g),
                      encoder_attention_mask=torch.ones(1, shape.text_len),
                      pooled_projections=torch.randn(1, 768, generator=g), guidance=torch.tensor([6000.0]))
    elif shape.family == "cogvideox":
        from diffusers import CogVideoXTransformer3DModel
        from diffusers.models.embeddings import get_3d_rotary_pos_embed

        model = CogVideoXTransformer3DModel(
            num_attention_heads=shape.heads, attention_head_dim=shape.head_dim, in_channels=16, out_channels=16,
            text_embed_dim=shape.text_dim, time_embed_dim=512, num_layers=blocks, sample_width=2 * W,
            sample_height=2 * H, sample_frames=49, patch_size=2, temporal_compression_ratio=4,
            max_text_seq_length=shape.text_len, use_rotary_positional_embeddings=True,
        )
        rope = get_3d_rotary_pos_embed(embed_dim=shape.head_dim, crops_coords=((0, 0), (H, W)), grid_size=(H, W),
                                       temporal_size=frames)
        kwargs = dict(hidden_states=video_latent().transpose(1, 2).contiguous(), timestep=torch.tensor([500]),
                      encoder_hidden_states=torch.randn(1, shape.text_len, shape.text_dim, generator=g),
                      image_rotary_emb=rope)
    else:
        raise ValueError(f"unknown family {shape.family!r}")
    return model.eval(), kwargs


#: the denoising step every timed forward claims to be, through the cache context as diffusers'
#: pipelines pass it (step 0 is one of the default config's dense warm-up steps)
STEP, NUM_STEPS = 10, 25


def _forward(model, kwargs) -> torch.Tensor:
    with torch.no_grad(), model.cache_context("cond", step_index=STEP, num_inference_steps=NUM_STEPS):
        out = model(**kwargs, return_dict=False)[0]
    return out


def _config(path: str | None):
    import kaleido

    return kaleido.KaleidoConfig.load(path) if path else kaleido.KaleidoConfig()


def _twin(model: torch.nn.Module, shape: Shape, blocks: int, frames: int) -> torch.nn.Module:
    """A second instance of ``model``'s class and config holding the very same parameter tensors."""
    twin, _ = build(shape, blocks, frames)
    twin.load_state_dict(model.state_dict(), assign=True)  # share, not copy: the twin's own weights are freed
    return twin.eval()


def time_model(shape: Shape, args) -> dict:
    """Interleaved dense / Kaleido forward times, trace bytes and the decision's share.

    Kaleido is applied once, as a pipeline applies it, to a twin of the dense model that shares its
    weights; each pair runs the dense model, then the twin, on the same inputs.  The first Kaleido
    forward after ``apply`` (where its buffers are made) is timed on its own.
    """
    import kaleido

    model, kwargs = build(shape, args.blocks, args.frames)
    twin = _twin(model, shape, args.blocks, args.frames)
    cfg = _config(args.config)
    tokens = args.frames * shape.grid_hw[0] * shape.grid_hw[1]
    ref = _forward(model, kwargs)  # warm-up (first-call costs) and the dense reference
    kaleido.apply(twin, cfg)
    t0 = time.perf_counter()
    out = _forward(twin, kwargs)
    first_s = time.perf_counter() - t0
    dense_t, kal_t = [], []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        _forward(model, kwargs)
        dense_t.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        _forward(twin, kwargs)
        kal_t.append(time.perf_counter() - t0)

    # decision share: profiler ranges named kaleido.* in the hot path, one Kaleido forward
    kaleido.reset(twin)  # its trace then holds this one forward (one step)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        _forward(twin, kwargs)
        wall = time.perf_counter() - t0
    ranges: dict[str, float] = {}
    for ev in prof.key_averages():
        if ev.key.startswith("kaleido."):
            ranges[ev.key] = ranges.get(ev.key, 0.0) + ev.cpu_time_total / 1e6
    trace = kaleido.remove(twin)
    sizes = {}
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "t.safetensors"
        trace.save(p)
        sizes["without_maps"] = p.stat().st_size
        kaleido.apply(twin, dataclasses.replace(cfg, record_maps=True))
        _forward(twin, kwargs)
        trace_maps = kaleido.remove(twin)
        trace_maps.save(p)
        sizes["with_maps"] = p.stat().st_size
    err = float((out - ref).abs().max() / ref.abs().max().clamp_min(1e-12))
    d_med, k_med = statistics.median(dense_t), statistics.median(kal_t)
    pairs = sorted(k / d for d, k in zip(dense_t, kal_t))  # each Kaleido run against the dense run beside it
    return {
        "model": shape.name, "tokens": tokens, "blocks": args.blocks, "frames": args.frames,
        "dense_s": d_med, "kaleido_s": k_med, "time_ratio": statistics.median(pairs),
        "pair_ratio_range": [pairs[0], pairs[-1]],
        "dense_runs_s": dense_t, "kaleido_runs_s": kal_t, "first_kaleido_forward_s": first_s,
        "decision_share": sum(ranges.values()) / wall, "ranges_s": dict(sorted(ranges.items())),
        "trace_bytes_per_step": sizes["without_maps"], "trace_bytes_per_step_with_maps": sizes["with_maps"],
        "max_rel_diff_vs_dense": err, "saved_fraction": trace.total_counts().saved_fraction,
    }


def trace_depth(shape: Shape, args) -> dict:
    """Trace bytes per denoising step of the full-depth model: the trace grows by the same records per
    block, so bytes(1 block) and bytes(2 blocks) give the fixed part and the per-block part."""
    import kaleido

    cfg = _config(args.config)
    sizes = []
    for blocks in (1, 2) if shape.family != "hunyuan" else (2, 4):
        model, kwargs = build(shape, blocks, args.frames)
        kaleido.apply(model, cfg)
        _forward(model, kwargs)
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "t.safetensors"
            kaleido.remove(model).save(p)
            sizes.append(p.stat().st_size)
        del model
    step = 1 if shape.family != "hunyuan" else 2
    per_block = (sizes[1] - sizes[0]) / step
    depth, calls = DEPTH[shape.name]
    per_call = sizes[0] - per_block * (step) + per_block * depth
    return {"per_block_bytes": per_block, "depth": depth, "calls_per_step": calls,
            "full_depth_bytes_per_step": per_call * calls}


def _peak_child(name: str, variant: str, args) -> None:
    """Child process: print the forward's peak RSS above the loaded model and inputs (bytes)."""
    import kaleido

    torch.set_num_threads(args.threads)
    model, kwargs = build(SHAPES[name], args.blocks, args.frames)
    if variant == "kaleido":
        kaleido.apply(model, _config(args.config))
    _forward(model, kwargs)  # first-call allocations (kernels' workspaces) on both sides alike
    if variant == "kaleido":
        kaleido.reset(model)  # drops Kaleido's effective-operand buffers: the measured forward makes them anew
    gc.collect()
    _reset_peak()
    base = _status_kb("VmRSS")
    _forward(model, kwargs)
    peak = _status_kb("VmHWM")
    print(json.dumps({"peak_above_base": max(0, peak - base) * 1024, "base": base * 1024}))


def _reset_peak() -> None:
    # Linux: writing 5 to clear_refs resets the peak resident set size (VmHWM) to the current one
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def peak_memory(name: str, args) -> dict:
    out = {}
    for variant in ("dense", "kaleido"):
        cmd = [sys.executable, __file__, "--_peak", name, variant, "--blocks", str(args.blocks),
               "--frames", str(args.frames), "--threads", str(args.threads)]
        if args.config:
            cmd += ["--config", args.config]
        # a fixed mmap threshold: glibc's default one grows after large frees, after which freed blocks
        # stay resident and the peak RSS measures the allocation pattern instead of the live tensors
        env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
        res = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
        out[variant] = json.loads(res.stdout.strip().splitlines()[-1])["peak_above_base"]
    out["ratio"] = out["kaleido"] / max(1, out["dense"])
    return out


#: environment variables that change how memory is allocated (and so what a fresh tensor costs): recorded
#: with the figures.  ``THP_MEM_ALLOC_ENABLE=1`` is PyTorch's switch for transparent huge pages on its CPU
#: allocations; ``MALLOC_*`` are glibc's
ALLOCATOR_ENV = ("THP_MEM_ALLOC_ENABLE", "MALLOC_MMAP_MAX_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


def allocator_env() -> dict[str, str]:
    return {k: os.environ[k] for k in ALLOCATOR_ENV if k in os.environ}


def _describe_env(env: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in env.items()) or "the default allocator (glibc, 4 KiB pages)"


def markdown_table(result: dict) -> str:
    """The docs/results/real-shapes.md table of one ``--json`` result."""
    a = result["args"]
    lines = [f"{a['frames']} latent frames, {a['threads']} threads, {a['repeats']} interleaved pairs, "
             f"config {a['config'] or 'KaleidoConfig()'}, {_describe_env(result.get('allocator_env', {}))}", "",
             "| model | blocks | tokens | dense s / forward | first Kaleido forward s | Kaleido / dense (pairs' range) "
             "| peak memory K / dense | trace KB / step (with maps) | decision share | MACs saved (8-bit eq.) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        lo, hi = r["pair_ratio_range"]
        pm = r["peak_memory"]
        lines.append(
            f"| {r['model']} | {r['blocks']} | {r['tokens']:,} | {r['dense_s']:.2f} "
            f"| {r['first_kaleido_forward_s'] if 'first_kaleido_forward_s' in r else float('nan'):.2f} | {r['time_ratio']:.2f}x "
            f"({lo:.2f}-{hi:.2f}) | {pm['ratio']:.2f}x ({pm['kaleido'] / 2**20:.0f} / {pm['dense'] / 2**20:.0f} MiB) "
            f"| {r['trace_bytes_per_step'] / 1024:.0f} ({r['trace_bytes_per_step_with_maps'] / 1024:.0f}) "
            f"| {r['decision_share']:.1%} | {r['saved_fraction']:.1%} |")
    t = result["targets"]
    lines += ["", "Targets: " + ", ".join(f"{k} {'met' if v else 'NOT met'}" for k, v in t.items())]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(SHAPES), help=f"comma-separated, of {', '.join(SHAPES)}")
    ap.add_argument("--blocks", type=int, default=None,
                    help="transformer blocks (HunyuanVideo: half dual-, half single-stream); default: "
                         + ", ".join(f"{k} {v}" for k, v in DEFAULT_BLOCKS.items()))
    ap.add_argument("--frames", type=int, default=2, help="latent frames (the real grid's spatial size is kept)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--config", default=None, help="a KaleidoConfig YAML/JSON (default: KaleidoConfig())")
    ap.add_argument("--json", default=None, help="also write the figures to this JSON file")
    ap.add_argument("--trace-depth", action="store_true",
                    help="only: trace bytes per denoising step of each full-depth model, from 1- and 2-block traces")
    ap.add_argument("--markdown", default=None, metavar="JSON",
                    help="print the docs table of a --json result file instead of running")
    ap.add_argument("--_peak", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.markdown:
        print(markdown_table(json.loads(Path(args.markdown).read_text())))
        return 0
    if args._peak:
        _peak_child(*args._peak, args)
        return 0
    torch.set_num_threads(args.threads)
    names = [m.strip() for m in args.models.split(",") if m.strip()]
    bad = [m for m in names if m not in SHAPES]
    if bad:
        print(f"unknown model(s) {bad}: choose from {', '.join(SHAPES)}", file=sys.stderr)
        return 2
    if args.trace_depth:
        print(f"{'model':14s} {'KB/block':>9s} {'depth':>6s} {'calls/step':>10s} {'MB/step (no maps)':>18s}")
        for name in names:
            r = trace_depth(SHAPES[name], args)
            print(f"{name:14s} {r['per_block_bytes'] / 1024:9.1f} {r['depth']:6d} {r['calls_per_step']:10d} "
                  f"{r['full_depth_bytes_per_step'] / 2**20:18.2f}")
        return 0
    rows = []
    print(f"{args.frames} latent frames, {args.threads} threads, {args.repeats} repeats, "
          f"{'default KaleidoConfig' if not args.config else 'config ' + args.config}, {_describe_env(allocator_env())}")
    print(f"{'model':14s} {'blocks':>6s} {'tokens':>7s} {'dense s':>8s} {'1st K s':>8s} {'K/dense':>8s} {'(range)':>13s} {'mem K/d':>8s} {'trace KB':>9s} "
          f"{'w/ maps KB':>10s} {'decision':>8s} {'saved':>6s}")
    for name in names:
        margs = argparse.Namespace(**{**vars(args), "blocks": args.blocks or DEFAULT_BLOCKS[name]})
        r = time_model(SHAPES[name], margs)
        r["peak_memory"] = peak_memory(name, margs)
        rows.append(r)
        lo, hi = r["pair_ratio_range"]
        print(f"{name:14s} {r['blocks']:6d} {r['tokens']:7d} {r['dense_s']:8.2f} {r['first_kaleido_forward_s']:8.2f} "
              f"{r['time_ratio']:7.2f}x "
              f"({lo:.2f}-{hi:.2f}x) "
              f"{r['peak_memory']['ratio']:7.2f}x {r['trace_bytes_per_step'] / 1024:9.1f} "
              f"{r['trace_bytes_per_step_with_maps'] / 1024:10.1f} {r['decision_share']:7.1%} "
              f"{r['saved_fraction']:6.1%}", flush=True)
    targets = {"time_ratio<=1.10": all(r["time_ratio"] <= 1.10 for r in rows),
               "peak_memory<=1.25": all(r["peak_memory"]["ratio"] <= 1.25 for r in rows),
               "trace<1MB/step": all(r["trace_bytes_per_step"] < 1 << 20 for r in rows)}
    print("targets: " + ", ".join(f"{k} {'met' if v else 'NOT met'}" for k, v in targets.items()))
    if args.json:
        tmp = Path(args.json).with_suffix(".tmp")
        tmp.write_text(json.dumps({"args": vars(args), "allocator_env": allocator_env(), "rows": rows,
                                   "targets": targets}, indent=1))
        os.replace(tmp, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
