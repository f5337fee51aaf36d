"""The adapters' linear sites are resolved from one (path, op) table per block kind."""

import pytest
import torch

from kaleido.models.adapter import attention_linears, block_linear_sites, ffn_linears


def test_paths_resolve_to_the_blocks_modules():
    block = torch.nn.Module()
    block.attn = torch.nn.Module()
    for n in ("to_q", "to_k", "to_v"):
        setattr(block.attn, n, torch.nn.Linear(4, 4))
    block.attn.to_out = torch.nn.ModuleList([torch.nn.Linear(4, 4), torch.nn.Dropout()])
    sites = block_linear_sites("blocks.3", block, 3, attention_linears("attn"))
    assert [(s.name, s.op, s.layer) for s in sites] == [
        ("blocks.3.attn.to_q", "proj_q", 3), ("blocks.3.attn.to_k", "proj_k", 3), ("blocks.3.attn.to_v", "proj_v", 3),
        ("blocks.3.attn.to_out.0", "proj_out", 3)]
    assert sites[3].module is block.attn.to_out[0]


def test_a_block_without_the_layer_is_refused_by_name():
    with pytest.raises(ValueError, match=r"blocks.0 has no submodule 'ff.net.0.proj'.*adapter needs updating"):
        block_linear_sites("blocks.0", torch.nn.Module(), 0, ffn_linears("ff"))
