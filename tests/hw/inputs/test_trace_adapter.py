"""A ReuseTrace recorded by the integration drives the simulator through the adapter and the CLI."""

import numpy as np
import pytest
import torch
from click.testing import CliRunner

import kaleido.trace as trace_mod
from kaleido.hw.inputs.workloads import get_workload
from kaleido.reuse import ChannelGroups, ModeMap, TokenGrid


def record(step, op, groups, grid, rng, heads=2):
    modes = torch.tensor(rng.choice(3, size=(heads, grid.seq_len, len(groups)), p=[0.3, 0.4, 0.3]), dtype=torch.uint8)
    modes[:, : grid.prefix] = 0
    modes[:, grid.prefix + grid.n_grid:] = 0
    mm = ModeMap(modes, grid, groups, 4)
    hc = np.stack([ModeMap(modes[h:h + 1], grid, groups, 4).counts() for h in range(heads)])
    return trace_mod.TraceRecord(step, "cond", 0, op, f"blocks.0.{op}", 1, heads, grid.seq_len, 64, groups, 4, grid,
                                 True, hc, mm.stats().pattern_counts)


def make_trace(rng):
    grid = TokenGrid(3, 4, 6, 0, 5)  # [video; text] like HunyuanVideo
    rope = ChannelGroups.from_rope(16, 56, 56)
    lin = ChannelGroups.from_chunks(256, 128)
    recs = [record(s, "self_qk", rope, grid, rng) for s in range(2)]
    recs += [record(s, "proj_q", lin, grid, rng, heads=1) for s in range(2)]
    recs += [record(0, "cross_proj_q", lin, grid, rng, heads=1), record(0, "ffn_out", lin, grid, rng, heads=1),
             record(0, "fused_out", ChannelGroups.from_chunks(384, 128), grid, rng, heads=1)]
    return trace_mod.ReuseTrace(recs, {"model_class": "HunyuanVideoTransformer3DModel"}), grid


def test_profile_from_trace_drops_text_rows_and_keeps_steps():
    from kaleido.hw.inputs.trace_adapter import profile_from_trace

    trace, grid = make_trace(np.random.default_rng(0))
    prof, notes = profile_from_trace(trace, get_workload("hunyuan-720p", steps=2))
    st = prof.ops["self_attn_qk"].stats
    assert st.n_rows == 2 * 2 * grid.n_grid  # 2 steps x 2 heads x video rows only
    assert len(prof.ops["self_attn_qk"].per_step) == 2
    assert prof.ops["self_attn_qk"].axes == ("w", "t", "t") and prof.ops["proj_q"].axes == ("t", "t")
    assert prof.grid == (3, 4, 6) and prof.model == "HunyuanVideoTransformer3DModel"
    assert prof.ops["ffn_up"] is None and any("ffn_up" in n for n in notes)
    assert prof.ops["cross_proj_q"] is not None and prof.ops["ffn_down"].stats.group_sizes == (128, 128)
    assert any("fused_out" in n for n in notes)


def test_cli_accepts_a_trace(tmp_path):
    from kaleido.cli.main import cli

    trace, _ = make_trace(np.random.default_rng(1))
    path = trace.save(tmp_path / "t.safetensors")
    runner = CliRunner()
    res = runner.invoke(cli, ["simulate", "-w", "hunyuan-480p", "--steps", "2", "--trace", str(path), "--transfer"])
    assert res.exit_code == 0, res.output
    assert "simulated dense" in res.output and "PE utilisation" in res.output
    # statistics from another grid are carried by the documented rule without --transfer, said in one line
    res = runner.invoke(cli, ["simulate", "-w", "hunyuan-480p", "--steps", "2", "--trace", str(path)])
    assert res.exit_code == 0 and "carried" in res.output, res.output
