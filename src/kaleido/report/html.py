"""Build the single-file HTML report (plots embedded as base64 PNG, no external resources).

Sections: the setup; PSNR at matched self-attention q.k^T savings (Kaleido vs sparse
attention vs token merging); the ranking at matched quality, with each method's measured
wall time against dense and where its saving is real (today's hardware or the simulated
accelerator, with its speedup); the quality/savings Pareto plot; every setting's numbers;
side-by-side frames per method; the accelerator comparison and utilisation with and
without the dispatcher (simulated, labelled); the paper's figures beside ours
(labelled as the paper's); points a method refused.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import math
import subprocess
from pathlib import Path

from kaleido.atomic import write_atomic
from kaleido.compare.analysis import NEEDS_ACCELERATOR, TODAY, accelerator_speedups, fmt_ratio
from kaleido.compare.analysis import (MATCH_TARGETS, RANK_MIN_PSNR_DB, aggregate, errors, fmt_pct, load_retimed,
                                      load_rows, matched_savings, ranking_at_quality,
                                      pareto_figure, pareto_front)
from kaleido.compare.points import DENSE

from .accel import BASELINE_DESIGNS, quality_by_method, representatives
from .paper import PAPER_FIGURES

_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1180px;margin:24px auto;color:#222;
line-height:1.45;padding:0 16px}
h1{margin-bottom:0}h2{border-bottom:2px solid #ddd;padding-bottom:4px;margin-top:34px}
table{border-collapse:collapse;margin:10px 0;font-size:14px}th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}
th{background:#f3f3f3}td.l,th.l{text-align:left}tr.kaleido td{background:#fff1f0;font-weight:600}
.note{color:#555;font-size:13px}.paper{background:#fffbe6;border:1px solid #e6d98a;padding:8px 12px}
.frames td{text-align:left;vertical-align:middle}.frames img{image-rendering:pixelated;height:96px}
.tag{display:inline-block;font-size:11px;padding:1px 6px;border-radius:8px;background:#eee;margin-left:6px}
"""


def _by_group(methods) -> list[str]:
    """``methods`` in the order of their technique groups (Kaleido, sparse attention, token merging, ...; an
    unregistered name last), each group's in the order given."""
    from kaleido.techniques.registry import GROUPS, group_of

    rank = {g: i for i, g in enumerate(GROUPS)}
    return sorted(methods, key=lambda m: rank.get(group_of(m), len(rank)))


def _img(png: bytes, alt: str, width: str = "100%") -> str:
    return f'<img alt="{html.escape(alt)}" style="width:{width}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def _thumb(b64: str | None, alt: str) -> str:
    return "" if not b64 else f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{b64}">'


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              timeout=5).stdout.strip() or "unknown"
    except Exception:
        return "unknown"


def _f(x, nd=2, unit=""):
    if x is None:
        return "n/a"
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    return f"{x:.{nd}f}{unit}"


def _matched_section(matched) -> str:
    head = "".join(f"<th>PSNR @ {100 * t:.0f}%</th><th>SSIM @ {100 * t:.0f}%</th>" for t in MATCH_TARGETS)
    rows = []
    from kaleido.techniques.registry import group_of

    for m in _by_group(matched):
        cells = matched[m]
        kind = group_of(m) or "other"
        tds = "".join(f'<td title="{html.escape(c.how)}">{_f(c.psnr)}</td><td>{_f(c.ssim, 4)}</td>' for c in cells)
        hows = "<br>".join(html.escape(f"{100 * c.target:.0f}%: {c.how}") for c in cells)
        rows.append(f'<tr class="{"kaleido" if m == "kaleido" else ""}"><td class="l">{m}</td><td class="l">{kind}</td>'
                    f'{tds}<td class="l note">{hows}</td></tr>')
    return (f'<table><tr><th class="l">method</th><th class="l">kind</th>{head}<th class="l">how</th></tr>'
            + "".join(rows) + "</table>")


