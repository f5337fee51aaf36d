"""SRAM and DRAM traffic of one GEMM instance (bytes), dense and with reuse.

On-chip (default timing, per instance, 1-byte operands, 4-byte partial sums):

* WS: ifmap reads ``M*K*ceil(N/C)`` (every column fold re-streams A), filter reads
  ``K*N`` (each weight loaded once), ofmap ``M*N*kf`` partial-sum writes and
  ``M*N*(kf-1)`` reads (``kf = ceil(K/R)`` K-folds accumulate in the ofmap buffer).
* OS: ifmap ``M*K*ceil(N/C)``, filter ``K*N*ceil(M/R)``, ofmap ``M*N`` writes.
* IS: ifmap ``M*K`` (A is the stationary operand), filter ``K*N*ceil(M/C)`` (every
  column fold of A re-streams B), ofmap as WS (``kf = ceil(K/R)`` K-folds).

With reuse, the A stream carries only what the PEs use: nothing for FULL, a
``low_bits``-wide difference for PARTIAL, a byte for COMPUTE; the decision reads A
and the reference operand once per row (``2*M_grid*K``, charged to the ifmap buffer).

Off-chip: A and B are fetched once if either fits its buffer; otherwise a block of
one stays resident and the other is re-streamed per block (the cheaper order); C is
written once (1 byte per output, requantised
int8).  Attention is fused: the scores (q.k^T output) and P (P.V input) stay on chip.

Limited DRAM bandwidth: :func:`bandwidth_stalls` gives the stalls of a dense GEMM whose
double-buffered SRAM halves refill over a port of so many words per cycle - a physical
refill chain (``default`` timing), or SCALE-Sim v3.0.0's own accounting, reproduced
(``scalesim_compat``; checked in ``tests/hw/arch/test_scalesim_reference.py``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from .config import ArrayConfig
from .mapping import ceil_div, fold_plan
from ..inputs.workloads import Gemm


def sram_bytes(M: int, K: int, N: int, cfg: ArrayConfig, a_stream_frac: float = 1.0, decision_rows: int = 0) -> dict[str, float]:
    R, C = cfg.rows, cfg.cols
    col_folds = ceil_div(N, C)
    ifmap = M * K * col_folds * a_stream_frac + 2.0 * decision_rows * K
    if cfg.dataflow == "ws":
        kf = ceil_div(K, R)
        return {"ifmap": float(ifmap), "filter": float(K * N), "ofmap": float(4 * M * N * (2 * kf - 1))}
    if cfg.dataflow == "is":
        kf = ceil_div(K, R)
        ifmap = M * K * a_stream_frac + 2.0 * decision_rows * K
        return {"ifmap": float(ifmap), "filter": float(K * N * ceil_div(M, C)), "ofmap": float(4 * M * N * (2 * kf - 1))}
    return {"ifmap": float(ifmap), "filter": float(K * N * ceil_div(M, R)), "ofmap": float(4 * M * N)}


def dram_bytes(g: Gemm, cfg: ArrayConfig) -> float:
    """Off-chip bytes of one instance of ``g``.

    Attention runs fused, one block of query rows at a time (as many as fit the ifmap
    buffer with ``head_dim`` channels): k (for q.k^T) or v (for P.V) is streamed once
    per query block; the scores and P never leave the chip.
    """
    M, K, N = g.M, g.K, g.N
    ifmap = cfg.buffers.usable_bytes("ifmap")
    if g.op in ("self_attn_qk", "cross_attn_qk"):
        return float(M * K + K * N * ceil_div(M * K, ifmap))
    if g.op in ("self_attn_pv", "cross_attn_pv"):
        return float(K * N * ceil_div(M * N, ifmap) + M * N)
    a_once, b_once = M * K, K * N
    filt = cfg.buffers.usable_bytes("filter")
    if b_once <= filt or a_once <= ifmap:
        return float(a_once + b_once + M * N)
    # neither operand fits: keep a block of one resident and stream the other per block
    a_resident = a_once + b_once * ceil_div(a_once, ifmap)
    b_resident = b_once + a_once * ceil_div(b_once, filt)
    return float(min(a_resident, b_resident) + M * N)


# ---------------------------------------------------------------------------------------
# Limited DRAM bandwidth: stalls while the double-buffered SRAM halves refill
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class BandwidthResult:
    """One dense GEMM on ``cfg`` with a DRAM port of ``words_per_cycle`` per operand buffer.

    ``compute_cycles``: the stall-free total (:func:`~kaleido.hw.arch.compute.dense_cycles`);
    ``stall_cycles``: cycles the array waits for ifmap/filter refills or ofmap drains;
    ``total_cycles``: compute + stalls (``model="scalesim_v3"``: SCALE-Sim's ``Total
    Cycles``, its last ofmap write).  ``dram_words``: 1-byte words each buffer moves over
    its port: ifmap/filter reads, ofmap writes (``physical``: the outputs, plus every
    K-fold's partial sums when one column fold's outputs overflow half the ofmap buffer;
    ``scalesim_v3``: every write, partial sums included, as SCALE-Sim counts them).  ``refills``:
    refills of each read buffer's idle half after the first half was loaded (the first
    load precedes cycle 0, as in SCALE-Sim's ``Total Cycles``).
    ``total_cycles_incl_prefetch`` (``model="scalesim_v3"`` only): SCALE-Sim's ``Total
    Cycles (incl. prefetch)``, from the first DRAM read to the last ofmap write-back.
    """

    compute_cycles: float
    stall_cycles: float
    total_cycles: float
    dram_words: dict[str, float]
    refills: dict[str, int]
    words_per_cycle: float
    total_cycles_incl_prefetch: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def _fold_streams(M: int, K: int, N: int, cfg: ArrayConfig):
    """Per fold (column folds outer, row folds inner): start cycle, and for each buffer the
    new words it needs in that fold with the window (offset, duration) they are used in.
    """
    R, C = cfg.rows, cfg.cols
    p = fold_plan(M, K, N, cfg.dataflow, R, C)
    df, T = cfg.dataflow, p.T
    fc, fr = np.divmod(np.arange(p.folds), p.row_folds)
    r = np.minimum(R, p.Sr - fr * R).astype(np.float64)  # rows of the fold in use
    c = np.minimum(C, p.Sc - fc * C).astype(np.float64)
    if cfg.timing == "scalesim_compat":
        period = T + R + C - 2 if df == "os" else T + 2 * R + C - 2
    else:
        period = max(T, R)
    start = np.arange(p.folds, dtype=np.float64) * period
    ifmap_cap = cfg.buffers.usable_bytes("ifmap")
    filt_cap = cfg.buffers.usable_bytes("filter")
    first_row = (fr == 0).astype(np.float64)
    first_col = (fc == 0).astype(np.float64)
    pre = 0.0 if df == "os" else float(R)  # ws/is: the stationary operand is preloaded first
    # ws/is accumulate K-folds in the ofmap buffer: only the last K-fold's outputs leave the
    # chip while one column fold's outputs (T x C words) fit half of it; otherwise every
    # K-fold's partial sums are written out (as SCALE-Sim always counts them)
    spill = T * C > cfg.buffers.usable_bytes("ofmap")
    last_row = np.ones_like(r) if spill else (fr == p.row_folds - 1).astype(np.float64)
    if df == "os":  # A's row-fold block streams in every fold; B's column block once per column fold
        a_new = r * K if M * K > ifmap_cap else r * K * first_col
        b_new = c * K if K * c.max() > filt_cap else c * K * first_row
        a_win = b_win = (0.0, float(T))
        out = (r * c, float(T + R - 1), float(C))  # drained after the fold
    elif df == "ws":  # A (M x K-rows) streams per fold, re-streamed per column fold; B preloaded
        a_new = M * r if M * K > ifmap_cap else M * r * first_col
        b_new = r * c
        a_win, b_win = (pre, float(T)), (0.0, float(R))
        out = (T * c * last_row, pre + R, float(T))
    else:  # is: A (K-rows x M-cols) preloaded once; B (N x K-rows) re-streamed per column fold
        a_new = r * c
        b_new = N * r if K * N > filt_cap else N * r * first_col
        a_win, b_win = (0.0, float(R)), (pre, float(T))
        out = (T * c * last_row, pre + R, float(T))
    return start, {"ifmap": (a_new, a_win), "filter": (b_new, b_win)}, out


def _demand_times(start: np.ndarray, new: np.ndarray, win: tuple[float, float], words: np.ndarray) -> np.ndarray:
    """Stall-free cycle at which word index ``words`` of a stream is first used."""
    cum = np.concatenate(([0.0], np.cumsum(new)))
    f = np.clip(np.searchsorted(cum, words, side="right") - 1, 0, len(new) - 1)
    frac = (words - cum[f]) / np.maximum(new[f], 1.0)
    return start[f] + win[0] + frac * win[1]


def bandwidth_stalls(
    M: int, K: int, N: int, cfg: ArrayConfig, words_per_cycle: float | None = None, *, model: str = "auto",
) -> BandwidthResult:
    """Cycles of a dense GEMM when each operand buffer refills over a limited DRAM port.

    ``words_per_cycle``: 1-byte words per cycle on each buffer's port; ``None`` takes
    ``cfg.buffers.dram_gbps / cfg.clock_ghz``.  ``model``:

    * ``"physical"``: each buffer is double-buffered (``BufferConfig.usable_bytes`` per
      half); the first half is loaded before cycle 0; while the array uses one half the
      other refills, a refill of ``P`` words taking ``ceil(P / words_per_cycle) + 1``
      cycles, back to back.  Refill ``k`` is needed when the stream reaches word
      ``P*k`` (words come in the order the folds use them, spread evenly over the part
      of the fold that uses them); the array waits for the latest refill
      (``stall = max_k(arrival_k - need_k)``, the max-plus recurrence of the refill
      chain).  An operand is re-streamed per outer fold unless it fits one half.  The
      ofmap buffer drains a full half over its port; the array waits when both halves
      are full (ws/is partial sums stay on chip while a column fold's outputs fit half
      of it).  Analytic, vectorised: any GEMM size.
    * ``"scalesim_v3"``: SCALE-Sim v3.0.0's accounting of a ``USER``-bandwidth run,
      reproduced (not endorsed; see :func:`_scalesim_v3_bandwidth`): integer
      ``words_per_cycle``, cost per demanded word, GEMMs of up to ~2e7 demanded words.
    * ``"auto"``: ``"scalesim_v3"`` when ``cfg.timing == "scalesim_compat"``, else
      ``"physical"`` (folds follow ``cfg.timing`` in both).
    """
    from .compute import dense_cycles

    for name, v in (("M", M), ("K", K), ("N", N)):
        if not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"bandwidth_stalls: {name}={v!r} must be a positive int (a GEMM dimension)")
    if model not in ("auto", "physical", "scalesim_v3"):
        raise ValueError(f"bandwidth_stalls: model={model!r} is not a model; use 'auto', 'physical' or 'scalesim_v3'")
    bw = cfg.buffers.dram_gbps / cfg.clock_ghz if words_per_cycle is None else words_per_cycle
    if isinstance(bw, bool) or not (isinstance(bw, (int, float, np.floating, np.integer)) and 0 < bw < 1e6):
        raise ValueError(f"bandwidth_stalls: words_per_cycle={words_per_cycle!r} must be in (0, 1e6) words per cycle")
    if model == "scalesim_v3" or (model == "auto" and cfg.timing == "scalesim_compat"):
        return _scalesim_v3_bandwidth(M, K, N, cfg.with_(timing="scalesim_compat"), bw)
    c0 = dense_cycles(M, K, N, cfg)
    start, reads, (o_new, o_off, o_dur) = _fold_streams(M, K, N, cfg)
    late = [0.0]  # arrival - need of every refill / drain
    dram, refills = {}, {}
    for name, (new, win) in reads.items():
        half = cfg.buffers.usable_bytes(name)
        total = float(new.sum())
        dram[name] = total
        n = int(np.ceil((total - half) / half)) if total > half else 0
        refills[name] = n
        if n:
            k = np.arange(1, n + 1, dtype=np.float64)
            late.append(float((k * (np.ceil(half / bw) + 1) - _demand_times(start, new, win, k * half)).max()))
    # ofmap: drain j of one half (D words) starts when that half is full and the port is
    # free; word 2D + (j-1)D can be written only once drain j is done
    D = cfg.buffers.usable_bytes("ofmap")
    o_total = float(o_new.sum())
    dram["ofmap"] = o_total
    n_o = int(o_total // D) - 1
    if n_o > 0:
        j = np.arange(1, n_o + 1, dtype=np.float64)
        L = np.ceil(D / bw)
        full = _demand_times(start, o_new, (o_off, o_dur), j * D - 1)
        done = np.maximum.accumulate(full - j * L) + j * L + L
        late.append(float((done - _demand_times(start, o_new, (o_off, o_dur), (j + 1) * D)).max()))
    stall = max(late)
    return BandwidthResult(float(c0), float(stall), float(c0 + stall), dram, refills, float(bw))


# ---------------------------------------------------------------------------------------
# SCALE-Sim v3.0.0's accounting of a USER-bandwidth run, reproduced (not endorsed)
# ---------------------------------------------------------------------------------------
#
# What v3.0.0 does (read from its memory model, rewritten here from that reading):
# * each read buffer holds its operand in the order SCALE-Sim prefetches it (fold by
#   fold; os's both operands, ws's A and is's B diagonal by diagonal), cut into sets of
#   ceil(bytes / 100) words; half the buffer's sets are "active", the other half
#   prefetches.  A demand outside the active sets swaps halves: the active window jumps a
#   whole half forward (round the operand, as a ring) and one refill of half a buffer
#   is requested, ``ceil(half / bw)`` cycles + 1 after the previous refill.  A demand for
#   a set already swapped out therefore walks the window round the whole ring - the
#   re-fetches that make v3's DRAM reads many times the operand in os / is.
# * a late refill adds its lateness to the line's finishing cycle twice (early ones pull
#   it back once); the array waits for the worst of the three buffers on each line.
# * the ofmap buffer counts free space back when a drain of half the buffer starts (one
#   port-wide line a cycle) and stalls a write only when it is full while a drain is in
#   flight.
# The demand order (skewed, flipped and padded folds) is the same as SCALE-Sim's
# stall-free schedule (:func:`kaleido.hw.arch.compute.dense_cycles`, compat timing).

_V3_MAX_WORDS = 20_000_000


def _v3_streams(M: int, K: int, N: int, df: str, R: int, C: int):
    """Per buffer: (line, word id) of every demanded word in demand order, the fetch rank
    of each word id, and the padded prefetch size; plus the number of lines."""
    p = fold_plan(M, K, N, df, R, C)
    T = p.T
    L = T + R + C - 2 if df == "os" else T + 2 * R + C - 2
    out = {"ifmap": [], "filter": [], "ofmap": []}
    c_R, c_C = np.arange(R), np.arange(C)
    for f in range(p.folds):
        fc, fr = divmod(f, p.row_folds)
        base = f * L
        if df == "os":
            t = np.arange(T)
            tt, cc = np.meshgrid(t, c_R, indexing="ij")
            ok = (fr * R + cc) < M
            out["ifmap"].append((base + tt + cc, cc, (fr * R + cc) * K + tt, ok))
            tt, cc = np.meshgrid(t, c_C, indexing="ij")
            ok = (fc * C + cc) < N
            out["filter"].append((base + tt + cc, cc, tt * N + fc * C + cc, ok))
            jj, cc = np.meshgrid(np.arange(R), c_C, indexing="ij")
            m = fr * R + (R - 1 - jj)
            ok = (m < M) & ((fc * C + cc) < N)
            out["ofmap"].append((base + (T - 1) + jj + cc, cc, m * N + fc * C + cc, ok))
        elif df == "ws":
            mm, cc = np.meshgrid(np.arange(M), c_R, indexing="ij")
            ok = (fr * R + cc) < K
            out["ifmap"].append((base + R + mm + cc, cc, mm * K + fr * R + cc, ok))
            ll, cc = np.meshgrid(np.arange(R), c_C, indexing="ij")
            k = fr * R + R - 1 - ll
            ok = (k < K) & ((fc * C + cc) < N)
            out["filter"].append((base + ll, cc, k * N + fc * C + cc, ok))
            mm, cc = np.meshgrid(np.arange(M), c_C, indexing="ij")
            ok = (fc * C + cc) < N
            out["ofmap"].append((base + 2 * R - 1 + mm + cc, cc, mm * N + fc * C + cc, ok))
        else:  # is
            ll, cc = np.meshgrid(np.arange(R), c_C, indexing="ij")
            k = fr * R + R - 1 - ll
            ok = (k < K) & ((fc * C + cc) < M)
            out["ifmap"].append((base + ll, cc, (fc * C + cc) * K + k, ok))
            nn, cc = np.meshgrid(np.arange(N), c_R, indexing="ij")
            ok = (fr * R + cc) < K
            out["filter"].append((base + R + nn + cc, cc, (fr * R + cc) * N + nn, ok))
            nn, cc = np.meshgrid(np.arange(N), c_C, indexing="ij")
            ok = (fc * C + cc) < M
            out["ofmap"].append((base + 2 * R - 1 + nn + cc, cc, (fc * C + cc) * N + nn, ok))
    streams = {}
    for name, parts in out.items():
        line = np.concatenate([x[0][x[3]] for x in parts]).astype(np.int64)
        col = np.concatenate([x[1][x[3]] for x in parts]).astype(np.int64)
        ids = np.concatenate([x[2][x[3]] for x in parts]).astype(np.int64)
        order = np.lexsort((col, line))  # a line's words in column order, as SCALE-Sim checks them
        streams[name] = (line[order], ids[order])
    # fetch order: the prefetch matrix, flattened by diagonals (d = row + col, higher row first)
    # or by rows; padding (-1) takes no set
    fold_rows_r = p.row_folds
    fold_cols_c = p.col_folds

    def rank(rows_idx, cols_idx, ids, ok, diag):
        key = (rows_idx + cols_idx, -rows_idx) if diag else (rows_idx, cols_idx)
        flat_ids = ids[ok][np.lexsort((key[1][ok], key[0][ok]))]
        r_of = np.full(int(flat_ids.max()) + 1, -1, dtype=np.int64)
        r_of[flat_ids] = np.arange(flat_ids.size)
        return r_of

    ranks, padded = {}, {}
    if df == "os":
        g, c = np.meshgrid(np.arange(fold_rows_r * K), c_R, indexing="ij")  # row fr*K + t, col c
        m = (g // K) * R + c
        ranks["ifmap"] = rank(g, c, m * K + g % K, m < M, True)
        padded["ifmap"] = g.size
        g, c = np.meshgrid(np.arange(fold_cols_c * K), c_C, indexing="ij")
        n = (g // K) * C + c
        ranks["filter"] = rank(g, c, (g % K) * N + n, n < N, True)
        padded["filter"] = g.size
    elif df == "ws":
        g, c = np.meshgrid(np.arange(fold_rows_r * M), c_R, indexing="ij")
        k = (g // M) * R + c
        ranks["ifmap"] = rank(g, c, (g % M) * K + k, k < K, True)
        padded["ifmap"] = g.size
        g, c = np.meshgrid(np.arange(fold_cols_c * K), c_C, indexing="ij")
        n = (g // K) * C + c
        ranks["filter"] = rank(g, c, (g % K) * N + n, n < N, False)
        padded["filter"] = g.size
    else:
        g, c = np.meshgrid(np.arange(fold_cols_c * K), c_C, indexing="ij")
        m = (g // K) * C + c
        ranks["ifmap"] = rank(g, c, m * K + g % K, m < M, False)
        padded["ifmap"] = g.size
        g, c = np.meshgrid(np.arange(fold_rows_r * N), c_R, indexing="ij")
        k = (g // N) * R + c
        ranks["filter"] = rank(g, c, k * N + g % N, k < K, True)
        padded["filter"] = g.size
    return streams, ranks, padded, p.folds * L


def _v3_misses(sets: np.ndarray, n_sets: int, active: int, step: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices into ``sets`` (a buffer's demanded sets, in order) that miss the active
    window, and how many half-swaps each needs before it hits."""
    where, slides = [], []
    s, i, n = 0, 0, sets.size
    chunk = 8192
    while i < n:
        rel = (sets[i:i + chunk] - s) % n_sets
        bad = np.flatnonzero(rel >= active)
        if bad.size == 0:
            i += chunk
            continue
        j = i + int(bad[0])
        k = 0
        while (sets[j] - s) % n_sets >= active:
            s = (s + step) % n_sets
            k += 1
            if k > 10 * n_sets + 10:
                raise RuntimeError("v3 window model did not converge")  # cannot happen for step >= 1
        where.append(j)
        slides.append(k)
        i = j + 1
    return np.asarray(where, dtype=np.int64), np.asarray(slides, dtype=np.int64)


