"""The accelerator comparison in the report: every registered design on published workloads.

The designs are those of :data:`kaleido.hw.designs.DESIGNS`, in its order, each counted by its ``count``
and priced by its ``price`` (:func:`kaleido.hw.designs.evaluate`):

* the **dense array** and **Kaleido**: Kaleido's counts come from the reuse profile measured by Kaleido's
  own trace on the miniature pipeline (the representative Kaleido setting's row), carried to the workload
  by the simulator's documented transfer rule; utilisation with no dispatcher, the scheduler, and
  scheduler + matcher come from the same run.  The **A100** is the table's own line (time and energy).
* the designs that replay another technique's trace (**AdapTiV / EXION / Cambricon-D-class**,
  :func:`kaleido.hw.designs.replayed_designs`): the trace each algorithm recorded while it ran on the
  miniature pipeline (its rows' :class:`~kaleido.evaluation.simulator_profiles.SimulatorInputs`), replayed by
  :func:`kaleido.hw.designs.baseline_replay.count_replay` with the design's utilisation costs (``replay_cost``);
  each row says so (``replayed``), lists every input with its origin (``inputs``: MEASURED / paper /
  ASSUMED) and gives the ideal model's figure as ``upper_bound_speedup_vs_dense``.  A row recorded before
  traces existed falls back to the ideal per-op-fraction model and is labelled UPPER BOUND.

Times are compute-bound array cycles at the configured clock (the simulator's Kaleido
time also takes DRAM into account; here we compare cycles for every design alike).
"""

from __future__ import annotations

from pathlib import Path

from kaleido.evaluation.simulator_profiles import SimulatorInputs
from kaleido.hw.designs import DESIGNS, evaluate, replayed_designs
from kaleido.hw.designs.common import MeasuredSkips

DEFAULT_WORKLOADS = ("wan-1.3b-480p", "wan-1.3b-720p", "hunyuan-720p")
#: the accelerator baselines in table order, read from the registry: (method, its design, the design's ``count``)
#: (report/html.py reads each design's ``assumptions``)
BASELINE_DESIGNS = tuple((d.method, d, d.count) for d in replayed_designs())


def _dense_where_missing(prof, wl):
    """``prof`` with the op kinds of ``wl`` it has no statistics for set dense; ``(prof, those kinds)``."""
    missing = [k for k in wl.op_kinds() if k not in prof.ops]
    for k in missing:
        prof.ops[k] = None  # dense: the trace did not cover it
    return prof, missing


def synthetic_profile_path() -> Path:
    import importlib.resources

    return Path(str(importlib.resources.files("kaleido") / "assets" / "profiles" / "synthetic_correlated.json"))