def _wall_cell(a) -> str:
    """A setting's median wall-time ratio against dense, its paired runs and the device they ran on."""
    if a.wall_ratio_runs == 0:
        return '<td>-</td><td class="l note">no dense time to pair with</td>'
    return (f'<td>{fmt_ratio(a.wall_ratio)} <span class="note">({a.wall_ratio_runs})</span></td>'
            f'<td class="l note">{html.escape(a.wall_device)}</td>')


def _ranking_section(aggs, accel: dict | None = None) -> str:
    """The ranking at matched quality, each method with its MAC saving, its measured wall time against dense and
    where its saving is real (``accel``: :func:`~kaleido.compare.analysis.accelerator_speedups` at the level)."""
    rows = []
    for i, r in enumerate(ranking_at_quality(aggs, accel=accel), 1):
        b = r.best
        cls = "kaleido" if "kaleido" in r.method else ""
        where = f'<td class="l">{html.escape(r.where)}</td>'
        if b is None:
            rows.append(f'<tr class="{cls}"><td>-</td><td class="l">{html.escape(r.method)}</td>'
                        f'<td class="l">not reached (best {_f(r.best_psnr)} dB)</td><td></td><td></td><td></td>'
                        f"<td></td><td></td>{where}</tr>")
            continue
        rows.append(f'<tr class="{cls}"><td>{i}</td><td class="l">{html.escape(r.method)}</td>'
                    f'<td class="l">{html.escape(b.label)}</td><td>{_f(b.psnr)} {_ci(b.psnr_ci95)}</td>'
                    f"<td>{_f(b.ssim, 4)}</td><td>{fmt_pct(b.total_saved)} {_ci(b.total_saved_ci95, pct=True)}</td>"
                    f"{_wall_cell(b)}{where}</tr>")
    return ('<table><tr><th>#</th><th class="l">method</th><th class="l">its most-saving setting at the level</th>'
            "<th>PSNR dB [95% CI]</th><th>SSIM</th><th>whole transformer saved (MACs) [95% CI]</th>"
            "<th>wall time vs dense, measured (runs)</th><th class='l'>measured on</th>"
            "<th class='l'>where the saving is real</th></tr>"
            + "".join(rows) + "</table>" + _wall_note())


def _wall_note() -> str:
    return ('<p class="note"><i>Wall time vs dense</i>: the median over the setting\'s runs of its generation time '
            "divided by the dense generation's for the same prompt and seed, timed in the same process or the same "
            "sweep run (<code>benchmarks/retime_ranking.py</code> times a setting back to back with dense); a setting "
            "with no such dense time shows none. On the machine named beside it (<i>unknown device</i>: rows written "
            "before rows recorded one); below 1x is faster. "
            f"<i>{html.escape(TODAY)}</i>: the technique skips work on a CPU or GPU today (step caches, sparse "
            f"attention, token merging); <i>{html.escape(NEEDS_ACCELERATOR)}</i>: its saving is realised only by the "
            "hardware it was designed for (Kaleido, AdapTiV-, EXION-, Cambricon-D-class), whose simulated speedup "
            "over the dense array (the accelerator tables below, at the same setting) is given where there is one; "
            "on a CPU or GPU its float path emulates the saving and costs time. A measured ratio above 1x for a "
            "method on today's hardware means its implementation here cost more than it skipped on that machine "
            "(the sparse-attention baselines compute the full attention and mask it; token merging matches and "
            "unmerges in PyTorch); the classification says what a kernel that skips the work realises. Each ratio "
            "pairs two generations timed separately, so a machine busy with other work adds noise to it.</p>")


