"""ReuseTrace: save/load round trip, aggregation, and validation of bad files."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import kaleido
from kaleido.techniques.kaleido_reuse import KaleidoConfig, get_trace
from kaleido.reuse import ModeStats, ReuseConfig
from kaleido.trace import ReuseTrace


@pytest.fixture(scope="module")
def wan_trace():
    from diffusers import WanTransformer3DModel

    torch.manual_seed(0)
    model = WanTransformer3DModel(
        patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=24, in_channels=4, out_channels=4,
        text_dim=16, freq_dim=16, ffn_dim=32, num_layers=2, rope_max_seq_len=64,
    ).eval()
    x = torch.randn(1, 4, 1, 8, 8).expand(-1, -1, 3, -1, -1).contiguous()
    kaleido.apply(model, KaleidoConfig(reuse=ReuseConfig(4.0, 8.0), record_maps=True))
    with torch.no_grad():
        for i in range(2):
            with model.cache_context("cond", step_index=i, num_inference_steps=2):
                model(x, torch.tensor([900.0 - 400 * i]), torch.randn(1, 7, 16), return_dict=False)
    return kaleido.remove(model)


def test_round_trip(tmp_path, wan_trace):
    p = wan_trace.save(tmp_path / "t.safetensors")
    back = ReuseTrace.load(p, expected_model_class="WanTransformer3DModel")
    assert len(back) == len(wan_trace) > 0
    assert back.summary() == wan_trace.summary()
    assert back.meta["model_class"] == "WanTransformer3DModel"
    assert back.meta["kaleido_config"] == wan_trace.meta["kaleido_config"]
    assert back.meta["grid"] == {"T": 3, "H": 4, "W": 4}
    assert back.meta["rope_split"] == [8, 8, 8]
    for a, b in zip(wan_trace.records, back.records):
        assert (a.step, a.context, a.layer, a.op, a.module, a.enabled) == (b.step, b.context, b.layer, b.op, b.module, b.enabled)
        assert np.array_equal(a.head_counts, b.head_counts)
        assert (a.pattern_counts is None) == (b.pattern_counts is None)
        if a.pattern_counts is not None:
            assert np.array_equal(a.pattern_counts, b.pattern_counts)
        if a.mode_map is not None:
            assert torch.equal(a.mode_map.modes, b.mode_map.modes)
            assert a.mode_map.groups == b.mode_map.groups and a.mode_map.grid == b.mode_map.grid
    assert sum(1 for _ in back.mode_maps()) > 0


def _save_legacy(trace, path, version):
    """``trace`` in the layout of format version 1 (dense histograms, int64) or 2 (sparse histograms, int32
    counts with COMPUTE kept), as those versions wrote it, with this version's metadata tables."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    from kaleido.trace import RECORD_COLUMNS

    p = trace.save(path.with_suffix(".v3.safetensors"))
    with safe_open(str(p), framework="pt") as f:
        meta = json.loads(f.metadata()["kaleido_trace"])
        t = {k: f.get_tensor(k) for k in f.keys()}
    rec = t["records"].to(torch.int64).clone()
    co, po = RECORD_COLUMNS.index("counts_offset"), RECORD_COLUMNS.index("patterns_offset")
    counts, patterns, c_off, p_off = [], [], 0, 0
    for i, r in enumerate(trace.records):
        counts.append(torch.from_numpy(np.asarray(r.head_counts, dtype=np.int64).reshape(-1)))
        rec[i, co] = c_off
        c_off += counts[-1].numel()
        rec[i, po] = -1
        if r.pattern_counts is not None:
            pc = np.asarray(r.pattern_counts, dtype=np.int64)
            if version == 2:
                nz = np.flatnonzero(pc)
                pc = np.concatenate([[nz.size], nz, pc[nz]])
            rec[i, po] = p_off
            patterns.append(torch.from_numpy(pc))
            p_off += pc.size
    dt = torch.int64 if version == 1 else torch.int32
    old = dict(t, records=rec, head_counts=torch.cat(counts).to(dt), pattern_counts=torch.cat(patterns).to(dt))
    meta["format_version"] = version
    save_file(old, str(path), metadata={"kaleido_trace": json.dumps(meta)})
    return p


@pytest.mark.parametrize("version", [1, 2])
def test_older_versions_still_load(tmp_path, wan_trace, version):
    """Version-1 (dense histograms, int64) and version-2 files (sparse, int32, COMPUTE stored) load to the
    same records as this version's."""
    old = tmp_path / f"v{version}.safetensors"
    p = _save_legacy(wan_trace, old, version)
    back = ReuseTrace.load(old)
    assert back.summary() == wan_trace.summary()
    for a, b in zip(wan_trace.records, back.records):
        assert np.array_equal(a.head_counts, b.head_counts)
        assert (a.pattern_counts is None) == (b.pattern_counts is None)
        if a.pattern_counts is not None:
            assert np.array_equal(a.pattern_counts, b.pattern_counts)
    assert p.stat().st_size < old.stat().st_size  # version 3 is smaller


