"""The sparse-MLA reference (references/sparse_mla.py) and the KV formats (tilegate/families/
kv_formats.py) on the CPU, against what each one says it computes, written out the long way."""

import math

import torch

from tilegate.families import sparse_mla as family
from tilegate.families.kv_formats import V4_BLOCK, V4_NOPE, v4_encode
from tilegate.references.sparse_mla import sparse_mla


def _slow(q, kv, indices, scale, d_v, sink=None):
    """One token, one head at a time: softmax over the used slots (a repeated slot counts twice)."""
    out = torch.zeros(q.shape[0], q.shape[1], d_v, dtype=torch.float64)
    for t in range(q.shape[0]):
        slots = [int(i) for i in indices[t] if i >= 0]
        for h in range(q.shape[1]):
            logits = [float(q[t, h].double() @ kv[i].double()) * scale for i in slots]
            extra = [] if sink is None else [float(sink[h])]
            if not slots:
                continue
            top = max(logits + extra)
            weights = [math.exp(x - top) for x in logits]
            total = sum(weights) + sum(math.exp(x - top) for x in extra)
            for w, i in zip(weights, slots):
                out[t, h] += w / total * kv[i, :d_v].double()
    return out


def test_the_reference_is_the_softmax_over_used_slots():
    gen = torch.Generator().manual_seed(0)
    q, kv = torch.randn(4, 3, 40, generator=gen), torch.randn(50, 40, generator=gen)
    indices = torch.randint(0, 50, (4, 12), generator=gen, dtype=torch.int32)
    indices[1, 5:] = -1
    indices[2] = -1  # no used slot: 0
    indices[3, 6:] = indices[3, :6]  # repeats weigh double
    kv[0] = float("nan") if (indices == 0).sum() == 0 else kv[0]
    sink = torch.randn(3, generator=gen)
    for s in (None, sink):
        got = sparse_mla(q, kv, indices, 0.2, 32, sink=s).double()
        assert torch.allclose(got, _slow(q, kv, indices, 0.2, 32, s), atol=1e-5), s


def test_an_unused_nan_row_stays_out_and_a_used_one_does_not():
    x = family.make_inputs(family.Case(5, "nan-unused", family.Shape(2, 16, 40, 32)), "cpu")
    assert torch.isnan(x.kv[0]).all() and not (x.indices == 0).any()
    assert torch.isfinite(sparse_mla(x.q.float(), x.kv.float(), x.indices, x.sm_scale, 32)).all()
    used = int(x.indices[0, 0])
    x.kv[used] = float("nan")
    assert torch.isnan(sparse_mla(x.q.float(), x.kv.float(), x.indices, x.sm_scale, 32)[0]).all()


def test_the_cases_are_what_they_say():
    shape = family.Shape(2, 16, 40, 32)
    masked = family.make_inputs(family.Case(7, "all-masked-rows", shape), "cpu")
    assert (masked.indices[::3] == -1).all() and (masked.indices[1] >= 0).any()
    dup = family.make_inputs(family.Case(3, "duplicates", shape), "cpu")
    assert torch.equal(dup.indices[:, 8:], dup.indices[:, :8])
    assert family.make_inputs(family.Case(3, "topk-length", shape), "cpu").topk_length.item() == 9
    assert {c.name for c in family.cases(shape) if c.tokens == 8192} == {
        "t8192-dense",
        "t8192-tail-padded",
    }


def test_the_v4_cache_decodes_as_the_kernel_reads_it():
    """The kernel's recipe (tilelang_fp8_attention.py): bf16 bits = sign | (e4m3 exponent + scale -
    7) << 7
    | mantissa << 4 for the 448 latent values, the rope part as bf16 after them, scales after the
    block's data."""
    kv = torch.randn(V4_BLOCK * 2, 512, generator=torch.Generator().manual_seed(1)) * 3
    cache, seen = v4_encode(kv)
    flat = cache.reshape(2, -1)
    data = flat[:, : V4_BLOCK * 576].reshape(-1, 576).long()
    scales = flat[:, V4_BLOCK * 576 :].reshape(-1, 8).long()
    b, tile_scale = data[:, :V4_NOPE], scales[:, torch.arange(V4_NOPE) // 64]
    bits = ((b & 0x80) << 8) | ((((b & 0x78) >> 3) + tile_scale - 7) << 7) | ((b & 0x7) << 4)
    nope = bits.to(torch.int16).view(torch.bfloat16).float()
    rope = data[:, V4_NOPE:].to(torch.uint8).contiguous().view(torch.bfloat16).float()
    normal = (b & 0x78) != 0  # the recipe has no zero or subnormal codes
    assert torch.equal(nope[normal], seen[:, :V4_NOPE][normal]) and torch.equal(
        rope, seen[:, V4_NOPE:]
    )
    # e4m3 keeps 3 bits
    assert (seen[:, :V4_NOPE] - kv[:, :V4_NOPE]).abs().max() <= kv.abs().max() / 8