def _settings_table(aggs) -> str:
    rows = []
    for a in aggs:
        rows.append(f'<tr class="{"kaleido" if a.method == "kaleido" else ""}"><td class="l">{html.escape(a.label)}</td>'
                    f"<td>{a.n}</td><td>{_f(a.psnr)}</td><td>{_ci(a.psnr_ci95)}</td><td>{_f(a.psnr_min)}</td>"
                    f"<td>{_f(a.ssim, 4)}</td>"
                    f"<td>{fmt_pct(a.self_qk_saved)}</td><td>{fmt_pct(a.self_qk_saved_net)}</td>"
                    f"<td>{fmt_pct(a.saved_by_kind.get('ffn_in'))}</td><td>{fmt_pct(a.saved_by_kind.get('proj_q'))}</td>"
                    f"<td>{fmt_pct(a.total_saved)}</td><td>{_ci(a.total_saved_ci95, pct=True)}</td>"
                    f'{_wall_cell(a)}<td class="l">{html.escape(a.realised)}</td></tr>')
    return ('<table><tr><th class="l">method / settings</th><th>n</th><th>PSNR dB</th><th>95% CI</th><th>min PSNR</th>'
            "<th>SSIM</th><th>self q.k<sup>T</sup> saved</th><th>net of estimate</th><th>FFN-in saved</th>"
            "<th>proj-q saved</th><th>transformer saved</th><th>95% CI</th><th>wall time vs dense (runs)</th>"
            "<th class='l'>measured on</th><th class='l'>where the saving is real</th></tr>" + "".join(rows) + "</table>"
            "<p>95% CI: percentile bootstrap over prompts (each prompt's seeds averaged first); one prompt gives "
            "no interval (shown as one value twice).</p>")


def _ci(ci, pct: bool = False) -> str:
    lo, hi = ci
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "-"
    return f"[{fmt_pct(lo)}, {fmt_pct(hi)}]" if pct else f"[{_f(lo)}, {_f(hi)}]"


def _frames_section(rows, aggs) -> str:
    dense = {(r["point"]["prompt"], r["point"]["seed"]): r for r in rows if r.get("point", {}).get("method") == DENSE}
    out = ['<table class="frames"><tr><th class="l">method (setting)</th><th class="l">first / middle / last frame</th>'
           "<th>PSNR</th><th>self q.k<sup>T</sup> saved</th></tr>"]
    reps = representatives(aggs)
    if not reps:
        return "<p>No method rows yet.</p>"
    prompt = reps[0].prompt
    d = next((v for (p, s), v in dense.items() if p == prompt), None)
    if d is not None:
        out.append(f'<tr><td class="l">dense (reference)</td><td>{_thumb(d.get("thumbs"), "dense")}</td><td>-</td><td>-</td></tr>')
    for a in reps:
        # lowest seed first: compacted rows (kaleido compare --compact) keep thumbnails only there
        r = next((r for r in sorted(rows, key=lambda r: r.get("seed", 0)) if r.get("method") == a.method
                  and r.get("point", {}).get("settings") == a.settings and r.get("prompt") == prompt
                  and not r.get("error") and r.get("thumbs")), None)
        if r is None:
            continue
        out.append(f'<tr class="{"kaleido" if a.method == "kaleido" else ""}"><td class="l">{html.escape(a.label)}</td>'
                   f'<td>{_thumb(r.get("thumbs"), a.label)}</td><td>{_f(_psnr(r["quality"]["psnr"]))}</td>'
                   f'<td>{fmt_pct(r["report"]["saved_fraction"].get("self_qk"))}</td></tr>')
    out.append("</table>")
    return f'<p class="note">Prompt: "{html.escape(prompt or "")}", seed of the first row.</p>' + "".join(out)


def _psnr(v):
    return math.inf if v == "inf" else float(v)


