"""The accelerator comparison in the report, from :mod:`kaleido.hw` and the measured rows.

Two tables, both labelled with what they are:

* **simulated** (``kaleido.hw.simulate``): the dense 128x128 array, Kaleido's array at
  each dispatcher level (utilisation with and without the dispatcher) and the A100, on a
  published workload with a reuse profile;
* **skip-bound** per method: the dense array's simulated cycles of every op kind scaled by
  the fraction of 8-bit-equivalent MACs the method left on that op kind *as measured on
  the miniature pipeline* (``1 - saved``).  This is an upper bound on what an accelerator
  built around the method could reach (no utilisation loss of its dataflow is modelled);
  the AdapTiV / EXION / Cambricon-D dataflow models that would lower it are not built here.
"""

from __future__ import annotations

from pathlib import Path

#: our op kinds -> the simulator's workload op kinds
OP_TO_HW = {"self_qk": "self_attn_qk", "self_pv": "self_attn_pv", "cross_qk": "cross_attn_qk",
            "cross_pv": "cross_attn_pv", "proj_q": "proj_q", "proj_k": "proj_k", "proj_v": "proj_v",
            "proj_out": "proj_out", "cross_proj_q": "cross_proj_q", "cross_proj_kv": "cross_proj_kv",
            "cross_proj_out": "cross_proj_out", "ffn_in": "ffn_up", "ffn_out": "ffn_down"}


def simulated(workload: str = "wan-1.3b-480p", profile_path: str | Path | None = None, steps: int = 10) -> dict:
    """``simulate`` summary of ``workload`` with a profile (default: the simulator's shipped example)."""
    from kaleido.hw.profile import Profile
    from kaleido.hw.simulate import simulate
    from kaleido.hw.workloads import get_workload

    if profile_path is None:
        import importlib.resources

        profile_path = Path(str(importlib.resources.files("kaleido") / "assets" / "profiles" / "synthetic_correlated.json"))
    prof = Profile.load(profile_path)
    wl = get_workload(workload, steps=steps)
    res = simulate(wl, prof, transfer=True)
    s = res.summary()
    dense_by_op = {op: d["dense_cycles"] for op, d in res.by_op().items()}
    return {"workload": workload, "steps": steps, "profile": prof.label or str(profile_path),
            "summary": s, "dense_cycles_by_op": dense_by_op}


def skip_bound_speedup(saved_by_kind: dict[str, float], dense_cycles_by_op: dict[str, float]) -> float:
    """Dense-array cycles / cycles left when each op kind keeps ``1 - saved`` of its work."""
    total = sum(dense_cycles_by_op.values())
    left = 0.0
    for hw_op, cyc in dense_cycles_by_op.items():
        ours = [k for k, v in OP_TO_HW.items() if v == hw_op]
        saved = saved_by_kind.get(ours[0], 0.0) if ours else 0.0
        left += cyc * (1.0 - saved)
    return total / left if left > 0 else float("inf")
