"""The data dispatcher's effect on the array: streamed cycles per fold (SPEC §5).

Input: the rows of one GEMM instance and their per-group modes, either exactly (the
rows of a :class:`~kaleido.reuse.ModeMap`, in sequence order) or as statistics (a
:class:`RowStats`: the row-pattern histogram of a ``ModeStats``, or only its
per-group marginals).  Output: the streamed cycles of every fold, which
:func:`kaleido.hw.arch.compute.folded_cycles` turns into time.

Resource model (derived in ``docs/hardware.md``).  Each (row, group) item uses the
group's channels ("lanes") with a *capacity* of 2 per lane: COMPUTE uses 2 (one 8x8
multiply per channel), PARTIAL uses 1 when the packed mode is available
(``2*low_bits <= 8``: two PARTIAL differences share one 8-bit lane and one split
multiplier) and 2 otherwise, FULL uses 0 (the reference's partial is forwarded).

* **WS** (K on the array rows, tokens stream): a token occupies one cycle of every
  K-fold in which it uses any lane.  *No dispatcher*: one token per cycle (tokens that
  use nothing are dropped - that needs only their mode bits).  *Scheduler*: clustering
  alone cannot shorten a WS stream (lanes are spatial), so it equals the previous
  level; it is what lets the matcher find partners inside its window.  *Scheduler +
  matcher*: two tokens share a cycle when, in every group of the K-fold, their usages
  add up to at most 2 (complementary groups, or two PARTIALs packed); pairs are found
  greedily on pattern classes inside each dispatch window.
* **OS** (tokens on the array rows, channels stream): the R rows of a fold stream
  the same channels in lock-step, so a fold streams every group that *any* of its
  rows uses.  *No dispatcher*: folds are R consecutive rows in sequence order (exact
  with a mode map; with statistics only, rows are taken as independent draws - a
  pessimistic assumption).  *Scheduler*: rows sorted by mode string inside each
  window, so most folds hold one pattern, and rows FULL in every group are left out
  (they need no PE row).  The arrival order is kept for a window where sorting would
  not help - both costs follow from the mode bits; the same guard holds when the rows
  are known only as statistics.  *Matcher*: two rows of a pattern whose
  used groups are all PARTIAL share one PE row (packed), halving that cluster's
  folds; it is bypassed where it would not help.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kaleido.reuse import Mode, ModeStats

from .compute import fold_cycles
from .kaleido_pe import PEMode, mode_cycle_cost
from .mapping import ceil_div, k_fold_pieces

LEVELS = ("none", "scheduler", "scheduler+matcher")


@dataclass
class RowStats:
    """Row modes of one GEMM instance (``n_rows`` rows, groups of ``group_sizes`` channels).

    Exactly one source is used, the first present of:
    ``rows`` (``(n_inst, n_rows, G)`` uint8 modes in sequence order - exact),
    ``classes``/``class_counts`` (the joint pattern histogram, counts per instance),
    ``marginals`` (``(G, 3)`` rows per mode per group, per instance; groups independent).
    """

    group_sizes: tuple[int, ...]
    n_rows: int
    marginals: np.ndarray
    classes: np.ndarray | None = None
    class_counts: np.ndarray | None = None
    rows: np.ndarray | None = None
    source: str = field(default="")
    #: per group, measured fraction of R-row folds of consecutive rows that are all FULL
    #: (OS "no dispatcher" from statistics; ``None``: rows taken as independent)
    fold_full: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.marginals = np.asarray(self.marginals, dtype=np.float64)
        G = len(self.group_sizes)
        if self.marginals.shape != (G, 3):
            raise ValueError(f"RowStats.marginals must be ({G}, 3), got {self.marginals.shape}")
        if not self.source:
            self.source = "exact" if self.rows is not None else ("histogram" if self.classes is not None else "marginals")

    @property
    def K(self) -> int:
        return sum(self.group_sizes)

    # -- constructors ------------------------------------------------------------------
    @classmethod
    def dense(cls, K: int, n_rows: int) -> "RowStats":
        """Every row COMPUTE in one group of ``K`` channels: an op configured dense (no decision runs)."""
        return cls((K,), n_rows, np.array([[n_rows, 0, 0]]), np.zeros((1, 1), np.uint8), np.array([float(n_rows)]),
                   source="dense")

    @classmethod
    def from_rows(cls, modes: np.ndarray, group_sizes: tuple[int, ...]) -> "RowStats":
        """Exact rows: ``modes`` ``(..., n_rows, G)`` uint8 in sequence order."""
        m = np.asarray(modes, dtype=np.uint8)
        m = m.reshape(-1, m.shape[-2], m.shape[-1])
        G = m.shape[-1]
        marg = np.stack([(m == k).sum(axis=(0, 1)) for k in range(3)], axis=1) / m.shape[0]
        return cls(tuple(int(s) for s in group_sizes), m.shape[1], marg, rows=m)

    @classmethod
    def from_mode_stats(cls, stats: ModeStats, grid_rows: int, nongrid_rows: int = 0,
                        fold_full: np.ndarray | None = None) -> "RowStats":
        """Carry measured statistics to an instance of ``grid_rows`` video + ``nongrid_rows`` text rows.

        The fractions of ``stats`` (which must count grid rows only, see
        :mod:`kaleido.hw.inputs.profile`) are applied to ``grid_rows``; non-grid rows compute.
        """
        n = grid_rows + nongrid_rows
        G = len(stats.group_sizes)
        frac = stats.mode_counts / max(1, stats.n_rows)
        marg = frac * grid_rows
        marg[:, Mode.COMPUTE] += nongrid_rows
        classes = counts = None
        if stats.pattern_counts is not None:
            nz = np.nonzero(stats.pattern_counts)[0]
            classes = decode_patterns(nz, G)
            counts = stats.pattern_counts[nz] / max(1, stats.n_rows) * grid_rows
            if nongrid_rows:
                z = np.where((classes == 0).all(1))[0]
                if len(z):
                    counts[z[0]] += nongrid_rows
                else:
                    classes = np.vstack([classes, np.zeros((1, G), np.uint8)])
                    counts = np.append(counts, float(nongrid_rows))
        ff = None
        if fold_full is not None:
            ff = np.asarray(fold_full, dtype=np.float64)
            if ff.shape != (G,):
                raise ValueError(f"fold_full must have one fraction per group ({G}), got shape {ff.shape}")
            ff = ff * grid_rows / max(1, n)  # folds that hold text rows always compute
        return cls(tuple(stats.group_sizes), n, marg, classes, counts, fold_full=ff)


def decode_patterns(codes: np.ndarray, G: int) -> np.ndarray:
    """Codes ``sum_g mode[g]*3**g`` -> ``(len(codes), G)`` uint8 modes."""
    codes = np.asarray(codes, dtype=np.int64)
    out = np.empty((len(codes), G), np.uint8)
    for g in range(G):
        out[:, g] = (codes // 3**g) % 3
    return out


def apportion(weights: np.ndarray, total: int) -> np.ndarray:
    """Integers proportional to ``weights`` summing to ``total`` (largest remainder)."""
    w = np.asarray(weights, dtype=np.float64)
    if total <= 0 or w.sum() <= 0:
        return np.zeros(len(w), np.int64)
    exact = w / w.sum() * total
    base = np.floor(exact).astype(np.int64)
    short = int(total - base.sum())
    if short > 0:
        base[np.argsort(-(exact - base), kind="stable")[:short]] += 1
    return base


def lanes(mode: Mode, packed: bool) -> int:
    """Half-slots a row in ``mode`` takes in one PE slot: twice :func:`~kaleido.hw.arch.kaleido_pe.mode_cycle_cost`
    (COMPUTE 2, PARTIAL 1 where two differences pack into one byte lane, else 2, FULL 0)."""
    return int(round(2 * mode_cycle_cost(PEMode(int(mode)), packed)))


def usage(modes: np.ndarray, packed: bool) -> np.ndarray:
    """Lane capacity used per (row, group): :func:`lanes` of each entry's mode."""
    m = np.asarray(modes)
    table = np.array([lanes(Mode(v), packed) for v in range(len(Mode))], dtype=np.int64)
    return table[m.astype(np.int64)]