def _accel_section(rows, aggs, workloads, steps=None) -> str:
    try:
        from .accel import design_rows, design_table  # noqa: F401 (kept lazy: kaleido.hw)
    except ImportError as e:
        return f"<p>Accelerator models unavailable in this build: {html.escape(str(e))}</p>"
    k_row, base_rows = design_rows(rows, aggs)
    quality = quality_by_method(aggs)
    parts = ['<p class="note">Every design is the same 128x128 int8 array and cycle model (<code>kaleido.hw</code>), '
             "compute-bound cycles at 1 GHz. Kaleido: <code>kaleido.hw.simulate</code> replaying the mode statistics "
             "its trace recorded on the miniature pipeline (carried to each workload by the simulator's transfer "
             "rule). AdapTiV / EXION / Cambricon-D-class: our dataflow models "
             "(<code>kaleido/hw/designs/</code>) fed with the work their algorithms left on the same "
             "pipeline, prompts and seeds; what they do not model (listed under the table) would make them slower. "
             "MAC energy only (memory energy left out for all designs alike). Each method at its representative "
             "setting (closest to 50% self-attention q.k<sup>T</sup> savings); its PSNR is the mean over every prompt and "
             "seed of that setting (the number of runs in brackets), while the skip statistics come from its first "
             "(prompt, seed) row.</p>"]
    util_rows = []
    for wl in workloads:
        try:
            t = design_table(k_row, base_rows, wl, steps=steps, quality=quality)
        except Exception as e:  # a workload the simulator cannot run: say so
            parts.append(f"<p>{html.escape(wl)}: simulation failed: {html.escape(str(e))}</p>")
            continue
        parts.append(f"<h3>{html.escape(wl)} ({t['steps']} steps)</h3><table><tr><th class='l'>design</th>"
                     "<th class='l'>skip statistics from</th><th>time (s)</th><th>speedup vs dense array</th>"
                     "<th>Kaleido's speedup over it</th><th>PE utilisation</th><th>MAC energy (J)</th>"
                     "<th>PSNR dB, miniature (runs)</th></tr>")
        for d in t["designs"]:
            parts.append(f"<tr class='{'kaleido' if d['design'].startswith('Kaleido') else ''}'>"
                         f"<td class='l'>{html.escape(d['design'])}</td><td class='l note'>{html.escape(d['source'])}</td>"
                         f"<td>{_f(d['time_s'], 3)}</td><td>{_f(d['speedup_vs_dense'])}x</td>"
                         f"<td>{_f(d['kaleido_speedup_over_it'])}x</td><td>{fmt_pct(d['utilisation'])}</td>"
                         f"<td>{_f(d['mac_energy_j'], 3)}</td><td>{_quality_cell(d)}</td></tr>")
        parts.append(f"<tr><td class='l'>NVIDIA A100 (roofline, simulator)</td><td class='l note'>dense, bf16/int8 "
                     f"peaks and stated attention efficiency</td><td>{_f(t['a100_time_s'], 3)}</td><td colspan=2>"
                     f"Kaleido time incl. DRAM {_f(t['kaleido_time_s_with_dram'], 3)} s; raw one-array vs one-A100</td>"
                     f"<td>-</td><td>{_f(t['a100_energy_j'], 3)} (total)</td><td>-</td></tr>")
        parts.append(_iso_area_row(t) + "</table>")
        for n in t["notes"]:
            parts.append(f'<p class="note">{html.escape(n)}</p>')
        util_rows.append((wl, t["utilisation"]))
    assumptions = {m: design.assumptions for m, design, _ in BASELINE_DESIGNS}
    parts.append("<p class='note'>Not modelled (each would lower that design's speedup): " + "; ".join(
        f"<b>{m}</b>: {html.escape(', '.join(a))}" for m, a in assumptions.items()) + ".</p>")
    if util_rows:
        levels = list(util_rows[0][1])
        parts.append("<h3>Utilisation with and without the dispatcher (Kaleido, simulated)</h3><table><tr>"
                     "<th class='l'>workload</th>" + "".join(f"<th>{html.escape(k)}</th>" for k in levels) + "</tr>")
        for wl, u in util_rows:
            parts.append(f"<tr><td class='l'>{html.escape(wl)}</td>" + "".join(f"<td>{fmt_pct(u[k])}</td>" for k in levels)
                         + "</tr>")
        parts.append("</table>")
    return "".join(parts)


def _iso_area_row(t: dict) -> str:
    """The design table's area line: Kaleido's and the dense array's area, and the dense array given Kaleido's
    area as extra PEs (its time includes DRAM, as Kaleido's does in the A100 line); empty without area figures."""
    a, iso = t.get("area_mm2"), t.get("iso_area")
    if not a or not iso:
        return ""
    return (f"<tr><td class='l'>dense array at Kaleido's area ({iso['rows']}x{iso['cols']} = {iso['pes']:,} PEs)</td>"
            f"<td class='l note'>area at 16 nm: Kaleido {_f(a['kaleido']['total_mm2'])} mm^2, dense array "
            f"{_f(a['dense_array']['total_mm2'])} mm^2 (synthesised PEs and dispatcher, CACTI SRAM)</td>"
            f"<td>{_f(iso['time_s'], 3)} (incl. DRAM)</td><td>-</td>"
            f"<td>{_f(iso['speedup_vs_dense_iso_area'])}x (iso-area, incl. DRAM)</td><td>-</td><td>-</td><td>-</td></tr>")


