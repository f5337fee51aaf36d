"""The op vocabulary (kaleido.ops): one table, and every other layer's names of an op kind derived from it.

What Kaleido's integration records on the tiny models is checked in
tests/techniques/kaleido_reuse/test_op_vocabulary.py (on the family fixtures of tests/conftest.py).
"""

import pytest

from kaleido.ops import ALL_BLOCK_OPS, BLOCK_OPS, HW_KIND_OF, HW_OPS, OPS, SWITCH_OF, SWITCHES, UNIT_OPS, OpKind


def test_parse_gives_the_kind_or_one_error_naming_the_known_ones():
    assert OpKind.parse("self_qk") is OpKind.SELF_QK
    assert OpKind.parse(OpKind.FFN_IN) is OpKind.FFN_IN
    with pytest.raises(ValueError) as e:
        OpKind.parse("nope")
    msg = str(e.value)
    assert "\n" not in msg and "'nope'" in msg
    assert all(repr(k.value) in msg for k in OpKind)


def test_every_kind_has_one_row():
    assert set(OPS) == set(OpKind)
    assert len({k.value for k in OpKind}) == len(OpKind)


def test_units_partition_the_block_ops():
    flat = [k for kinds in UNIT_OPS.values() for k in kinds]
    assert len(flat) == len(set(flat)) and set(flat) == set(BLOCK_OPS)
    assert all(UNIT_OPS.values())  # no empty unit
    assert OpKind.DENSE not in BLOCK_OPS and OpKind.FUSED_OUT not in BLOCK_OPS  # not in a Wan-style block


def test_every_switch_controls_some_op_and_only_never_reused_kinds_have_none():
    assert len(SWITCHES) == len(set(SWITCHES)) and set(SWITCH_OF.values()) == set(SWITCHES)
    assert set(SWITCH_OF) == {k.value for k in OpKind if k.info.switch is not None}
    assert {k for k in OpKind if k.info.switch is None} == {OpKind.CROSS_PROJ_KV, OpKind.DENSE}


def test_hw_names_are_the_simulators_workload_op_kinds():
    from kaleido.hw.inputs.workloads import ATTENTION_KINDS, get_workload, workload_names

    assert set(HW_KIND_OF.values()) == set(HW_OPS)
    assert all(k.info.hw is None or k.info.hw in HW_OPS for k in OpKind)
    # the descriptions come from the first kind of each hw name (ffn_down: ffn_out, not fused_out)
    assert HW_OPS["ffn_down"] == OpKind.FFN_OUT.info.description
    used = {g.op for name in workload_names() for g in get_workload(name, steps=1).gemms}
    assert used == set(HW_OPS)
    assert set(ATTENTION_KINDS) == {"self_attn_qk", "self_attn_pv", "cross_attn_qk", "cross_attn_pv"}


def test_the_simulator_reads_the_reusable_trace_ops_only():
    from kaleido.hw.inputs.trace_adapter import TRACE_OP_TO_KIND

    assert set(TRACE_OP_TO_KIND) == set(SWITCH_OF)
    assert all(kind == OpKind(op).info.hw for op, kind in TRACE_OP_TO_KIND.items())
    assert "cross_proj_kv" not in TRACE_OP_TO_KIND and "cross_proj_kv" not in TRACE_OP_TO_KIND.values()


def test_config_switches_are_the_vocabularys():
    from kaleido.techniques.kaleido_reuse.config import OP_SWITCH_OF, OP_SWITCHES, KaleidoConfig
    from kaleido.trace import DENSE_OP

    assert OP_SWITCHES == SWITCHES and OP_SWITCH_OF == SWITCH_OF
    assert tuple(KaleidoConfig().ops) == SWITCHES
    assert list(KaleidoConfig().to_dict()["ops"]) == list(SWITCHES)
    assert OpKind.parse(DENSE_OP) is OpKind.DENSE


def test_baselines_ledger_kinds_are_the_block_ops():
    from kaleido.ops import BLOCK_KINDS
    from kaleido.techniques.base import UNIT_KINDS
    from kaleido.techniques.kaleido_reuse.method import KaleidoSettings

    assert tuple(BLOCK_KINDS) == tuple(k.value for k in ALL_BLOCK_OPS)  # BLOCK_OPS + fused_out (HunyuanVideo)
    assert {u: set(ks) for u, ks in UNIT_KINDS.items()} == {u: {k.value for k in ks} for u, ks in UNIT_OPS.items()}
    # Kaleido's flat settings have one switch per config switch
    flags = {f for f, v in KaleidoSettings().__dict__.items() if isinstance(v, bool)}
    assert flags == set(SWITCHES)