def greedy_pairs(use: np.ndarray, counts: np.ndarray, complementary: bool = True) -> int:
    """Rows paired by the matcher (see :func:`greedy_pairing`)."""
    return greedy_pairing(use, counts, complementary)[0]


def greedy_pairing(use: np.ndarray, counts: np.ndarray, complementary: bool = True) -> tuple[int, int]:
    """``(pairs, split pairs)`` the matcher forms from classes ``use`` ``(P, g)`` with integer ``counts``.

    Two rows may share a slot when their usages add up to at most 2 in every group.
    Greedy: the heaviest class first, each time with the heaviest compatible partner.
    A *split* pair is one whose two rows use different sets of groups (complementary
    groups, e.g. ``(C,F,F)`` with ``(F,C,F)``): the column's partial-sum chain has to be
    cut at the group boundaries so that each row's partial leaves separately.  With
    ``complementary=False`` only rows using the same groups pair (two PARTIALs packed in
    the same lanes), so no chain is ever split.
    """
    counts = np.asarray(counts, dtype=np.int64).copy()
    if len(counts) == 0:
        return 0, 0
    compat = (use[:, None, :] + use[None, :, :] <= 2).all(-1)
    used = use > 0
    if not complementary:
        compat &= (used[:, None, :] == used[None, :, :]).all(-1)
    order = np.argsort(-use.sum(1), kind="stable")
    pairs = split = 0
    for i in order:
        if counts[i] <= 0 or not compat[i].any():
            continue
        for j in order:
            if counts[i] <= 0:
                break
            if not compat[i, j] or counts[j] <= 0:
                continue
            k = counts[i] // 2 if i == j else min(counts[i], counts[j])
            pairs += int(k)
            split += 0 if i == j or (used[i] == used[j]).all() else int(k)
            counts[i] -= k
            counts[j] -= k
    return pairs, split