def design_table(kaleido_row: dict | None, baseline_rows: dict[str, dict], workload, steps: int | None = None,
                 quality: dict[str, tuple[float, int]] | None = None) -> dict:
    """All designs on ``workload`` (a published workload's name, or a :class:`~kaleido.hw.inputs.workloads.Workload` such
    as :func:`~kaleido.hw.inputs.workloads.miniature_workload`); ``baseline_rows``: method -> one sweep row (its
    representative setting).

    ``quality``: method -> (mean PSNR, runs) of that setting over every prompt and seed
    (:func:`quality_by_method`); each design's ``psnr`` is that mean and ``psnr_runs`` its count.
    Without it ``psnr`` is the one representative row's (``psnr_runs`` 1: one prompt, one seed).
    """
    import json

    from kaleido.hw.arch.config import ArrayConfig
    from kaleido.hw.arch.energy import EnergyTable
    from kaleido.hw.inputs.profile import Profile
    from kaleido.hw.inputs.workloads import get_workload

    wl = get_workload(workload, steps=steps) if isinstance(workload, str) else workload
    notes = []
    measured = None if kaleido_row is None else SimulatorInputs.from_report(kaleido_row["report"], "kaleido row").kaleido
    if measured is not None:
        prof, missing = _dense_where_missing(measured, wl)
        lbs = {int(e.stats.low_bits) for e in prof.ops.values() if e is not None}
        low_bits = max(lbs) if lbs else 4  # the simulator refuses a profile whose ops disagree
        src = f"measured: kaleido {kaleido_row['point']['settings']} on the miniature pipeline"
        if missing:
            notes.append(f"Kaleido profile has no statistics for {missing}: simulated dense")
    else:
        prof, _ = _dense_where_missing(Profile.from_dict(json.loads(synthetic_profile_path().read_text())), wl)
        low_bits = 4
        src = "SYNTHETIC example profile (no Kaleido rows with a trace)"
    cfg = ArrayConfig(low_bits=low_bits)
    energy = EnergyTable()
    pes = cfg.rows * cfg.cols
    clock = cfg.clock_ghz * 1e9
    designs, kal, a100, dense_cyc = [], None, None, None
    for name, design in DESIGNS.items():  # the registry, in table order
        if not design.on_array:  # the A100: the table's own line
            if name == "a100":
                a100 = evaluate(design, wl, None, cfg, energy)
            continue
        if design.method is None:  # needs no statistics: the dense array (the reference) or another such design
            r = evaluate(design, wl, None, cfg, energy)
            if name == "dense":
                dense_cyc = r.counts.cycles
            designs.append({"design": r.counts.design, "method": None,
                            "source": "dense" if name == "dense" else "no statistics", "cycles": r.counts.cycles,
                            "utilisation": r.counts.utilisation(pes), "mac_energy_j": r.component_j("mac"),
                            "psnr": None})
        elif design.method == "kaleido":  # Kaleido's own statistics: the profile
            kal = evaluate(design, wl, prof, cfg, energy, transfer=True)
            designs.append({"design": kal.counts.design, "method": "kaleido", "source": src,
                            "cycles": kal.counts.cycles, "utilisation": kal.counts.utilisation(pes),
                            "mac_energy_j": kal.component_j("mac"), "psnr": _psnr(kaleido_row)})
        elif design.method in baseline_rows:  # another technique's trace, replayed
            d = _baseline(design, baseline_rows[design.method], wl, cfg, energy)
            if d["replayed"]:
                notes.append(f"{d['design']} inputs: " + "; ".join(f"{k} [{v}]" for k, v in d["inputs"].items()))
            designs.append(d)
    sim = kal.counts.detail  # Kaleido's SimResult: utilisation at every dispatcher level, normalisation
    s = sim.summary()
    k_cyc = kal.counts.cycles
    for d in designs:
        if d["psnr"] is not None:
            d["psnr"], d["psnr_runs"] = (quality or {}).get(d["method"], (d["psnr"], 1))
        else:
            d["psnr_runs"] = 0
        d["time_s"] = d["cycles"] / clock
        d["speedup_vs_dense"] = dense_cyc / max(1.0, d["cycles"])
        d["kaleido_speedup_over_it"] = d["cycles"] / max(1.0, k_cyc)
    return {"workload": wl.name, "steps": wl.steps, "designs": designs, "a100_time_s": a100.counts.time_s,
            "a100_energy_j": a100.energy_j, "kaleido_time_s_with_dram": kal.counts.time_s,
            "utilisation": s["utilisation"], "normalisation": s["normalisation"], "notes": notes + list(sim.notes),
            "area_mm2": s.get("area_mm2"), "iso_area": s.get("iso_area")}


def _baseline(design, row: dict, wl, cfg, energy) -> dict:
    """One accelerator baseline's table row: its recorded trace replayed (see the module docstring), or the ideal
    model over the row's MAC shares when the row carries no trace (UPPER BOUND)."""
    method = design.method
    pes = cfg.rows * cfg.cols
    prof = SimulatorInputs.from_report(row["report"], f"{method} row").accel
    if prof is None:
        r = evaluate(design, wl, MeasuredSkips.from_report(row["report"]), cfg, energy)
        return {"design": r.counts.design + " [UPPER BOUND]", "method": method,
                "source": f"UPPER BOUND: per-op MAC fractions of {method} {row['point']['settings']}, no "
                          "utilisation costs (row recorded without a trace; rerun the sweep to replay one)",
                "replayed": False, "cycles": r.counts.cycles, "utilisation": r.counts.utilisation(pes),
                "mac_energy_j": r.component_j("mac"), "psnr": _psnr(row), "assumptions": list(design.assumptions)}
    res = evaluate(design, wl, prof, cfg, energy)
    r = res.counts.detail
    n_paper = sum(v.startswith("paper") for v in r.inputs.values())
    n_assumed = sum("ASSUMED" in v for v in r.inputs.values())
    return {"design": r.design, "method": method, "replayed": True,
            "source": f"TRACE-REPLAYED with utilisation costs: {method} {row['point']['settings']} "
                      f"({n_paper} input(s) from the paper, {n_assumed} assumed; listed below); ideal model "
                      f"(upper bound, no utilisation costs): {r.dense_cycles / max(1.0, r.upper_bound_cycles):.2f}x "
                      "vs dense",
            "cycles": r.cycles, "utilisation": r.utilisation(pes), "mac_energy_j": res.component_j("mac"),
            "energy_j_mac_dram_side": res.component_j("mac") + res.component_j("dram") + res.component_j("dispatcher"),
            "time_s_with_dram": r.time_s, "upper_bound_speedup_vs_dense": r.dense_cycles / max(1.0, r.upper_bound_cycles),
            "overhead_cycles": r.overhead_cycles, "inputs": r.inputs, "psnr": _psnr(row), "assumptions": r.notes}


