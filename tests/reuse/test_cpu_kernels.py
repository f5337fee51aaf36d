"""The compiled CPU decision kernel against the torch loop: the same modes and effective operand, bit for bit."""

import dataclasses
import importlib

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaleido.reuse import ChannelGroups, ReuseConfig, TokenGrid, decide_effective, quantize
from kaleido.reuse.quant import quant_scale

from .naive import naive_decide
from .strategies import channel_groups, configs, correlated_rows, grids

dec = importlib.import_module("kaleido.reuse.decide")  # the module (kaleido.reuse.decide is the function)


def _both(x, groups, cfg, grid, with_eff=True):
    """``decide_grid`` on ``x`` ``(*lead, S, K)`` with each backend: ``{backend: (modes, eff)}``."""
    out = {}
    scale = quant_scale(x, groups, cfg.granularity) if x.is_floating_point() else torch.ones(())
    for backend in ("torch", "kernel"):
        modes = torch.zeros((*x.shape[:-2], grid.seq_len, len(groups)), dtype=torch.uint8)
        eff = torch.full_like(x, 3) if with_eff else None
        view = (lambda t: t[..., grid.grid_slice, :].unflatten(-2, grid.shape))  # noqa: E731
        s = scale.unsqueeze(-2).unsqueeze(-2) if scale.dim() else scale.view((1,) * (x.dim() + 2))
        dec.decide_grid(view(x), None if eff is None else view(eff), view(modes), s, groups, cfg, backend)
        out[backend] = (modes, eff)
    return out


@settings(max_examples=60, deadline=None)
@given(grid=grids(max_side=5), groups=channel_groups(max_groups=4, max_size=6), cfg=configs(),
       seed=st.integers(0, 10_000), dtype=st.sampled_from([torch.float32, torch.float64]),
       gran=st.sampled_from(["group", "head", "tensor"]), strided=st.booleans(), step=st.sampled_from([0.3, 1.0, 3.0]))
def test_kernel_equals_torch_loop(grid, groups, cfg, seed, dtype, gran, strided, step):
    """Every mode and every effective value, for both metrics, any axes, strided (attention-like) views,
    every quantisation granularity and float32 / float64 operands."""
    cfg = dataclasses.replace(cfg, granularity=gran)
    x = correlated_rows((2,), grid, groups.dim, seed, step=step).to(dtype)
    if strided:  # (2, heads=2, S, K) viewed out of a (2, S, 2, K) tensor, as attention's q is
        x = x.unsqueeze(1).expand(2, 2, *x.shape[1:]).transpose(1, 2).contiguous().transpose(1, 2)
    out = _both(x, groups, cfg, grid)
    assert torch.equal(out["torch"][0], out["kernel"][0])
    assert torch.equal(out["torch"][1], out["kernel"][1])


@settings(max_examples=30, deadline=None)
@given(grid=grids(), groups=channel_groups(), cfg=configs(), seed=st.integers(0, 10_000))
def test_kernel_on_int8_operands_matches_the_reference(grid, groups, cfg, seed):
    """The int8 path's decision (``decide``, unit scale) through the kernel = the token-by-token reference."""
    x = correlated_rows((), grid, groups.dim, seed).round().clamp(-127, 127).to(torch.int8)
    out = _both(x, groups, cfg, grid, with_eff=False)
    ref, _ = naive_decide(x, grid, groups, cfg)
    assert torch.equal(out["kernel"][0].long(), ref) and torch.equal(out["torch"][0], out["kernel"][0])


def test_kernel_sees_a_real_difference():
    """A sanity check that the comparison above can fail: the kernel's modes change with theta1."""
    grid = TokenGrid(2, 4, 4)
    groups = ChannelGroups.from_chunks(8, 4, "w")
    x = correlated_rows((1,), grid, 8, seed=3, step=1.0)
    lo = _both(x, groups, ReuseConfig(1, 4, low_bits=4), grid)["kernel"][0]
    hi = _both(x, groups, ReuseConfig(4, 8, low_bits=4), grid)["kernel"][0]
    assert not torch.equal(lo, hi) and int((hi == 2).sum()) > int((lo == 2).sum())


