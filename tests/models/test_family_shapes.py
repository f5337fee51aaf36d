"""Each model adapter names its family's shape declaration, and the two agree on which GEMMs the family runs.

The declaration (:mod:`kaleido.families`) is what the simulator's workloads are built from; the adapter is what
the techniques patch. Their op kinds are compared here on each family's tiny random transformer, independently of
either: the adapter's sites are read off the live diffusers model, the declaration's GEMMs off its config.
(``tests/hw/inputs/test_workload_gemms.py`` checks the declared GEMMs' shapes against the matmuls torch counts.)
"""

from __future__ import annotations

import pytest

from kaleido.families import FAMILIES, family_of_class
from kaleido.hw.inputs.workloads import build_gemms, model_spec_from_config
from kaleido.models.adapter import adapter_for
from kaleido.models.testing import TRANSFORMER_CASES
from kaleido.ops import HW_KIND_OF


@pytest.mark.parametrize("case", TRANSFORMER_CASES, ids=[c.name for c in TRANSFORMER_CASES])
def test_the_adapter_names_its_family_and_both_list_the_same_op_kinds(case):
    model = case.build()
    adapter = adapter_for(model)
    assert adapter.shapes is family_of_class(type(model).__name__)
    assert adapter.shapes.class_name in adapter.model_classes

    sites = {s.op for s in adapter.linear_sites(model)} | {op for _, op, _ in adapter.dense_linears}
    sites |= {f"{s.kind}_{part}" for s in adapter.attention_sites(model) for part in ("qk", "pv")}
    from_adapter = {HW_KIND_OF[k] for k in sites}

    spec = model_spec_from_config("tiny", model.config, steps=1, cfg_passes=1, text_len=5,
                                  class_name=type(model).__name__)
    declared = {g.op for g in build_gemms(spec, (3, 4, 4), 1)}
    assert from_adapter == declared


def test_every_declared_family_has_an_adapter_case():
    built = {family_of_class(type(c.build()).__name__).name for c in TRANSFORMER_CASES}
    assert built == set(FAMILIES)
