"""Profile JSON format, loader validation, and the carry-over rule."""

import json

import numpy as np
import pytest
import torch

from kaleido.hw.inputs.profile import OpProfile, Profile, carry_stats
from kaleido.hw.inputs.workloads import get_workload
from kaleido.reuse import ChannelGroups, ModeMap, ModeStats, TokenGrid


def stats(sizes=(44, 42, 42), names=("t", "h", "w"), seed=0, n=300):
    rng = np.random.default_rng(seed)
    rows = rng.choice(3, size=(n, len(sizes)), p=[0.3, 0.5, 0.2])
    mc = np.stack([(rows == k).sum(0) for k in range(3)], 1)
    pc = None
    if len(sizes) <= 8:
        pc = np.bincount((rows * 3 ** np.arange(len(sizes))).sum(1), minlength=3 ** len(sizes))
    return ModeStats(sizes, names, 4, mc, pc)


def wan_profile(grid=(21, 30, 52), model="wan-1.3b", drop=()):
    wl = get_workload("wan-1.3b-480p")
    ops = {}
    for k in wl.op_kinds():
        if k in drop or k == "cross_proj_kv":
            continue
        if k == "self_attn_qk":
            ops[k] = stats()
        elif k in ("self_attn_pv", "cross_attn_pv"):
            ops[k] = None
        else:
            g = next(x for x in wl.gemms if x.op == k)
            n = g.K // 128
            ops[k] = stats(tuple([128] * n), tuple(f"c{i}" for i in range(n)))
    return Profile(model, grid, ops, label="test")


def test_json_round_trip(tmp_path):
    p = wan_profile()
    p.ops["self_attn_qk"] = OpProfile(stats(), [stats(seed=1), stats(seed=2)])
    p.save(tmp_path / "p.json")
    q = Profile.load(tmp_path / "p.json")
    assert q.model == p.model and q.grid == p.grid and set(q.ops) == set(p.ops)
    a, b = p.ops["self_attn_qk"], q.ops["self_attn_qk"]
    assert np.array_equal(a.stats.mode_counts, b.stats.mode_counts)
    assert np.array_equal(a.stats.pattern_counts, b.stats.pattern_counts)
    assert len(b.per_step) == 2 and q.ops["self_attn_pv"] is None


@pytest.mark.parametrize("mutate, match", [
    (lambda d: d.update(format="other"), "not a Kaleido profile"),
    (lambda d: d.update(version=7), "version 7"),
    (lambda d: d.pop("ops"), "missing the key 'ops'"),
    (lambda d: d.update(grid={"T": 1}), "grid must be"),
    (lambda d: d["ops"]["self_attn_qk"]["stats"].update(mode_counts=[[1, 2]]), "corrupt statistics"),
    (lambda d: d["ops"]["self_attn_qk"]["stats"].pop("group_sizes"), "corrupt statistics"),
    (lambda d: d["ops"].update(attn_magic=None), "unknown"),
])
def test_loader_rejects_bad_files(tmp_path, mutate, match):
    d = wan_profile().to_dict()
    mutate(d)
    (tmp_path / "p.json").write_text(json.dumps(d))
    with pytest.raises(ValueError, match=match):
        Profile.load(tmp_path / "p.json")