#: the matched-quality accelerator table: each design at its most-saving setting with at least this PSNR
MATCHED_PSNR_DB = 30.0


def representatives(aggs, min_psnr: float | None = None):
    """One setting per method.

    Default: the setting closest to 50% self-attn q.k^T savings (or to 50% of the whole
    transformer if it saves no q.k^T).  With ``min_psnr``: the setting saving the largest share
    of the whole transformer (what an accelerator's time follows) among those whose mean PSNR is
    at least ``min_psnr``; a method with no such setting is left out.
    """
    best = {}
    for a in aggs:
        if min_psnr is None:
            x = a.self_qk_saved if a.self_qk_saved > 0 else a.total_saved
            score = (abs(x - 0.5), 0.0)
        elif a.psnr >= min_psnr:
            score = (-a.total_saved, -a.psnr)
        else:
            continue
        if a.method not in best or score < best[a.method][0]:
            best[a.method] = (score, a)
    return [v[1] for _, v in sorted(best.items())]


def representative_row(rows, a):
    """The first row (by prompt, seed) of aggregate ``a``."""
    cand = [r for r in rows if r.get("method") == a.method and r.get("point", {}).get("settings") == a.settings
            and not r.get("error")]
    return sorted(cand, key=lambda r: (r["prompt"], r["seed"]))[0] if cand else None


def quality_by_method(aggs, min_psnr: float | None = None) -> dict[str, tuple[float, int]]:
    """Method -> (mean PSNR over its prompts and seeds, number of runs) of its representative setting
    (:func:`representatives`), the quality :func:`design_table` shows beside each design."""
    return {a.method: (float(a.psnr), int(a.n)) for a in representatives(aggs, min_psnr)}


def design_rows(rows, aggs, min_psnr: float | None = None) -> tuple[dict | None, dict[str, dict]]:
    """The rows :func:`design_table` takes: Kaleido's and each accelerator baseline's representative
    row (:func:`representatives`, at ``min_psnr`` when given)."""
    reps = {a.method: a for a in representatives(aggs, min_psnr)}
    k_row = representative_row(rows, reps["kaleido"]) if "kaleido" in reps else None
    base_rows = {d.method: representative_row(rows, reps[d.method]) for d in replayed_designs() if d.method in reps}
    return k_row, {m: r for m, r in base_rows.items() if r is not None}


def accel_tables(rows, aggs, workloads: str, min_psnr: float | None = None) -> tuple[list[dict], str | None]:
    """``(tables, why_none)``: :func:`design_table` per workload of ``workloads`` (comma-separated names; ``"none"``:
    no table), each design at its representative setting or, with ``min_psnr``, at its most-saving setting with at
    least that mean PSNR (matched quality); ``why_none`` is one line when the rows hold no design to tabulate.
    An unknown workload name is a ``ValueError``."""
    if workloads.strip().lower() == "none":
        return [], None
    from kaleido.hw.inputs.workloads import workload_names

    names = [w.strip() for w in workloads.split(",") if w.strip()]
    unknown = [w for w in names if w not in workload_names()]
    if unknown:
        raise ValueError(f"unknown workload(s) {unknown}; known: {', '.join(workload_names())} (or 'none')")
    k_row, base_rows = design_rows(rows, aggs, min_psnr)
    if k_row is None and not base_rows:
        if min_psnr is None:
            return [], ("no accelerator table: the rows hold no kaleido, adaptiv, exion or cambricon_d results "
                        "(add them with --methods, or pass --workloads none)")
        return [], (f"no matched-quality accelerator table: no kaleido, adaptiv, exion or cambricon_d setting "
                    f"reaches {min_psnr:.0f} dB")
    quality = quality_by_method(aggs, min_psnr)  # each setting's mean PSNR over its prompts and seeds
    return [design_table(k_row, base_rows, w, quality=quality) for w in names], None


def _psnr(row):
    if row is None:
        return None
    v = row["quality"]["psnr"]
    return float("inf") if v == "inf" else float(v)