def test_decide_effective_is_the_same_through_either_backend():
    grid = TokenGrid(3, 5, 4, prefix=1, suffix=2)
    groups = ChannelGroups((4, 3, 5), ("t", "h", "w"), ("a", "b", "c"))
    A = correlated_rows((2, 3), grid, groups.dim, seed=11, step=0.5)
    cfg = ReuseConfig(6, 12, low_bits=5)
    (m1, e1), (m2, e2) = (decide_effective(A, grid, groups, cfg, backend=b) for b in ("torch", "kernel"))
    assert torch.equal(m1.modes, m2.modes) and torch.equal(e1, e2) and int((m1.modes == 2).sum()) > 0
    A_q, _ = quantize(A, groups)
    ref, _ = naive_decide(A_q[1, 2], grid, groups, cfg)
    assert torch.equal(m2.modes[1, 2].long(), ref)


def test_backend_choice_refuses_in_one_line():
    grid, groups = TokenGrid(2, 2, 2), ChannelGroups.from_chunks(4, 2, "t")
    A = torch.randn(grid.seq_len, 4, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="kernel takes CPU"):
        decide_effective(A, grid, groups, ReuseConfig(2, 4), backend="kernel")
    with pytest.raises(ValueError, match="unknown decision backend 'numba'"):
        decide_effective(A.float(), grid, groups, ReuseConfig(2, 4), backend="numba")
    # bf16 takes the torch loop under "auto", with the same result as float32's where the values agree
    m, eff = decide_effective(A, grid, groups, ReuseConfig(2, 4))
    assert eff.dtype == torch.bfloat16 and m.modes.shape == (grid.seq_len, 2)


@settings(max_examples=40, deadline=None)
@given(B=st.integers(1, 2), H=st.integers(1, 3), S=st.integers(1, 30), G=st.integers(1, 9), seed=st.integers(0, 999))
def test_mode_histograms_equal_bincount(B, H, S, G, seed):
    """A trace record's counts and row patterns: the same as the torch bincounts they replace on the CPU."""
    from kaleido.reuse.modes import MAX_PATTERN_GROUPS
    from kaleido.reuse.cpu_kernels import mode_histograms

    modes = torch.randint(0, 3, (B, H, S, G), generator=torch.Generator().manual_seed(seed), dtype=torch.uint8)
    m = modes.to(torch.int64)
    idx = m + 3 * torch.arange(G).view(1, 1, 1, G) + 3 * G * torch.arange(H).view(1, H, 1, 1)
    counts = torch.bincount(idx.reshape(-1), minlength=3 * G * H).view(H, G, 3)
    with_patterns = G <= MAX_PATTERN_GROUPS
    got_counts, got_patterns = mode_histograms(modes, with_patterns)
    assert torch.equal(got_counts, counts)
    if with_patterns:
        w = torch.tensor([3**g for g in range(G)])
        assert torch.equal(got_patterns, torch.bincount((m * w).sum(-1).reshape(-1), minlength=3**G))
    else:
        assert got_patterns is None
    with pytest.raises(ValueError, match="other than 0, 1, 2"):
        mode_histograms(modes + 3, with_patterns)


@settings(max_examples=40, deadline=None)
@given(lead=st.sampled_from([(), (2,), (2, 2)]), S=st.integers(1, 30), groups=channel_groups(max_groups=4, max_size=6),
       seed=st.integers(0, 999), zero_group=st.booleans(), scale_by=st.sampled_from([1e-3, 1.0, 1e3]))
def test_group_scale_equals_the_torch_reduction(lead, S, groups, seed, zero_group, scale_by):
    """The quantisation scale in one compiled pass = max |x| per group over 127 (1 for an all-zero group)."""
    from kaleido.reuse.cpu_kernels import group_scale

    x = torch.randn(*lead, S, groups.dim, generator=torch.Generator().manual_seed(seed)) * scale_by
    if zero_group:
        x[..., groups.slices[0]] = 0.0
    ref = torch.empty(*lead, 1, groups.dim)
    for sl in groups.slices:
        amax = x[..., sl].abs().amax(dim=(-2, -1), keepdim=True)
        ref[..., sl] = torch.where(amax > 0, amax / 127, torch.ones_like(amax))
    got, finite = group_scale(x, (*groups.offsets, groups.dim), 127)
    assert finite and torch.equal(got, ref)
    assert torch.equal(quant_scale(x, groups, "group"), ref)
    x[(0,) * len(lead) + (S - 1, groups.dim - 1)] = float("inf")
    assert group_scale(x, (*groups.offsets, groups.dim), 127)[1] is False
    with pytest.raises(ValueError, match="non-finite"):
        quant_scale(x, groups, "group")


@settings(max_examples=60, deadline=None)
@given(grid=grids(max_side=5), groups=channel_groups(max_groups=4, max_size=6), cfg=configs(),
       seed=st.integers(0, 10_000), strided=st.booleans(), step=st.sampled_from([0.3, 1.0, 3.0]),
       zero_theta1=st.booleans())