def _merge(classes: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge identical rows of ``classes``, adding their counts."""
    if len(classes) == 0:
        return classes, counts
    uniq, inv = np.unique(classes, axis=0, return_inverse=True)
    return uniq, np.bincount(inv.reshape(-1), weights=counts, minlength=len(uniq))


@dataclass
class DispatchResult:
    """Streamed cycles per fold of one GEMM instance, per dispatcher level.

    ``stream[level]``: per-fold streamed cycles (WS: one entry per K-fold; OS: one per
    row fold); entry ``i`` runs ``fold_mult[level][i] * col_folds`` times.  ``work_pe_cycles``: useful
    PE-cycles per instance (COMPUTE channel x column = 1, PARTIAL = 0.5 when packed).
    ``split_pairs``: WS matcher pairs of one pass of the stream (summed over K-folds;
    every output column sees them) whose two rows use different groups, so the
    column's partial-sum chain is split.
    """

    stream: dict[str, np.ndarray]
    fold_mult: dict[str, np.ndarray]
    col_folds: int
    work_pe_cycles: float
    windows: int
    window_rows: int
    model: str
    split_pairs: float = 0.0

    def to_dict(self) -> dict:
        return {
            "stream_cycles": {k: float((v * self.fold_mult[k]).sum()) for k, v in self.stream.items()},
            "col_folds": self.col_folds, "work_pe_cycles": self.work_pe_cycles,
            "windows": self.windows, "window_rows": self.window_rows, "model": self.model,
            "split_pairs": self.split_pairs,
        }


def _windows(rs: RowStats, W: int):
    """Yield ``(classes, counts (int), ordered_rows or None, multiplicity)`` per window."""
    M = rs.n_rows
    if rs.rows is not None:
        n_inst = rs.rows.shape[0]
        for inst in range(n_inst):
            for s in range(0, M, W):
                block = rs.rows[inst, s:s + W]
                cl, inv = np.unique(block, axis=0, return_inverse=True)
                yield cl, np.bincount(inv.reshape(-1), minlength=len(cl)), block, 1.0 / n_inst
        return
    full, rem = divmod(M, W)
    for size, mult in ((W, full), (rem, 1)):
        if size == 0 or mult == 0:
            continue
        if rs.classes is not None:
            yield rs.classes, apportion(rs.class_counts, size), None, float(mult)
        else:
            yield None, size, None, float(mult)


def _ws_window(classes, counts, pieces, n_kf, packed, marg_frac, complementary=True):
    pg, pf, _ = pieces
    none = np.zeros(n_kf)
    matched = np.zeros(n_kf)
    split = 0.0
    seen: dict[bytes, tuple[float, float, float]] = {}  # marginals-only folds are a function of their groups' marginals
    for kf in range(n_kf):
        gs = pg[pf == kf]  # k_fold_pieces gives each (group, fold) once, groups in order: already unique, sorted
        if classes is None and len(gs) > 8:  # too many independent groups to enumerate: no pairing
            used = counts * (1.0 - np.prod(marg_frac[gs, Mode.FULL]))
            none[kf] = matched[kf] = used
            continue
        key = marg_frac[gs].tobytes() if classes is None else None
        if key is not None and key in seen:  # e.g. a linear layer's 128-channel chunks, one per K-fold
            none[kf], matched[kf], sp = seen[key]
            split += sp
            continue
        if classes is None:  # marginals only: enumerate the fold's groups as independent
            size = counts
            cl = np.array(np.meshgrid(*[np.arange(3)] * len(gs), indexing="ij")).reshape(len(gs), -1).T.astype(np.uint8)
            p = np.ones(len(cl))
            for j, g in enumerate(gs):
                p = p * marg_frac[g, cl[:, j]]
            cnt = apportion(p, size)
        else:
            cl, cnt = _merge(classes[:, gs], counts.astype(np.float64))
            cnt = cnt.astype(np.int64)
        use = usage(cl, packed)
        used = use.sum(1) > 0
        n_used = int(cnt[used].sum())
        none[kf] = n_used
        pairs, sp = greedy_pairing(use[used], cnt[used], complementary)
        matched[kf] = n_used - pairs
        split += sp
        if key is not None:
            seen[key] = (none[kf], matched[kf], sp)
    return none, matched, split


def _os_fold_streams(cls_use: np.ndarray, counts: np.ndarray, sizes: np.ndarray, R: int, cost: np.ndarray) -> np.ndarray:
    """Stream cycles of the folds of a sequence holding classes in the given order.

    ``cls_use``: ``(P, G)`` bool (class uses group); ``counts`` ``(P,)`` row slots;
    ``cost[g]``: cycles group ``g`` streams when any row of a fold uses it.
    """
    n = int(counts.sum())
    if n == 0:
        return np.zeros(0)
    nf = int(ceil_div(n, R))
    end = np.cumsum(counts)
    start = end - counts
    f0 = np.arange(nf)[:, None] * R
    overlap = (start[None, :] < f0 + R) & (end[None, :] > f0) & (counts[None, :] > 0)
    union = (overlap.astype(np.int64) @ cls_use.astype(np.int64)) > 0
    return union.astype(np.float64) @ cost


def _os_window(classes, counts, block, sizes, R, packed, marg_frac, size, fold_full, cost_of):
    """Streamed cycles per fold of one OS window at each level.

    ``cost_of(stream) -> cycles``: what a window's folds cost the array (fold fill/drain
    included, :func:`kaleido.hw.arch.compute.fold_cycles`).  The dispatcher keeps the cheaper of
    the arrival order and the scheduler's sorted order by that cost (on a tie, the one
    streaming fewer channels), and the matcher's packing only where it is cheaper still,
    so no level is slower than the level below.
    """
    worse = lambda a, b: (cost_of(a), float(np.sum(a))) > (cost_of(b), float(np.sum(b)))  # a costs more than b
    sizes = np.asarray(sizes, dtype=np.float64)
    cost = sizes  # a used group streams all its channels (packing pairs rows, not channels)
    # no dispatcher: consecutive rows
    if block is not None:
        n = block.shape[0]
        nf = int(ceil_div(n, R))
        pad = np.full((nf * R - n, block.shape[1]), Mode.FULL, np.uint8)
        b = np.vstack([block, pad]).reshape(nf, R, -1)
        none = ((b != Mode.FULL).any(1)).astype(np.float64) @ cost
    else:
        nf_full, r = divmod(size, R)
        p_full = marg_frac[:, Mode.FULL]
        e = lambda n: ((1.0 - p_full ** n) * cost).sum()  # independent rows
        full_fold = ((1.0 - fold_full) * cost).sum() if fold_full is not None else e(R)  # measured
        none = np.array([full_fold] * nf_full + ([e(r)] if r else []))
    if classes is None:  # marginals only: the scheduler/matcher are not modelled
        return none, none, none
    use = classes != Mode.FULL
    key = use.astype(np.int64) @ (2 ** np.arange(use.shape[1])) * 3 ** use.shape[1] + (
        classes.astype(np.int64) @ (3 ** np.arange(use.shape[1])))
    order = np.argsort(key, kind="stable")
    cu, cn = use[order], counts[order].astype(np.int64)
    cn = np.where(cu.any(1), cn, 0)  # rows FULL in every group need no PE row: the scheduler leaves them out
    sched = _os_fold_streams(cu, cn, sizes, R, cost)
    if worse(sched, none):  # keep the arrival order where sorting does not help (exact rows or statistics)
        sched = none
    if packed:
        pairable = (classes[order] != Mode.COMPUTE).all(1) & cu.any(1)
        slots = np.where(pairable, -(-cn // 2), cn)
        matched = _os_fold_streams(cu, slots, sizes, R, cost)
        if worse(matched, sched):
            matched = sched
    else:
        matched = sched
    return none, sched, matched


def dispatch(rs: RowStats, N: int, dataflow: str, R: int, C: int, packed: bool, window_rows: int,
             complementary: bool = True, timing: str = "default") -> DispatchResult:
    """Streamed cycles per fold for each dispatcher level (see the module docstring).

    ``complementary``: whether the WS matcher may pair rows that use different groups
    (splitting the column's partial-sum chain at group boundaries); ``False`` pairs only
    PARTIAL rows packed in the same lanes.  ``timing``: the array's timing mode
    (``ArrayConfig.timing``), by whose fold costs the OS dispatcher compares its orders.
    """
    M, sizes = rs.n_rows, np.asarray(rs.group_sizes)
    W = max(R, int(window_rows))
    W = min(W, M) if M > 0 else W
    col_folds = int(ceil_div(N, C))
    marg_frac = rs.marginals / max(1, rs.n_rows)
    w_partial = mode_cycle_cost(PEMode.PARTIAL, packed)
    work = float((rs.marginals[:, Mode.COMPUTE] * sizes).sum() + w_partial * (rs.marginals[:, Mode.PARTIAL] * sizes).sum()) * N
    n_win = 0
    if dataflow == "ws":
        pieces = k_fold_pieces(tuple(int(s) for s in sizes), R)
        n_kf = int(pieces[1].max()) + 1
        tot_none, tot_match = np.zeros(n_kf), np.zeros(n_kf)
        split = 0.0
        for classes, counts, _block, mult in _windows(rs, W):
            a, b, sp = _ws_window(classes, counts, pieces, n_kf, packed, marg_frac, complementary)
            tot_none += mult * a
            tot_match += mult * b
            split += mult * sp
            n_win += 1
        stream = {"none": tot_none, "scheduler": tot_none.copy(), "scheduler+matcher": tot_match}
        fold_mult = {k: np.ones(n_kf) for k in LEVELS}
    elif dataflow == "os":
        vals = {k: [] for k in LEVELS}
        mults = {k: [] for k in LEVELS}
        cost_of = lambda t: float(fold_cycles(t, R, C, "os", timing).sum())
        for classes, counts, block, mult in _windows(rs, W):
            size = int(counts.sum()) if classes is not None else int(counts)
            res = _os_window(classes, counts, block, sizes, R, packed, marg_frac, size, rs.fold_full, cost_of)
            for k, v in zip(LEVELS, res):
                vals[k].append(np.asarray(v, dtype=np.float64))
                mults[k].append(np.full(len(v), mult))
            n_win += 1
        stream = {k: np.concatenate(vals[k]) if vals[k] else np.zeros(0) for k in LEVELS}
        fold_mult = {k: np.concatenate(mults[k]) if mults[k] else np.zeros(0) for k in LEVELS}
        split = 0.0  # OS packs rows of one pattern only: no chain is split
    else:
        raise ValueError(f"dataflow {dataflow!r}: Kaleido's dispatcher is modelled for 'os' and 'ws' only; "
                         "simulate reuse with one of those (a dense run takes any dataflow)")
    return DispatchResult(stream, fold_mult, col_folds, work, n_win, W, rs.source, split)
