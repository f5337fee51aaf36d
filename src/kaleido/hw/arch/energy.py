"""Energy per action, kept apart from the action counts (Accelergy's split).

Every entry carries its public source, the node it was reported at, and the rule
that scales it to the target node (16 nm by default).  The simulator produces
:class:`ActionCounts`; :meth:`EnergyTable.energy_pj` prices them.

Node scaling (Stillmaker & Baas, "Scaling equations for the accurate prediction of
CMOS device performance from 180 nm to 7 nm", Integration 2017): energy from 45 nm
to 16 nm x0.14-0.19 (we use the midpoint 0.165), from 22 nm to 16 nm x0.59.
Off-chip DRAM energy per bit is an interface figure and is not node-scaled.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

import numpy as np

SCALE_45_TO_16 = (0.14 + 0.19) / 2
SCALE_22_TO_16 = 0.59
_SCALE_RULE_45 = "x0.165 (45->16 nm, midpoint of Stillmaker & Baas 2017's 0.14-0.19)"
_SCALE_RULE_22 = "x0.59 (22->16 nm, Stillmaker & Baas 2017)"


@dataclass(frozen=True)
class EnergyEntry:
    """One per-action energy: ``value_pj`` at the target node, from ``raw_pj`` at ``node_nm``."""

    name: str
    value_pj: float
    unit: str
    raw_pj: float
    node_nm: int
    source: str
    scaling: str

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class ActionCounts:
    """How often each action happened (additive).  Bytes are 8-bit bytes.

    ``mac8``/``mac_low``: 8x8 and ``low_bits``x8 multiply-accumulates;
    ``pe_reg_bytes``: operand/accumulator register traffic inside the PEs;
    ``reuse_reg_bytes``: reads/writes of reference partial results (4-byte int32) still
    held in a PE register (the reference was produced one stream row earlier);
    ``anchor_sram_bytes``: store size in KiB (a string key) -> reads/writes of reference
    partials that come back from an on-chip anchor store of that size
    (:class:`kaleido.hw.arch.kaleido_pe.AnchorPlan`);
    ``reuse_adds``: int32 additions onto a reference partial;
    ``sram_bytes``: buffer name -> bytes read+written; ``dram_bytes``;
    ``dispatch_ops``: int8 add/compare operations of the decision and dispatcher;
    ``split_psums``: extra int32 partial sums leaving a WS column at a group boundary
    because the matcher put two tokens with different used groups in one cycle (each an
    int32 add to recombine plus a 4-byte write and read);
    ``reduction_psums``: int32 partial outputs of a GEMM split by K across the arrays of a
    chip (:mod:`kaleido.hw.arch.chip`), each written to and read back from the receiving array's
    output buffer (4 + 4 bytes) and added (one int32 add);
    ``cycles``: for static energy.
    """

    low_bits: int = 4
    mac8: float = 0.0
    mac_low: float = 0.0
    pe_reg_bytes: float = 0.0
    reuse_reg_bytes: float = 0.0
    anchor_sram_bytes: dict = field(default_factory=dict)
    reuse_adds: float = 0.0
    sram_bytes: dict = field(default_factory=dict)
    dram_bytes: float = 0.0
    dispatch_ops: float = 0.0
    split_psums: float = 0.0
    reduction_psums: float = 0.0
    cycles: float = 0.0

    def scaled(self, k: float) -> "ActionCounts":
        out = ActionCounts(self.low_bits)
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "low_bits":
                continue
            setattr(out, f.name, {b: x * k for b, x in v.items()} if isinstance(v, dict) else v * k)
        return out

    def __add__(self, other: "ActionCounts") -> "ActionCounts":
        out = ActionCounts(self.low_bits)
        for f in fields(self):
            if f.name == "low_bits":
                continue
            a, b = getattr(self, f.name), getattr(other, f.name)
            if isinstance(a, dict):
                keys = list(a) + [k for k in b if k not in a]  # insertion order: sums must not follow string hashing
                setattr(out, f.name, {k: a.get(k, 0.0) + b.get(k, 0.0) for k in keys})
            else:
                setattr(out, f.name, a + b)
        if self.low_bits != other.low_bits and (self.mac_low and other.mac_low):
            raise ValueError("cannot add ActionCounts with different low_bits")
        out.low_bits = self.low_bits if self.mac_low else other.low_bits
        return out

    def to_dict(self) -> dict:
        return asdict(self)


def _e(name, raw, node, unit, source):
    scale = SCALE_45_TO_16 if node == 45 else SCALE_22_TO_16 if node == 22 else 1.0
    rule = _SCALE_RULE_45 if node == 45 else _SCALE_RULE_22 if node == 22 else "not scaled (off-chip interface)"
    return EnergyEntry(name, raw * scale, unit, raw, node, source, rule)


HOROWITZ = "Horowitz, 'Computing's energy problem', ISSCC 2014, 45 nm 0.9 V"
ACCELERGY = "Accelergy/Timeloop example energy tables (timeloop-accelergy-exercises), 45 nm"
CACTI = "CACTI 7, 22 nm, per-byte read energy, midpoint of the reported range"


def default_entries() -> dict[str, EnergyEntry]:
    """The 16 nm table used by default (see the module docstring)."""
    e = [
        _e("mult8x8", 0.2, 45, "pJ per 8x8-bit multiply", HOROWITZ + ": int8 mult 0.2 pJ"),
        _e("add32", 0.1, 45, "pJ per 32-bit add (accumulate)", HOROWITZ + ": int32 add 0.1 pJ"),
        _e("add8", 0.03, 45, "pJ per 8-bit add/compare", HOROWITZ + ": int8 add 0.03 pJ"),
        _e("reg_byte", 0.144 / 2, 45, "pJ per register byte accessed", ACCELERGY + ": 16-bit register read 0.144 pJ"),
        _e("sram_64k_byte", (0.19 + 0.46) / 2, 22, "pJ per byte, 64 KB SRAM", CACTI + " (0.19-0.46)"),
        _e("sram_256k_byte", (0.48 + 1.04) / 2, 22, "pJ per byte, 256 KB SRAM", CACTI + " (0.48-1.04)"),
        _e("sram_1m_byte", (1.06 + 1.97) / 2, 22, "pJ per byte, 1 MB SRAM", CACTI + " (1.06-1.97)"),
        _e("dram_bit", 3.9, 0, "pJ per bit, HBM2", "accelergy-cacti-plug-in DRAM table: HBM2 3.9 pJ/bit"),
    ]
    return {x.name: x for x in e}


@dataclass
class EnergyTable:
    """Per-action energies (pJ) at ``node_nm`` plus static power.

    ``static_w``: leakage/static power of the accelerator in watts.  We found no
    public 16 nm figure for a comparable array to cite, so it defaults to 0 and the
    static term is reported separately; pass a value to study it.
    """

    entries: dict[str, EnergyEntry] = field(default_factory=default_entries)
    node_nm: int = 16
    static_w: float = 0.0

    def __post_init__(self) -> None:
        if self.static_w < 0:
            raise ValueError(f"static_w={self.static_w} must be >= 0 W")

    def pj(self, name: str) -> float:
        try:
            return self.entries[name].value_pj
        except KeyError:
            raise ValueError(f"energy table has no entry {name!r}; entries: {sorted(self.entries)}") from None

    def mac_pj(self, bits_a: int, bits_b: int = 8) -> float:
        """One ``bits_a x bits_b`` multiply plus a 32-bit accumulate; multiplier energy ~ width product."""
        return self.pj("mult8x8") * (bits_a * bits_b) / 64.0 + self.pj("add32")

    def sram_pj_per_byte(self, kib: float) -> float:
        """Log-log interpolation between the 64 KB, 256 KB and 1 MB points (clamped at the ends)."""
        xs = np.log([64.0, 256.0, 1024.0])
        ys = np.log([self.pj("sram_64k_byte"), self.pj("sram_256k_byte"), self.pj("sram_1m_byte")])
        return float(np.exp(np.interp(np.log(max(kib, 1e-3)), xs, ys)))

    def full_break_even_channels(self, store_kib: float) -> float:
        """Group width (channels) above which one FULL item saves energy over computing it.

        A FULL (row, group, column) item moves ``8`` bytes of reference partials (read the
        anchor's int32, write this row's) through a store of ``store_kib`` KiB (0: the PE
        register); computing it costs one 8x8 MAC and 6 register bytes per channel.
        """
        per_byte = self.pj("reg_byte") if store_kib <= 0 else self.sram_pj_per_byte(store_kib)
        return 8.0 * per_byte / (self.mac_pj(8) + 6.0 * self.pj("reg_byte"))

    def energy_pj(self, c: ActionCounts, buffer_kib: dict[str, float], clock_ghz: float) -> dict[str, float]:
        """Energy by component (pJ) of the counted actions."""
        sram = sum(b * self.sram_pj_per_byte(buffer_kib[name]) for name, b in c.sram_bytes.items())
        anchors = sum(b * self.sram_pj_per_byte(float(kib)) for kib, b in c.anchor_sram_bytes.items())
        return {
            "mac": c.mac8 * self.mac_pj(8) + c.mac_low * self.mac_pj(c.low_bits),
            "pe_registers": c.pe_reg_bytes * self.pj("reg_byte"),
            "reuse": c.reuse_reg_bytes * self.pj("reg_byte") + c.reuse_adds * self.pj("add32"),
            "anchor_sram": anchors,
            "split_chains": c.split_psums * (self.pj("add32") + 8 * self.pj("reg_byte")),
            "chip_reduction": c.reduction_psums * (self.pj("add32") + 8 * self.sram_pj_per_byte(buffer_kib["ofmap"])),
            "sram": sram,
            "dram": c.dram_bytes * 8 * self.pj("dram_bit"),
            "dispatcher": c.dispatch_ops * self.pj("add8"),
            "static": self.static_w * c.cycles / (clock_ghz * 1e9) * 1e12,
        }

    def price(self, actions, buffer_kib: dict[str, float], clock_ghz: float, static_s: float) -> dict[str, float]:
        """Energy by component (pJ) of one design's counted actions, as every design on the array is priced.

        ``actions``: one :class:`ActionCounts` per PARTIAL multiplier width (an ``ActionCounts`` holds one),
        each priced by :meth:`energy_pj` and summed; ``static``: ``static_w`` over ``static_s`` seconds of
        array-time (run time x arrays: a chip leaks in every array), replacing the per-count cycles.
        """
        out: dict[str, float] = {}
        for a in (list(actions) or [ActionCounts()]):
            for k, v in self.energy_pj(a, buffer_kib, clock_ghz).items():
                out[k] = out.get(k, 0.0) + v
        out["static"] = self.static_w * static_s * 1e12
        return out

    def to_dict(self) -> dict:
        return {"node_nm": self.node_nm, "static_w": self.static_w,
                "entries": {k: v.to_dict() for k, v in self.entries.items()}}