def _quality_cell(d: dict) -> str:
    """A design's PSNR with the number of runs it averages (``-``: no quality, the dense array)."""
    return "-" if d.get("psnr") is None else f"{_f(d['psnr'])} ({d.get('psnr_runs', 1)})"


def _matched_tables(rows, aggs, workloads, steps=None) -> tuple[list[tuple[str, dict]], str | None]:
    """``([(workload, design table)], why_none)``: every design at its most-saving setting with PSNR >= the bar;
    ``why_none`` is the report's paragraph saying why there is no table."""
    try:
        from .accel import MATCHED_PSNR_DB, design_rows, design_table
    except ImportError as e:
        return [], f"<p>Accelerator models unavailable in this build: {html.escape(str(e))}</p>"
    k_row, base_rows = design_rows(rows, aggs, MATCHED_PSNR_DB)
    if k_row is None and not base_rows:
        return [], f"<p>No Kaleido or accelerator-baseline setting reaches {MATCHED_PSNR_DB:.0f} dB.</p>"
    tables = []
    for wl in workloads:
        try:
            tables.append((wl, design_table(k_row, base_rows, wl, steps=steps)))
        except Exception as e:  # a workload the simulator cannot run: say so
            return [], f"<p>{html.escape(wl)}: simulation failed: {html.escape(str(e))}</p>"
    return tables, None


def _accel_matched_quality(rows, aggs, workloads, steps=None, matched=None) -> str:
    """Speedups with every design at (nearly) the same quality: its most-saving setting with PSNR >= the bar
    (``matched``: :func:`_matched_tables`' result, computed here when not given)."""
    from .accel import MATCHED_PSNR_DB

    tables, why = matched if matched is not None else _matched_tables(rows, aggs, workloads, steps)
    if why:
        return why
    reps = {a.method: a for a in representatives(aggs, MATCHED_PSNR_DB)}
    from kaleido.hw.designs import replayed_designs

    accelerated = ["kaleido", *(d.method for d in replayed_designs())]
    missing = [m for m in accelerated if m not in reps and any(a.method == m for a in aggs)]
    out = [f'<p class="note">Each design at its setting that saves the most of the whole transformer while its mean '
           f"PSNR stays at or above {MATCHED_PSNR_DB:.0f} dB (the table above takes the setting nearest 50% "
           "self-attention q.k<sup>T</sup> savings instead, whatever its quality).</p>",
           "<table><tr><th class='l'>design</th><th class='l'>setting</th><th>PSNR dB, miniature (runs)</th>"
           + "".join(f"<th>speedup vs dense, {html.escape(wl)}</th>" for wl, _ in tables) + "</tr>"]
    # every table has the same designs in the same order; keep those that stand for a setting at the bar
    for i, d in enumerate(tables[0][1]["designs"] if tables else []):
        m = d["method"]
        if m not in reps:  # the dense array, or a Kaleido row simulated from the synthetic profile
            continue
        out.append(f"<tr class='{'kaleido' if m == 'kaleido' else ''}'><td class='l'>{html.escape(d['design'])}</td>"
                   f"<td class='l'>{html.escape(reps[m].label)}</td><td>{_f(reps[m].psnr)} ({reps[m].n})</td>"
                   + "".join(f"<td>{_f(t['designs'][i]['speedup_vs_dense'])}x</td>" for _, t in tables) + "</tr>")
    out.append("</table>")
    if missing:
        out.append(f'<p class="note">No setting at or above {MATCHED_PSNR_DB:.0f} dB: {", ".join(missing)}.</p>')
    return "".join(out)