def test_all_compute_records_store_no_counts(tmp_path, wan_trace):
    """A dense or disabled GEMM's counts follow from its shape: version 3 stores none for it, and it loads
    back as all-COMPUTE rows with the all-COMPUTE histogram."""
    from safetensors import safe_open

    from kaleido.trace import RECORD_COLUMNS

    p = wan_trace.save(tmp_path / "t.safetensors")
    with safe_open(str(p), framework="pt") as f:
        rec = f.get_tensor("records").to(torch.int64)
    co = RECORD_COLUMNS.index("counts_offset")
    dense = [i for i, r in enumerate(wan_trace.records) if not r.head_counts[..., 1:].any()]
    assert dense
    assert all(int(rec[i, co]) == -1 for i in dense)
    assert all(int(rec[i, co]) >= 0 for i in range(len(rec)) if i not in dense)
    back = ReuseTrace.load(p)
    for i in dense:
        r = back.records[i]
        assert (r.head_counts[..., 0] == r.batch * r.rows).all() and not r.head_counts[..., 1:].any()
        if r.pattern_counts is not None:
            assert r.pattern_counts[0] == r.pattern_counts.sum() == r.batch * r.heads * r.rows


def test_aggregation_is_consistent(wan_trace):
    stats = wan_trace.op_kind_stats()
    assert set(stats) >= {"self_qk", "cross_qk", "proj_q", "ffn_in", "ffn_out"}
    assert "dense" not in stats
    qk = stats["self_qk"]
    assert isinstance(qk, ModeStats) and qk.group_names == ("t", "h", "w")
    recs = wan_trace.select(op="self_qk")
    assert qk.n_rows == sum(r.batch * r.heads * r.rows for r in recs)
    counts = wan_trace.op_kind_counts()
    assert counts["self_qk"].dense == sum(r.dense_macs for r in recs)
    total = wan_trace.total_counts()
    assert total.dense == sum(c.dense for c in counts.values())
    s = wan_trace.summary()
    assert s["per_op"]["self_qk"]["saved_fraction"] > 0.2  # static video, thresholds 4/8
    # dense-only GEMMs (text side, embeddings) dilute the saving of the reusable ones
    assert 0 < s["whole_transformer"]["saved_fraction"] < s["reusable_ops"]["saved_fraction"]
    w = s["whole_transformer"]
    assert w["equiv8_saved_macs"] == pytest.approx(w["dense_macs"] - w["equiv8_macs"])
    json.dumps(s)  # JSON-able


def test_truncated_other_model_bad_version(tmp_path, wan_trace):
    p = wan_trace.save(tmp_path / "t.safetensors")
    data = p.read_bytes()
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="truncated or corrupt"):
        ReuseTrace.load(cut)
    with pytest.raises(ValueError, match="recorded on 'WanTransformer3DModel'"):
        ReuseTrace.load(p, expected_model_class="CogVideoXTransformer3DModel")
    with pytest.raises(ValueError, match="does not exist"):
        ReuseTrace.load(tmp_path / "nope.safetensors")

    from safetensors.torch import load_file, save_file

    tensors = load_file(str(p))
    from safetensors import safe_open

    with safe_open(str(p), framework="pt") as f:
        meta = json.loads(f.metadata()["kaleido_trace"])
    meta["format_version"] = 99
    save_file(tensors, str(tmp_path / "v.safetensors"), metadata={"kaleido_trace": json.dumps(meta)})
    with pytest.raises(ValueError, match="format version 99"):
        ReuseTrace.load(tmp_path / "v.safetensors")
    save_file(tensors, str(tmp_path / "plain.safetensors"))
    with pytest.raises(ValueError, match="not a Kaleido trace"):
        ReuseTrace.load(tmp_path / "plain.safetensors")
    meta["format_version"] = 2
    bad = dict(tensors)
    bad["head_counts"] = bad["head_counts"][:-5].clone()
    save_file(bad, str(tmp_path / "short.safetensors"), metadata={"kaleido_trace": json.dumps(meta)})
    with pytest.raises(ValueError, match="corrupt"):
        ReuseTrace.load(tmp_path / "short.safetensors")


def test_hand_off_to_the_simulator(wan_trace):
    from kaleido.hw.inputs.trace_adapter import profile_from_trace

    prof, _notes = profile_from_trace(wan_trace)
    assert prof.grid == (3, 4, 4)
    qk = prof.ops["self_attn_qk"].stats
    # video rows only: batch 1 x 2 heads x 48 tokens x 2 layers x 2 steps
    assert qk.n_rows == 1 * 2 * 48 * 2 * 2
    assert np.array_equal(qk.mode_counts, wan_trace.op_kind_stats()["self_qk"].mode_counts)


def test_get_trace_without_apply_is_an_error():
    with pytest.raises(ValueError, match="not applied"):
        get_trace(torch.nn.Linear(2, 2))


def test_summary_adds_ops_of_different_low_bits():
    from diffusers import WanTransformer3DModel

    torch.manual_seed(0)
    model = WanTransformer3DModel(
        patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=24, in_channels=4, out_channels=4,
        text_dim=16, freq_dim=16, ffn_dim=32, num_layers=2, rope_max_seq_len=64,
    ).eval()
    kaleido.apply(model, {"reuse": {"theta1": 8, "theta2": 16, "low_bits": 6}, "ops": {"ffn": {"low_bits": 5}}})
    with torch.no_grad():
        model(torch.randn(1, 4, 3, 8, 8), torch.tensor([500.0]), torch.randn(1, 7, 16))
    s = kaleido.remove(model).summary()
    assert s["whole_transformer"]["dense_macs"] == sum(d["dense_macs"] for d in s["per_op"].values())