def test_fused_decision_equals_the_torch_path(grid, groups, cfg, seed, strided, step, zero_theta1):
    """decide_effective in one compiled call (scale + every group + effective operand, prefix and suffix rows
    included) = the torch path, mode for mode and value for value."""
    if zero_theta1:
        cfg = dataclasses.replace(cfg, theta1=0.0)
    A = correlated_rows((2,), grid, groups.dim, seed, step=step)
    if strided:
        A = A.unsqueeze(1).expand(2, 2, *A.shape[1:]).transpose(1, 2).contiguous().transpose(1, 2)
    m1, e1 = decide_effective(A, grid, groups, cfg, backend="torch")
    m2, e2 = decide_effective(A, grid, groups, cfg, backend="kernel")
    assert torch.equal(m1.modes, m2.modes) and torch.equal(e1, e2) and e2.stride() == A.stride()
    assert (e2 is A) == (cfg.theta1 == 0.0 or cfg.theta2 == 0.0)


def test_fused_decision_refuses_non_finite_operands():
    grid, groups = TokenGrid(2, 2, 2), ChannelGroups.from_chunks(4, 2, "t")
    A = torch.randn(grid.seq_len, 4)
    A[3, 1] = float("nan")
    with pytest.raises(ValueError, match="1 non-finite"):
        decide_effective(A, grid, groups, ReuseConfig(2, 4), backend="kernel")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])  # constant
@given(grid=grids(max_side=5), groups=channel_groups(max_groups=4, max_size=6), cfg=configs(),
       seed=st.integers(0, 10_000), strided=st.booleans(), threads=st.integers(2, 5), lead=st.sampled_from([1, 2]))
def test_threaded_kernels_equal_the_torch_path(monkeypatch, grid, groups, cfg, seed, strided, threads, lead):
    """Split over threads (as every real-size operand is: lines, matrices and a matrix's rows shared out),
    the scale, the modes and the effective operand are the single-threaded torch path's, bit for bit."""
    from kaleido.reuse import cpu_kernels

    monkeypatch.setattr(cpu_kernels, "PARALLEL_MIN_ELEMENTS", 0)
    A = correlated_rows((lead,), grid, groups.dim, seed, step=1.0)
    if strided:
        A = A.unsqueeze(1).expand(lead, 2, *A.shape[1:]).transpose(1, 2).contiguous().transpose(1, 2)
    m1, e1 = decide_effective(A, grid, groups, cfg, backend="torch")
    view = (lambda t: t[..., grid.grid_slice, :].unflatten(-2, grid.shape))  # noqa: E731
    scale = quant_scale(A, groups, cfg.granularity)
    m3 = torch.zeros_like(m1.modes)
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)  # the kernels split their work in this many parts
    try:
        m2, e2 = decide_effective(A, grid, groups, cfg, backend="kernel")
        s2, finite = cpu_kernels.group_scale(A, (*groups.offsets, groups.dim), 127)
        dec.decide_grid(view(A), None, view(m3), scale.unsqueeze(-2).unsqueeze(-2), groups, cfg, "kernel")
    finally:
        torch.set_num_threads(saved)
    assert torch.equal(m1.modes, m2.modes) and torch.equal(e1, e2)
    assert finite and torch.equal(s2, quant_scale(A, groups, "group"))
    assert torch.equal(m3, m1.modes)


@given(costs=st.lists(st.integers(0, 50), min_size=1, max_size=40), n=st.integers(1, 8))
def test_balanced_parts_cover_every_item_once(costs, n):
    from kaleido.reuse.cpu_kernels import _balanced_parts

    parts = _balanced_parts(np.asarray(costs, dtype=np.float64), n)
    assert parts[0][0] == 0 and parts[-1][1] == len(costs) and len(parts) <= n
    assert all(i0 < i1 for i0, i1 in parts) and all(a[1] == b[0] for a, b in zip(parts, parts[1:]))
    if n > 1 and len(costs) >= n and min(costs) > 0:
        assert len(parts) > 1  # shared out, not left on one thread


def test_a_failing_part_raises_on_the_calling_thread():
    from kaleido.reuse.cpu_kernels import _on_threads

    def kernel(fail_at, i0, i1):
        if i0 <= fail_at < i1:
            raise ValueError(f"part {i0}")
        return i1 - i0

    assert _on_threads(kernel, (99,), [(0, 2), (2, 5)]) == [2, 3]
    with pytest.raises(ValueError, match="part 2"):
        _on_threads(kernel, (3,), [(0, 2), (2, 5)])