def _gap_text(aggs) -> str:
    """Kaleido's PSNR minus each Cambricon-D-style setting's, at the same share of the whole transformer's
    8-bit-equivalent MACs saved (Cambricon-D skips work in every GEMM, not in q.k^T, so q.k^T savings
    cannot match them): Kaleido's PSNR linearly interpolated along its own Pareto front (whole-transformer
    saving, PSNR) between the two settings that bracket Cambricon-D's saving, never extrapolated."""
    k = [a for a in aggs if a.method == "kaleido" and math.isfinite(a.psnr)]
    front = pareto_front([(a.total_saved, a.psnr) for a in k])
    pts = sorted((k[i] for i in front), key=lambda a: a.total_saved)
    parts = []
    for c in sorted((a for a in aggs if a.method == "cambricon_d"), key=lambda a: a.total_saved):
        t = c.total_saved
        lo = [a for a in pts if a.total_saved <= t]
        hi = [a for a in pts if a.total_saved >= t]
        if not lo or not hi:
            span = f"{fmt_pct(pts[0].total_saved)}-{fmt_pct(pts[-1].total_saved)}" if pts else "nothing"
            parts.append(f"n/a at {fmt_pct(t)} saved by {c.label} (Kaleido's settings save {span}; not extrapolated)")
            continue
        a, b = lo[-1], hi[0]
        w = 0.0 if b.total_saved == a.total_saved else (t - a.total_saved) / (b.total_saved - a.total_saved)
        psnr = a.psnr + w * (b.psnr - a.psnr)
        how = f"at {a.label}" if a is b else f"interpolated between {a.label} and {b.label}"
        parts.append(f"{_f(psnr - c.psnr)} dB at {fmt_pct(t)} of the whole transformer saved: Kaleido {_f(psnr)} "
                     f"({how}; {a.n} and {b.n} runs) minus {c.label} {_f(c.psnr)} ({c.n} runs)")
    return ("; ".join(parts) or "n/a") + (" (Kaleido minus the Cambricon-D-style method at matched whole-transformer "
                                          "savings, each setting's mean PSNR over its runs, miniature pipeline)")


def _paper_section(aggs, matched) -> str:
    ours = {}
    k = [a for a in aggs if a.method == "kaleido"]
    if k:
        best = max(k, key=lambda a: a.self_qk_saved)
        ours["kaleido"] = f"{_f(best.psnr)} dB at {fmt_pct(best.self_qk_saved)} self-attn q.k^T savings ({best.label})"
    cd = [a for a in aggs if a.method == "cambricon_d"]
    if k and cd:
        ours["gap vs Cambricon-D"] = _gap_text(aggs)
    rows = "".join(f"<tr><td class='l'>{html.escape(n)}</td><td class='l'>{html.escape(v)}"
                   f"<span class='tag'>from the paper</span></td></tr>" for n, v in PAPER_FIGURES)
    our_rows = "".join(f"<tr><td class='l'>{html.escape(n)}</td><td class='l'>{html.escape(v)}"
                       f"<span class='tag'>measured here</span></td></tr>" for n, v in ours.items())
    return ('<div class="paper"><p><b>The paper\'s figures</b> (Miao et al., 2026, as summarised in the project\'s '
            "paper notes; we have no access to the paper's plots, so its reported numbers are shown as a table). "
            "They were measured on full-size HunyuanVideo / Wan 2.1 at 480p-720p on a 16 nm design; ours come from the "
            "miniature pipeline and the simulator, so they are not expected to match.</p>"
            f"<table><tr><th class='l'>figure</th><th class='l'>value</th></tr>{rows}</table>"
            f"<p><b>Ours, beside them:</b></p><table>{our_rows or '<tr><td>no Kaleido rows</td></tr>'}</table></div>")


def _refused_section(errs: list[dict]) -> str:
    """Each refused (method, settings, reason) once, with how many prompt/seed rows it covers."""
    seen: dict[tuple, int] = {}
    for r in errs:
        key = (r["method"], str(r.get("settings")), r["error"])
        seen[key] = seen.get(key, 0) + 1
    items = [f"<li><b>{html.escape(m)}</b> {html.escape(st)}: {html.escape(err)}"
             + (f" <span class='note'>({n} prompt/seed rows)</span>" if n > 1 else "") + "</li>"
             for (m, st, err), n in list(seen.items())[:20]]
    return "<ul>" + "".join(items) + "</ul>"


