"""``KaleidoConfig``: what Kaleido reuses inside a diffusers vDiT, and how much.

One dataclass, round-tripping through JSON and YAML, validated on construction
(every error names the key, the bad value, the allowed range and the fix).

Layout (YAML)::

    version: 1
    reuse:                 # base ReuseConfig for every op (kaleido.reuse.ReuseConfig keys)
      theta1: 16           # FULL reuse below this many int8 units (L-inf by default)
      theta2: 32           # PARTIAL reuse below this (<= 2**(low_bits-1) with linf)
      low_bits: 6
      metric: linf
      granularity: group
      dense_steps: 1       # the first denoising steps run dense (warm-up)
      schedule: []         # [[start_fraction, theta1, theta2], ...] step-dependent thresholds
    ops:                   # one switch per op kind; any reuse key overrides the base here
      self_qk:  {enabled: true, groups: rope, theta1: 40, theta2: 64, low_bits: 7}   # RoPE groups t|h|w
      cross_qk: {enabled: true, chunk_size: 16, axes: t}
      proj:     {enabled: true, chunk_size: 32, axes: t}         # q/k/v/out projections
      ffn:      {enabled: true, chunk_size: 32, axes: t}         # feed-forward (activations)
      pv:       {enabled: false, chunk_size: 16, axes: w}        # P.V (groups over keys)
    layers:                # per-layer overrides, applied in order (later wins)
      "0-1": {self_qk: {enabled: false}}
    trace:
      record_maps: false   # keep every full ModeMap in the trace (large)

Op switches and the GEMMs they cover (the trace's op names):

* ``self_qk``: self-attention ``q.k^T`` (``self_qk``); groups are the model's RoPE
  axis blocks (``groups: rope``) or channel chunks (``groups: chunk``, the only
  choice for a model without RoPE such as CogVideoX-2B).
* ``cross_qk``: cross-attention ``q.k^T`` (``cross_qk``), chunk groups of ``q``.
* ``proj``: ``proj_q``, ``proj_k``, ``proj_v``, ``proj_out`` on video tokens, and the
  cross-attention's ``cross_proj_q`` / ``cross_proj_out`` (its key/value projections
  read text tokens and stay dense).
* ``ffn``: ``ffn_in``, ``ffn_out`` and HunyuanVideo's single-stream ``fused_out``.
* ``pv``: ``self_pv``, ``cross_pv`` (``A = P``, groups are chunks of keys).

``axes`` is one axis (``t``, ``h``, ``w``) for every group, or one per group (per
chunk, or ``[t_axis, h_axis, w_axis]`` for RoPE groups).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping

from kaleido.ops import SWITCH_OF, SWITCHES
from kaleido.reuse.config import ReuseConfig
from kaleido.reuse.grid import Axis

CONFIG_VERSION = 1

#: Op switches of a KaleidoConfig (keys of ``ops``): :data:`kaleido.ops.SWITCHES`.
OP_SWITCHES = SWITCHES
#: Op names recorded in traces -> the switch that controls them: :data:`kaleido.ops.SWITCH_OF`.
OP_SWITCH_OF = SWITCH_OF
_REUSE_KEYS = tuple(f.name for f in fields(ReuseConfig))
_OP_KEYS = ("enabled", "groups", "chunk_size", "axes") + _REUSE_KEYS
_GROUP_KINDS = ("rope", "chunk")


def _where(path: str) -> str:
    return f"KaleidoConfig {path}" if path else "KaleidoConfig"


def _check_keys(d: Any, allowed: tuple[str, ...], path: str) -> dict:
    if not isinstance(d, Mapping):
        raise ValueError(f"{_where(path)} must be a mapping, got {type(d).__name__} {d!r}")
    unknown = [k for k in d if k not in allowed]
    if unknown:
        raise ValueError(
            f"{_where(path)} has unknown key(s) {unknown}; allowed keys: {list(allowed)}"
        )
    return dict(d)


def _parse_axes(value: Any, path: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    items = [value] if isinstance(value, (str, Axis)) else value
    if not isinstance(items, (list, tuple)) or not items:
        raise ValueError(f"{_where(path)}={value!r}: give one axis ('t', 'h', 'w') or a non-empty list of them")
    out = []
    for a in items:
        try:
            out.append(Axis.parse(a).value)
        except ValueError:
            raise ValueError(f"{_where(path)}: unknown reuse axis {a!r}; use 't', 'h' or 'w'") from None
    return tuple(out)


@dataclass(frozen=True)
class OpConfig:
    """Switch and settings of one op kind (see the module docstring).

    ``reuse`` holds ReuseConfig keys that override the base ``KaleidoConfig.reuse``
    for this op (e.g. ``{"theta1": 1}``); it is validated against the base.
    """

    enabled: bool = True
    groups: str = "rope"
    chunk_size: int = 32
    axes: tuple[str, ...] | None = None
    reuse: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.enabled, bool):
            raise ValueError(f"OpConfig.enabled must be true or false, got {self.enabled!r}")
        if self.groups not in _GROUP_KINDS:
            raise ValueError(f"OpConfig.groups={self.groups!r}: use one of {_GROUP_KINDS}")
        cs = self.chunk_size
        if isinstance(cs, bool) or not isinstance(cs, int) or cs < 1:
            raise ValueError(f"OpConfig.chunk_size={cs!r}: must be an int >= 1 (channels per chunk group)")
        object.__setattr__(self, "axes", _parse_axes(self.axes, "axes"))
        bad = [k for k in self.reuse if k not in _REUSE_KEYS]
        if bad:
            raise ValueError(f"OpConfig.reuse has unknown key(s) {bad}; allowed: {list(_REUSE_KEYS)}")
        object.__setattr__(self, "reuse", dict(self.reuse))

    def to_dict(self) -> dict:
        d: dict[str, Any] = {"enabled": self.enabled, "groups": self.groups, "chunk_size": self.chunk_size}
        d["axes"] = None if self.axes is None else list(self.axes)
        for k, v in self.reuse.items():
            d[k] = [list(e) for e in v] if k == "schedule" else v
        return d

    def merged(self, patch: Mapping[str, Any], path: str) -> "OpConfig":
        """This op config with the keys of ``patch`` (same format as :meth:`to_dict`) replaced."""
        patch = _check_keys(patch, _OP_KEYS, path)
        kw: dict[str, Any] = {}
        reuse = dict(self.reuse)
        for k, v in patch.items():
            if k in _REUSE_KEYS:
                reuse[k] = v
            elif k == "axes":
                kw["axes"] = _parse_axes(v, f"{path}.axes")
            else:
                kw[k] = v
        try:
            return replace(self, reuse=reuse, **kw)
        except ValueError as e:
            raise ValueError(f"{_where(path)}: {e}") from None


#: default self-attention q.k^T thresholds: FULL below 40 int8 units (L-inf), PARTIAL below 64
#: with 7-bit differences - chosen on the miniature pipeline (docs/results/README.md)
DEFAULT_SELF_QK_REUSE = {"theta1": 40.0, "theta2": 64.0, "low_bits": 7}


def _default_ops() -> dict[str, OpConfig]:
    return {
        "self_qk": OpConfig(enabled=True, groups="rope", chunk_size=16, reuse=dict(DEFAULT_SELF_QK_REUSE)),
        "cross_qk": OpConfig(enabled=True, groups="chunk", chunk_size=16, axes=("t",)),
        "proj": OpConfig(enabled=True, groups="chunk", chunk_size=32, axes=("t",)),
        "ffn": OpConfig(enabled=True, groups="chunk", chunk_size=32, axes=("t",)),
        "pv": OpConfig(enabled=False, groups="chunk", chunk_size=16, axes=("w",)),
    }


_LAYER_KEY = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


def parse_layer_key(key: Any) -> tuple[int, int]:
    """``"3"`` / ``3`` -> (3, 3); ``"0-5"`` -> (0, 5); ``"*"`` -> (0, huge). Inclusive."""
    if isinstance(key, bool):
        raise ValueError(f"KaleidoConfig layers key {key!r}: use a layer index, 'i-j' or '*'")
    if isinstance(key, int):
        if key < 0:
            raise ValueError(f"KaleidoConfig layers key {key}: layer indices are >= 0")
        return key, key
    s = str(key)
    if s.strip() == "*":
        return 0, 2**31 - 1
    m = _LAYER_KEY.match(s)
    if not m:
        raise ValueError(f"KaleidoConfig layers key {key!r}: use a layer index ('3'), a range ('0-5') or '*'")
    lo = int(m.group(1))
    hi = int(m.group(2)) if m.group(2) is not None else lo
    if hi < lo:
        raise ValueError(f"KaleidoConfig layers key {key!r}: range end {hi} < start {lo}")
    return lo, hi


@dataclass(frozen=True)
class KaleidoConfig:
    """Everything :func:`kaleido.apply` needs; see the module docstring for the format.

    ``reuse``: base :class:`~kaleido.reuse.ReuseConfig` (thresholds, low bits, metric,
    quantisation granularity, dense warm-up steps, step-dependent schedule).
    ``ops``: one :class:`OpConfig` per switch in :data:`OP_SWITCHES`.
    ``layers``: per-layer overrides ``{layer key: {switch: partial op config}}``.
    ``record_maps``: keep full mode maps in the trace.
    """

    reuse: ReuseConfig = field(default_factory=lambda: ReuseConfig(16.0, 32.0, low_bits=6, dense_steps=1))
    ops: Mapping[str, OpConfig] = field(default_factory=_default_ops)
    layers: Mapping[str, Mapping[str, Mapping[str, Any]]] = field(default_factory=dict)
    record_maps: bool = False
    version: int = CONFIG_VERSION

    def __post_init__(self) -> None:
        if self.version != CONFIG_VERSION:
            raise ValueError(
                f"KaleidoConfig version {self.version!r} is not supported: this Kaleido reads version {CONFIG_VERSION}"
            )
        if not isinstance(self.reuse, ReuseConfig):
            raise ValueError(f"KaleidoConfig.reuse must be a ReuseConfig, got {type(self.reuse).__name__}")
        ops = dict(_default_ops())
        for name, op in dict(self.ops).items():
            if name not in OP_SWITCHES:
                raise ValueError(f"KaleidoConfig ops has unknown op {name!r}; known ops: {list(OP_SWITCHES)}")
            if not isinstance(op, OpConfig):
                raise ValueError(f"KaleidoConfig ops.{name} must be an OpConfig, got {type(op).__name__}")
            ops[name] = op
        object.__setattr__(self, "ops", ops)
        if not isinstance(self.record_maps, bool):
            raise ValueError(f"KaleidoConfig trace.record_maps must be true or false, got {self.record_maps!r}")
        layers: dict[str, dict[str, dict]] = {}
        for key, patch in dict(self.layers).items():
            parse_layer_key(key)
            patch = _check_keys(patch, OP_SWITCHES, f"layers[{key!r}]")
            layers[str(key)] = {}
            for sw, p in patch.items():
                # validate now: the override must merge onto the base op config
                merged = ops[sw].merged(p, f"layers[{key!r}].{sw}")
                self._reuse_for(merged, f"layers[{key!r}].{sw}")
                layers[str(key)][sw] = dict(_check_keys(p, _OP_KEYS, f"layers[{key!r}].{sw}"))
        object.__setattr__(self, "layers", layers)
        for sw, op in ops.items():
            self._reuse_for(op, f"ops.{sw}")

    # -- resolution -----------------------------------------------------------------
    def _reuse_for(self, op: OpConfig, path: str) -> ReuseConfig:
        if not op.reuse:
            return self.reuse
        d = self.reuse.to_dict()
        d.update(op.reuse)
        try:
            return ReuseConfig.from_dict(d)
        except ValueError as e:
            raise ValueError(f"{_where(path)}: {e}") from None

    def op_config(self, switch: str, layer: int) -> OpConfig:
        """The op config of ``switch`` at ``layer``, per-layer overrides applied in order."""
        if switch not in OP_SWITCHES:
            raise ValueError(f"unknown op switch {switch!r}; known: {list(OP_SWITCHES)}")
        op = self.ops[switch]
        for key, patch in self.layers.items():
            lo, hi = parse_layer_key(key)
            if lo <= layer <= hi and switch in patch:
                op = op.merged(patch[switch], f"layers[{key!r}].{switch}")
        return op

    def reuse_config(self, switch: str, layer: int) -> ReuseConfig:
        """The (possibly scheduled) ReuseConfig of ``switch`` at ``layer``."""
        return self._reuse_for(self.op_config(switch, layer), f"ops.{switch}")

    def max_layer_index(self) -> int:
        """Highest layer named by an override (``-1`` when none, ``'*'`` ignored)."""
        hi = -1
        for key in self.layers:
            if str(key).strip() == "*":
                continue
            hi = max(hi, parse_layer_key(key)[1])
        return hi

    # -- variants -------------------------------------------------------------------
    @classmethod
    def dense(cls) -> "KaleidoConfig":
        """Every op patched but with thresholds 0 (no per-op overrides): the output equals the dense model's."""
        return cls(reuse=ReuseConfig.dense(), ops={k: replace(v, reuse={}) for k, v in _default_ops().items()})

    def with_thresholds(self, theta1: float, theta2: float) -> "KaleidoConfig":
        """The same config with base thresholds replaced (per-op overrides kept)."""
        return replace(self, reuse=replace(self.reuse, theta1=float(theta1), theta2=float(theta2)))

    # -- serialisation --------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "version": self.version,
            "reuse": self.reuse.to_dict(),
            "ops": {k: self._op_dict(k) for k in OP_SWITCHES},
            "layers": {k: {sw: dict(p) for sw, p in v.items()} for k, v in self.layers.items()},
            "trace": {"record_maps": self.record_maps},
        }

    def _op_dict(self, switch: str) -> dict:
        """The op's dict; keys the default op overrides but this one does not are written with the
        base value, so that loading it (which merges onto the defaults) gives the same thresholds."""
        d = self.ops[switch].to_dict()
        base = self.reuse.to_dict()
        for k in _default_ops()[switch].reuse:
            if k not in self.ops[switch].reuse:
                d[k] = base[k]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "KaleidoConfig":
        d = _check_keys(d, ("version", "reuse", "ops", "layers", "trace"), "")
        version = d.get("version", CONFIG_VERSION)
        if version != CONFIG_VERSION:
            raise ValueError(
                f"KaleidoConfig version {version!r} is not supported: this Kaleido reads version {CONFIG_VERSION}"
            )
        base = cls().reuse.to_dict()
        if "reuse" in d:
            base.update(_check_keys(d["reuse"], _REUSE_KEYS, "reuse"))
        try:
            reuse = ReuseConfig.from_dict(base)
        except ValueError as e:
            raise ValueError(f"{_where('reuse')}: {e}") from None
        ops = _default_ops()
        for name, patch in _check_keys(d.get("ops", {}), OP_SWITCHES, "ops").items():
            ops[name] = ops[name].merged(patch or {}, f"ops.{name}")
        trace = _check_keys(d.get("trace", {}) or {}, ("record_maps",), "trace")
        layers = d.get("layers", {}) or {}
        if not isinstance(layers, Mapping):
            raise ValueError(f"KaleidoConfig layers must be a mapping of layer key -> op overrides, got {layers!r}")
        return cls(reuse=reuse, ops=ops, layers=layers, record_maps=trace.get("record_maps", False), version=version)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False)

    @classmethod
    def from_json(cls, text: str) -> "KaleidoConfig":
        try:
            d = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"KaleidoConfig JSON does not parse: {e}") from None
        return cls.from_dict(d)

    def to_yaml(self) -> str:
        import yaml

        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    @classmethod
    def coerce(cls, config: "KaleidoConfig | Mapping | str | Path | None") -> "KaleidoConfig":
        """A KaleidoConfig from what ``kaleido.apply`` takes for Kaleido: ``None`` (the defaults), a config, a
        mapping (:meth:`from_dict`) or a path / packaged name (:meth:`load`)."""
        if config is None:
            return cls()
        if isinstance(config, cls):
            return config
        if isinstance(config, Mapping):
            return cls.from_dict(config)
        if isinstance(config, (str, Path)):
            return cls.load(config)
        raise ValueError(f"kaleido.apply: config must be a KaleidoConfig, a dict or a path to a JSON/YAML file, "
                         f"got {type(config).__name__}")

    @classmethod
    def from_yaml(cls, text: str) -> "KaleidoConfig":
        import yaml

        try:
            d = yaml.safe_load(text)
        except yaml.YAMLError as e:
            # one line: what the parser expected and where (PyYAML's own message spans several lines)
            mark = getattr(e, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            what = " ".join(str(x) for x in (getattr(e, "context", None), getattr(e, "problem", None)) if x)
            raise ValueError(
                f"KaleidoConfig YAML does not parse{where}: {what or type(e).__name__}; fix the YAML there "
                "(e.g. a missing closing brace or a tab for indentation)"
            ) from None
        return cls.from_dict(d or {})

    def save(self, path: str | Path) -> Path:
        """Write JSON (``.json``) or YAML (``.yaml``/``.yml``)."""
        path = Path(path)
        text = self.to_json() if path.suffix == ".json" else self.to_yaml()
        from kaleido.atomic import write_atomic

        return write_atomic(path, text)

    @classmethod
    def load(cls, path: str | Path) -> "KaleidoConfig":
        """Read a config written by :meth:`save` (JSON by suffix, YAML otherwise), or a packaged one by
        name (:func:`packaged_configs`, e.g. ``"calibrated-tiny"``)."""
        path = Path(path)
        if not path.is_file() and not path.suffix and path.name in packaged_configs():
            path = packaged_configs()[path.name]
        if not path.is_file():
            raise ValueError(f"config file {str(path)!r} does not exist (packaged configs by name: "
                             f"{', '.join(sorted(packaged_configs())) or 'none'})")
        text = path.read_text()
        return cls.from_json(text) if path.suffix == ".json" else cls.from_yaml(text)


def packaged_configs() -> dict[str, Path]:
    """Configs shipped with Kaleido (``kaleido/assets/configs/*.yaml``) by name; e.g. ``calibrated-tiny``,
    the miniature pipeline's config calibrated to 30 dB (``docs/characterization.md``)."""
    import importlib.resources

    folder = Path(str(importlib.resources.files("kaleido") / "assets" / "configs"))
    return {p.stem: p for p in sorted(folder.glob("*.yaml"))} if folder.is_dir() else {}


def default_config(model: str) -> KaleidoConfig:
    """The KaleidoConfig to use on ``model`` when none is given: the packaged config calibrated for it (a
    shipped tiny variant's ``config``, e.g. ``tiny``: ``tiny-default``, see docs/results/README.md), else
    ``KaleidoConfig()``, the generic starting point."""
    from kaleido.tiny.pipeline import TINY_VARIANTS  # the model layer, below this one (docs/architecture.md)

    variant = TINY_VARIANTS.get(model)
    if variant is not None and variant.config in packaged_configs():
        return KaleidoConfig.load(variant.config)
    return KaleidoConfig()
