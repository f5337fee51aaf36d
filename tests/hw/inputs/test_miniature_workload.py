"""The miniature pipeline as a simulator workload (kaleido.hw.inputs.workloads.miniature_workload) and the library call
behind ``kaleido simulate`` (kaleido.hw.run)."""

import pytest

from kaleido.hw.inputs.workloads import MINIATURE, get_workload, miniature_workload


def test_miniature_workload_counts_the_shipped_transformer():
    wl = miniature_workload((5, 16, 16), steps=25)
    assert wl.grid_thw == (5, 16, 16) and wl.name == "tiny-wan-5x16x16"
    n, d = 5 * 16 * 16, MINIATURE.dim
    qk = [g for g in wl.gemms if g.op == "self_attn_qk"]
    # per head: (n x 64) . (64 x n), 2 heads, 4 layers, 25 steps x 2 CFG calls
    assert sum(g.macs for g in qk) == n * n * 64 * 2 * 4 * 25 * 2
    ffn_up = [g for g in wl.gemms if g.op == "ffn_up"]
    assert sum(g.macs for g in ffn_up) == n * d * 512 * 4 * 25 * 2


def test_miniature_workload_scales_with_the_grid():
    small, big = miniature_workload((5, 16, 16)), miniature_workload((5, 24, 24))
    qk = lambda wl: sum(g.macs for g in wl.gemms if g.op == "self_attn_qk")  # noqa: E731
    assert qk(big) == qk(small) * (24 * 24 / 256) ** 2


@pytest.mark.parametrize("grid", [(5, 16), (0, 16, 16)])
def test_bad_grid_is_refused(grid):
    with pytest.raises(ValueError, match="grid_thw"):
        miniature_workload(grid)


def test_runner_matches_simulate_and_names_the_carry():
    from kaleido.hw.run import simulate_workloads
    from kaleido.hw.designs.kaleido import simulate

    run = simulate_workloads("cogvideox-2b-480p", profile="tiny_wan_default", steps=2)
    assert list(run.results) == ["cogvideox-2b-480p"]
    assert "carried to cogvideox-2b-480p" in run.carry_message()
    dense = simulate(get_workload("cogvideox-2b-480p", steps=2), None).summary()
    assert run.results["cogvideox-2b-480p"].summary()["cycles"]["dense_array"] == dense["cycles"]["dense_array"]


@pytest.mark.parametrize("kw, match", [
    (dict(trace="a", profile="b"), "not both"),
    (dict(profile="/nonexistent.json"), "does not exist"),
    (dict(buffers="1,2"), "three KiB sizes"),
    (dict(chip_name="iso-power", arrays=2), "not both"),
])
def test_runner_bad_input_is_one_line(kw, match):
    from kaleido.hw.run import simulate_workloads

    with pytest.raises(ValueError, match=match) as e:
        simulate_workloads("cogvideox-2b-480p", steps=1, **kw)
    assert "\n" not in str(e.value)