def _scalesim_v3_bandwidth(M: int, K: int, N: int, cfg: ArrayConfig, words_per_cycle) -> BandwidthResult:
    """SCALE-Sim v3.0.0's figures for one dense GEMM run with ``InterfaceBandwidth: USER``.

    ``words_per_cycle``: the port width of each buffer (v3: ``Bandwidth`` for the ofmap,
    ``[layout] *SRAMBankBandwidth`` for ifmap / filter, one bank).  Buffers: the
    ``*_kib`` of ``cfg.buffers`` (v3 halves each itself).  Gives v3's ``Total Cycles``,
    ``Stall Cycles`` and DRAM word counts; ``refills``: v3's half-swaps per read buffer.
    Cost is per demanded word (numpy, a Python loop over array lines): for checking
    against v3 on small GEMMs.
    """
    import math

    from .compute import dense_cycles

    bw = words_per_cycle
    if isinstance(bw, float) and bw.is_integer():
        bw = int(bw)
    if not isinstance(bw, (int, np.integer)) or bw < 1:
        raise ValueError(f"bandwidth_stalls(model='scalesim_v3'): words_per_cycle={words_per_cycle!r} must be a "
                         "positive whole number (SCALE-Sim takes whole words per cycle)")
    R, C = cfg.rows, cfg.cols
    p = fold_plan(M, K, N, cfg.dataflow, R, C)
    words = p.folds * (R * p.T + C * p.T + R * C)
    if words > _V3_MAX_WORDS:
        raise ValueError(f"bandwidth_stalls(model='scalesim_v3'): {M}x{K}x{N} on {R}x{C} demands ~{words:.1e} "
                         f"words, over {_V3_MAX_WORDS:.0e}; use model='physical' for large GEMMs")
    streams, ranks, padded, n_lines = _v3_streams(M, K, N, cfg.dataflow, R, C)
    kib = {"ifmap": cfg.buffers.ifmap_kib, "filter": cfg.buffers.filter_kib, "ofmap": cfg.buffers.ofmap_kib}
    reads, dram, refills, first_load = {}, {}, {}, {}
    for name in ("ifmap", "filter"):
        total = 1024 * kib[name]
        act = math.ceil(total * 0.5)
        pre = total - act
        eps = math.ceil(total / 100)
        line, ids = streams[name]
        r = ranks[name]
        n_valid = int((r >= 0).sum())
        n_sets = n_valid // eps + 1
        a_sets = min(math.ceil(act / eps), n_sets)
        p_sets = min(math.ceil(pre / eps), n_sets - a_sets)
        sets = r[ids] // eps
        if p_sets > 0:
            where, slides = _v3_misses(sets, n_sets, a_sets, p_sets)
        else:
            where, slides = np.zeros(0, np.int64), np.zeros(0, np.int64)
        L = math.ceil(pre / bw)
        first = min(math.ceil(act / bw), math.ceil(padded[name] / bw))
        dram[name] = (first + int(slides.sum()) * L) * bw
        first_load[name] = first  # the first half is requested so as to land by cycle 0
        reads[name] = (line[where], slides, L)
        refills[name] = int(slides.sum())
    # timing: one pass over the array lines
    ev = {}
    for b, (lines, slides, L) in reads.items():
        for ln, k in zip(lines.tolist(), slides.tolist()):
            ev.setdefault(ln, []).append((b, k))
    last = {"ifmap": -1.0, "filter": -1.0}
    o_line = streams["ofmap"][0]
    o_count = np.bincount(o_line, minlength=n_lines)
    total_o = 1024 * kib["ofmap"]
    drain_buf = total_o - math.ceil(total_o * 0.5)
    lines_per_drain = math.ceil(drain_buf / bw)
    free = total_o
    fill = 0  # words in the ofmap line being packed
    queue = []  # packed lines waiting to drain (sizes)
    drain_end = 0
    o_dram = 0
    o_stop = 0

    def drain(start):
        nonlocal free, o_dram, o_stop
        take = queue[:lines_per_drain]
        del queue[:lines_per_drain]
        sz = len(take) * bw - (bw - take[-1])
        o_dram += sz
        free += sz
        o_stop = max(o_stop, start + len(take) - 1)
        return start + len(take) - 1  # one line a cycle, the write port answers at once

    S = 0
    total = 0
    for i in range(n_lines):
        cyc = i + S
        d = {"ifmap": 0.0, "filter": 0.0}
        for b, k in ev.get(i, ()):
            off = 1.0 + d[b]
            L = reads[b][2]
            for _ in range(k):
                last[b] += L + 1
                pot = last[b] - (cyc + off)
                off += pot
                if pot > 0:
                    off += pot
            d[b] = off - 1.0
        cur = cyc
        for _ in range(int(o_count[i])):
            free -= 1
            fill += 1
            if fill == bw:
                queue.append(bw)
                fill = 0
            if cur < drain_end:
                if free <= 0:
                    cur = drain_end
            elif free < total_o - drain_buf:
                if fill:
                    queue.append(fill)
                    fill = 0
                drain_end = drain(cur)
        total = max(total, cur)
        S += int(max(d["ifmap"], d["filter"], cur - cyc))
    if fill:  # after the last line the buffer drains, from that line's cycle on
        queue.append(fill)
    while queue:
        cur = drain(cur) + 1
    dram["ofmap"] = o_dram
    incl = o_stop + max(first_load.values())
    return BandwidthResult(dense_cycles(M, K, N, cfg), float(S), float(total),
                           {k: float(v) for k, v in dram.items()}, refills, float(bw), float(incl))