def build_report(results_dir: str | Path, out: str | Path, title: str = "Kaleido vs baselines",
                 source_note: str = "", workloads: tuple[str, ...] | None = None,
                 accel_steps: int | None = None) -> Path:
    from .accel import DEFAULT_WORKLOADS

    workloads = tuple(workloads or DEFAULT_WORKLOADS)
    rows = load_rows(results_dir)
    aggs = aggregate(rows, load_retimed(results_dir))
    if not aggs:
        raise ValueError(f"{results_dir} has no method rows; run `kaleido compare --results {results_dir}` first")
    matched = matched_savings(aggs)
    pipelines = sorted({r["point"]["pipeline"] for r in rows if "point" in r})
    prompts = sorted({r["point"]["prompt"] for r in rows if "point" in r})
    seeds = sorted({r["point"]["seed"] for r in rows if "point" in r})
    calls = sorted({str(r["point"]["call"]) for r in rows if "point" in r})
    model_ids = sorted({r["point"].get("model_id", "") for r in rows if "point" in r} - {""})
    errs = errors(rows)
    matched_tables = _matched_tables(rows, aggs, workloads, accel_steps)  # the ranking shows their speedups too
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    body = [
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="note">Generated {now} from {len(rows)} JSON rows in <code>{html.escape(str(results_dir))}</code> '
        f"(commit {_commit()}). {html.escape(source_note)}</p>",
        "<h2>Setup</h2>",
        f"<p>Pipeline(s): <b>{', '.join(map(html.escape, pipelines))}</b> (weights {html.escape(', '.join(model_ids) or 'unrecorded')}); "
        f"call overrides {html.escape(', '.join(calls))}; "
        f"{len(prompts)} prompt(s) x {len(seeds)} seed(s). Every method runs on the same transformer, prompt embeddings "
        "and seeded generator as the dense run; quality is PSNR (peak 1.0) and SSIM per decoded RGB frame against "
        "dense, averaged. Savings are 8-bit-equivalent MACs per op kind, counted from what each method really "
        "computed (kept blocks, merged token counts, executed blocks, non-zero deltas, Kaleido's mode maps); "
        "<i>net of estimate</i> also charges a method's own selection work (pooled scores, sampled rows, matching, "
        "predictions) to self-attention. LPIPS is not reported: its backbone weights are not available offline.</p>",
        "<h2>PSNR at matched self-attention q.k<sup>T</sup> savings</h2>",
        '<p class="note">Linear interpolation between the two settings of a method that bracket the target; '
        "never extrapolated (n/a: the method's settings do not reach it).</p>",
        _matched_section(matched),
        f"<h2>Whole transformer saved at mean PSNR &ge; {RANK_MIN_PSNR_DB:.0f} dB</h2>",
        '<p class="note">Each method (a stack: its step cache + technique pair) at its setting that saves the most '
        "8-bit-equivalent MACs of the whole transformer while its mean PSNR against dense stays at or above the "
        "level; intervals: 95% bootstrap over prompts. Beside the MACs: the wall time it measured against dense "
        "and where its saving is real (on a CPU or GPU today, or only on the simulated accelerator).</p>",
        _ranking_section(aggs, accelerator_speedups([t for _, t in matched_tables[0]])),
        "<h2>Quality vs savings</h2>",
        _img(pareto_figure(aggs), "Pareto plot: PSNR vs savings"),
        "<h2>Every setting</h2>",
        _settings_table(aggs),
        "<h2>Side-by-side frames</h2>",
        _frames_section(rows, aggs),
        "<h2>Accelerators</h2>",
        _accel_section(rows, aggs, workloads, accel_steps),
        "<h3>At matched quality</h3>",
        _accel_matched_quality(rows, aggs, workloads, accel_steps, matched_tables),
        "<h2>The paper's figures beside ours</h2>",
        _paper_section(aggs, matched),
    ]
    if errs:
        body.append("<h2>Refused points</h2>" + _refused_section(errs))
    page = (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{_CSS}</style></head><body>{''.join(body)}</body></html>")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, page)
    return out