def test_loader_rejects_missing_and_non_json(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        Profile.load(tmp_path / "nope.json")
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        Profile.load(tmp_path / "x.json")


def test_applies_checks_model_grid_and_ops():
    wl = get_workload("wan-1.3b-480p")
    wan_profile().check_applies(wl, transfer=False)
    with pytest.raises(ValueError, match="no entry for op kinds \\['ffn_up'\\]"):
        wan_profile(drop=("ffn_up",)).check_applies(wl, transfer=False)
    with pytest.raises(ValueError, match="pass transfer=True"):
        wan_profile(model="hunyuan").check_applies(wl, transfer=False)
    with pytest.raises(ValueError, match="pass transfer=True"):  # other resolution, same model
        wan_profile().check_applies(get_workload("wan-1.3b-720p"), transfer=False)
    wan_profile().check_applies(get_workload("wan-1.3b-720p"), transfer=True)


def test_carry_rule_same_names_keeps_fractions_and_histogram():
    st = stats()
    out = carry_stats(st, ((16, 56, 56), ("t", "h", "w")))
    assert out.group_sizes == (16, 56, 56)
    assert np.array_equal(out.fractions(), st.fractions())
    assert np.array_equal(out.pattern_counts, st.pattern_counts)


def test_carry_rule_chunks_pools_fractions_and_drops_histogram():
    st = stats(sizes=(32, 32, 64), names=("c0", "c1", "c2"))
    out = carry_stats(st, ((128,) * 24, tuple(f"c{i}" for i in range(24))))
    w = np.array([32, 32, 64]) / 128
    pooled = (st.fractions() * w[:, None]).sum(0)
    assert out.pattern_counts is None and len(out.group_sizes) == 24
    assert np.allclose(out.fractions(), np.tile(pooled, (24, 1)), atol=1.0 / st.n_rows)


def test_stats_for_transfers_to_other_resolution_and_model():
    p = wan_profile()
    hy = get_workload("hunyuan-720p", steps=2)
    s = p.stats_for(hy, "self_attn_qk", 128, transfer=True)
    assert s.group_sizes == (16, 56, 56) and np.array_equal(s.fractions(), p.ops["self_attn_qk"].stats.fractions())
    s = p.stats_for(hy, "ffn_down", 12288, transfer=True)
    assert s.group_sizes == (128,) * 96 and s.pattern_counts is None
    with pytest.raises(ValueError, match="K=12288"):
        p.stats_for(hy, "ffn_down", 12288, transfer=False)
    # on its own model and grid the profile is used as measured
    wl = get_workload("wan-1.3b-480p")
    assert p.stats_for(wl, "self_attn_qk", 128) is p.ops["self_attn_qk"].stats


def test_per_step_mapping():
    op = OpProfile(stats(), [stats(seed=i) for i in range(5)])
    assert [next(i for i, x in enumerate(op.per_step) if x is op.at_step(s, 9)) for s in range(9)] == [0, 1, 1, 2, 2, 3, 3, 4, 4]


def test_from_mode_maps_counts_video_rows_only():
    grid = TokenGrid(2, 3, 4, prefix=5)
    groups = ChannelGroups.from_rope(4, 2, 2)
    modes = torch.zeros(2, grid.seq_len, 3, dtype=torch.uint8)
    modes[:, grid.prefix + 12:, :] = 2  # frame t=1 fully reused
    p = Profile.from_mode_maps("x", {"self_attn_qk": [ModeMap(modes, grid, groups, 4)], "self_attn_pv": None})
    st = p.ops["self_attn_qk"].stats
    assert st.n_rows == 2 * 24 and st.mode_counts[:, 2].tolist() == [24, 24, 24]
    assert p.grid == (2, 3, 4)


def test_shipped_example_profile_is_labelled_synthetic():
    from importlib.resources import files

    p = Profile.load(files("kaleido") / "assets" / "profiles" / "synthetic_correlated.json")
    assert "SYNTHETIC" in p.label and p.ops["self_attn_qk"] is not None
    f = p.ops["self_attn_qk"].stats.fractions()
    assert (f[:, 1] > 0).all() and (f[:, 2] > 0).all()  # real maps with all three modes


def _decided_stats(grid_thw=(6, 12, 16), seed=0):
    from kaleido.hw.inputs.example_profile import correlated_field
    from kaleido.reuse.config import ReuseConfig
    from kaleido.reuse.decide import decide
    from kaleido.reuse.quant import quantize

    grid = TokenGrid(*grid_thw)
    rope = ChannelGroups.from_rope(16, 56, 56)
    q, _ = quantize(correlated_field(np.random.default_rng(seed), grid, rope, heads=2), rope)
    mm = decide(q, grid, rope, ReuseConfig(2.0, 8.0, 4))
    return mm.stats(), tuple(a.value for a in rope.axes)


def test_interior_fractions_remove_exactly_the_rows_without_reference():
    from kaleido.hw.inputs.profile import interior_fractions

    st, axes = _decided_stats()
    inner = interior_fractions(st, (6, 12, 16), axes)
    n = st.n_rows
    for g, a in enumerate(axes):
        L = {"t": 6, "h": 12, "w": 16}[a]
        b = n // L
        assert inner[g, 0] == pytest.approx((st.mode_counts[g, 0] - b) / (n - b))
        assert inner[g].sum() == pytest.approx(1.0)


def test_carry_to_the_same_grid_is_the_identity_and_bigger_grids_have_fewer_boundary_rows():
    st, axes = _decided_stats()
    same = carry_stats(st, ((16, 56, 56), ("t", "h", "w")), axes=axes, src_grid=(6, 12, 16), dst_grid=(6, 12, 16))
    assert np.allclose(same.fractions(), st.fractions(), atol=2.0 / st.n_rows)
    big = carry_stats(st, ((16, 56, 56), ("t", "h", "w")), axes=axes, src_grid=(6, 12, 16), dst_grid=(33, 45, 80))
    from kaleido.hw.inputs.profile import interior_fractions

    inner = interior_fractions(st, (6, 12, 16), axes)
    for g, a in enumerate(axes):
        beta = 1 / {"t": 33, "h": 45, "w": 80}[a]
        assert big.fractions()[g, 0] == pytest.approx(beta + (1 - beta) * inner[g, 0], abs=2.0 / st.n_rows)
        assert big.fractions()[g, 0] < st.fractions()[g, 0]
    # the histogram is kept (same support) and agrees with the carried marginals
    assert big.pattern_counts.sum() == st.n_rows
    assert not ((st.pattern_counts == 0) & (big.pattern_counts > 0)).any()


def test_fit_histogram_matches_target_marginals():
    from kaleido.hw.inputs.profile import fit_histogram

    st = stats(n=3000)
    target = np.array([[0.2, 0.5, 0.3], [0.1, 0.6, 0.3], [0.4, 0.4, 0.2]])
    pc = fit_histogram(st.pattern_counts, target, 3000)
    modes = np.stack([(np.arange(27) // 3**g) % 3 for g in range(3)], axis=1)
    got = np.stack([np.bincount(modes[:, g], weights=pc, minlength=3) for g in range(3)]) / 3000
    assert np.allclose(got, target, atol=2e-3)


def test_profile_axes_round_trip_and_validation(tmp_path):
    p = wan_profile()
    p.ops["self_attn_qk"] = OpProfile(stats(), [], ("w", "t", "t"))
    p.save(tmp_path / "p.json")
    assert Profile.load(tmp_path / "p.json").ops["self_attn_qk"].axes == ("w", "t", "t")
    with pytest.raises(ValueError, match="axes"):
        OpProfile(stats(), [], ("w", "t"))


def test_window_full_measurement_and_interpolation():
    from kaleido.hw.inputs.profile import window_full_counts

    modes = np.zeros((1, 64, 2), np.uint8)
    modes[0, :32, 0] = 2  # first half of group 0 fully reused
    c = window_full_counts(modes)
    assert c[8][0].tolist() == [4, 0] and c[8][1].tolist() == [8, 8]
    assert c[64][0].tolist() == [0, 0]
    op = OpProfile(stats(sizes=(1,), names=("g",)), [], None, {2: [0.5], 4: [0.25]})
    assert op.fold_full(8)[0] == pytest.approx(0.25**2)  # beyond the largest size: independent blocks
    assert op.fold_full(3)[0] == pytest.approx(np.sqrt(0.5 * 0.25))  # log-linear in between
    with pytest.raises(ValueError, match="window_full"):
        OpProfile(stats(sizes=(1,), names=("g",)), [], None, {2: [1.5]})


def test_measured_fold_statistics_reproduce_exact_os_no_dispatcher():
    from kaleido.hw.arch.dispatcher import RowStats, dispatch
    from kaleido.hw.inputs.profile import window_full_counts

    rows = np.zeros((2, 1024, 2), np.uint8)
    for b in range(0, 1024, 256):
        rows[:, b:b + 128, 0] = 2  # alternate 128-row runs fully reused in group 0
    rows[:, ::3, 1] = 1
    sizes = (64, 64)
    exact = dispatch(RowStats.from_rows(rows, sizes), 256, "os", 128, 128, True, 1024)
    cnt = window_full_counts(rows)[128]
    ff = cnt[0] / cnt[1]
    flat = rows.reshape(-1, 2).astype(np.int64)
    mc = np.stack([(flat == k).sum(0) for k in range(3)], 1)
    st = ModeStats(sizes, ("a", "b"), 4, mc, np.bincount((flat * [1, 3]).sum(1), minlength=9))
    measured = dispatch(RowStats.from_mode_stats(st, 1024, 0, ff), 256, "os", 128, 128, True, 1024)
    indep = dispatch(RowStats.from_mode_stats(st, 1024), 256, "os", 128, 128, True, 1024)
    tot = lambda d: (d.stream["none"] * d.fold_mult["none"]).sum()
    assert tot(measured) == pytest.approx(tot(exact))
    assert tot(indep) > tot(exact)  # independence is pessimistic for clustered maps


def test_from_mode_maps_records_window_statistics(tmp_path):
    grid = TokenGrid(2, 4, 8)
    groups = ChannelGroups.from_rope(4, 2, 2)
    modes = torch.zeros(1, grid.seq_len, 3, dtype=torch.uint8)
    modes[0, 32:, :] = 2  # frame t=1 fully reused
    p = Profile.from_mode_maps("x", {"self_attn_qk": [ModeMap(modes, grid, groups, 4)]})
    wf = p.ops["self_attn_qk"].window_full
    assert wf[32] == [0.5, 0.5, 0.5] and wf[64] == [0.0, 0.0, 0.0]
    p.save(tmp_path / "p.json")
    assert Profile.load(tmp_path / "p.json").ops["self_attn_qk"].window_full == wf
