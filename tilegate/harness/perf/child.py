"""The perf tier's workload: each kernel family on each local config, timed against torch SDPA in
the same process, on one GPU, with nothing else running (tilegate/harness/perf/driver.py starts it):

    python -m tilegate.harness.perf.child [--defect extra_exp] [--families prefill,extend,decode]

Times are medians of CUDA/HIP event timings after warm-up, in ``rounds`` interleaved rounds (kernel,
peer, kernel, peer, ...) so that the machine's drift hits both sides alike. The last line printed is
``tilegate-perf: {json}``: per record the kernel's and the peer's median time per round, and the
figures (TFLOP/s for prefill and extend, GB/s of K+V read for decode, next to the device-to-device
copy bandwidth measured in the same run). Shapes: Llama-3-8B heads (32:8), head_dim 128, fp16.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from functools import partial

import torch
import torch.nn.functional as F

from tilegate import runtime
from tilegate.fixtures.paged_cases import PagedCase, paged_batch
from tilegate.fixtures.shapes import LLAMA3_8B
from tilegate.harness.perf import protocol
from tilegate.kernels.configs import CONFIG_TABLES, DECODE_TABLES, EXTEND_TABLES, configs_for
from tilegate.kernels.defects import PrefillDefect
from tilegate.kernels.problem import AttentionShape
from tilegate.platform import detect, local_target
from tilegate.serving import paged

HEAD_DIM, DTYPE = 128, torch.float16
PREFILL = ((3782, True), (8192, True), (32768, True), (32768, False))  # (seq, causal)
EXTEND = (8192, 3782)  # cached prefix, new tokens
DECODE = ((32, 8192), (8, 32768))  # (batch, context) over a scattered pool
FAMILIES = ("prefill", "extend", "decode")
WARMUP, ITERS, ROUNDS = 3, 10, 3


def median_ms(fn) -> float:
    """Median of per-call event timings after warm-up."""
    for _ in range(WARMUP):
        fn()
    times = []
    for _ in range(ITERS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def rounds(kernel, peer) -> tuple[list[float], list[float]]:
    mine, theirs = [], []
    for _ in range(ROUNDS):
        mine.append(median_ms(kernel))
        theirs.append(median_ms(peer))
    return mine, theirs


def attention_flops(seq_q: int, seq_k: int, causal: bool, heads: int) -> float:
    """2 matmuls x 2 flops x q x k x d per head; causal keeps the visible (bottom-right) part."""
    visible = seq_q * seq_k - (seq_q * (seq_q - 1) / 2 if causal else 0)
    return 4.0 * heads * visible * HEAD_DIM


def sdpa(q, k, v, **kw):
    """torch's default SDPA backend over [batch, seq, heads, dim] tensors."""
    return F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), enable_gqa=True, **kw
    )


def aiter_attention():
    """aiter's flash attention on ROCm, where it imports (the MI300X runner's second peer), else
    None."""
    if not torch.version.hip:
        return None
    try:
        from aiter import flash_attn_func
    except ImportError:
        return None
    return flash_attn_func


def _record(family, case, cfg, mine, theirs, work, unit) -> dict:
    ms, peer_ms = statistics.median(mine), statistics.median(theirs)
    ratios = [t / m for m, t in zip(mine, theirs)]
    scale = 1e-9 if unit == "TFLOP/s" else 1e-6  # work per ms -> TFLOP/s or GB/s
    return {
        "family": family,
        "case": case,
        "config": cfg,
        "ms": ms,
        "peer_ms": peer_ms,
        "unit": unit,
        "value": work / ms * scale,
        "peer_value": work / peer_ms * scale,
        "ratio": statistics.median(ratios),
        "ratio_spread": (max(ratios) - min(ratios)) / statistics.median(ratios),
    }


def prefill(defect: PrefillDefect | None) -> list[dict]:
    q_heads, kv_heads = LLAMA3_8B
    out, g = [], torch.Generator(device="cuda").manual_seed(0)
    for seq, causal in PREFILL:
        shape = AttentionShape(q_heads, kv_heads, HEAD_DIM, causal, "float16")
        q = torch.randn(1, seq, q_heads, HEAD_DIM, generator=g, device="cuda", dtype=DTYPE)
        k, v = (
            torch.randn(1, seq, kv_heads, HEAD_DIM, generator=g, device="cuda", dtype=DTYPE)
            for _ in "kv"
        )
        for cfg in configs_for(local_target(), HEAD_DIM, CONFIG_TABLES):
            kernel = partial(runtime.flash_attention, shape, cfg, q, k, v, defect=defect)
            mine, theirs = rounds(kernel, partial(sdpa, q, k, v, is_causal=causal))
            name = f"{seq} {'causal' if causal else 'full'}"
            flops = attention_flops(seq, seq, causal, q_heads)
            out.append(_record("prefill", name, cfg.name, mine, theirs, flops, "TFLOP/s"))
            aiter = aiter_attention()
            if aiter is not None:
                mine, theirs = rounds(kernel, partial(aiter, q, k, v, causal=causal))
                out.append(
                    _record("prefill-vs-aiter", name, cfg.name, mine, theirs, flops, "TFLOP/s")
                )
    return out


def extend() -> list[dict]:
    from torch.nn.attention.bias import causal_lower_right

    prefix, new = EXTEND
    shape = AttentionShape(*LLAMA3_8B, HEAD_DIM, True, "float16")
    batch = paged_batch(PagedCase(shape, (prefix + new,), (new,)), "cuda")
    meta = paged.prepare_extend(
        batch.req_to_token, batch.req_pool_indices, batch.seq_lens, batch.extend_lens, "cuda"
    )
    ctx = prefix + new
    slots = batch.req_to_token[batch.req_pool_indices[0], :ctx]
    k, v = batch.k_pool[slots][None], batch.v_pool[slots][None]  # the same context, contiguous
    q4 = batch.q[None]
    mask = causal_lower_right(new, ctx)
    groups = shape.groups
    k_full, v_full = (t.repeat_interleave(groups, dim=2) for t in (k, v))  # CausalBias takes no GQA
    flops = attention_flops(new, ctx, True, shape.q_heads)
    out = []
    for cfg in configs_for(local_target(), HEAD_DIM, EXTEND_TABLES):
        kernel = partial(paged.extend_batch, meta, batch.q, batch.k_pool, batch.v_pool, cfg=cfg)
        mine, theirs = rounds(
            kernel,
            partial(
                F.scaled_dot_product_attention,
                q4.transpose(1, 2),
                k_full.transpose(1, 2),
                v_full.transpose(1, 2),
                attn_mask=mask,
            ),
        )
        out.append(
            _record("extend", f"{new} over {prefix}", cfg.name, mine, theirs, flops, "TFLOP/s")
        )
        # the same shape through the prefill kernel (bottom-right causal): extend's own peer
        pre_cfg = configs_for(local_target(), HEAD_DIM, CONFIG_TABLES)[0]
        mine2, prefill_times = rounds(
            kernel, partial(runtime.flash_attention, shape, pre_cfg, q4, k, v)
        )
        out.append(
            _record(
                "extend-vs-prefill",
                f"{new} over {prefix} vs flash_fwd {pre_cfg.name}",
                cfg.name,
                mine2,
                prefill_times,
                flops,
                "TFLOP/s",
            )
        )
    return out


def decode() -> tuple[list[dict], dict]:
    shape = AttentionShape(*LLAMA3_8B, HEAD_DIM, True, "float16")
    out: list[dict] = []
    host: dict = {}
    for bs, ctx in DECODE:
        batch = paged_batch(PagedCase(shape, (ctx,) * bs), "cuda")
        meta = paged.prepare_decode(
            batch.req_to_token, batch.req_pool_indices, batch.seq_lens, "cuda"
        )
        k = torch.stack(
            [batch.k_pool[batch.req_to_token[r, :ctx]] for r in batch.req_pool_indices.tolist()]
        )
        v = torch.stack(
            [batch.v_pool[batch.req_to_token[r, :ctx]] for r in batch.req_pool_indices.tolist()]
        )
        q4 = batch.q[:, None]
        kv_bytes = 2 * bs * ctx * shape.kv_heads * HEAD_DIM * batch.k_pool.element_size()
        for cfg in configs_for(local_target(), HEAD_DIM, DECODE_TABLES):
            mine, theirs = rounds(
                partial(paged.decode_batch, meta, batch.q, batch.k_pool, batch.v_pool, cfg=cfg),
                partial(sdpa, q4, k, v),
            )
            out.append(_record("decode", f"{bs}x{ctx}", cfg.name, mine, theirs, kv_bytes, "GB/s"))
        if not host:
            try:
                host = host_time_per_call(
                    partial(paged.decode_batch, meta, batch.q, batch.k_pool, batch.v_pool)
                )
            # a launch the graph cannot capture: reported, and the graph test fails
            except RuntimeError as exc:
                host = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    return out, host


def host_time_per_call(step, calls: int = 50) -> dict:
    """Host microseconds per decode call: eager, and as a replayed CUDA/HIP graph."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    result = {}
    for name, fn in (("eager_us", step), ("replay_us", graph.replay)):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        result[name] = (time.perf_counter() - start) / calls * 1e6
        torch.cuda.synchronize()
    return result


def copy_gbps() -> float:
    """Device-to-device copy bandwidth, read + write bytes per second: the figure decode is
    judged by."""
    x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    ms = median_ms(lambda: y.copy_(x))
    return 2 * x.numel() / ms * 1e-6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--defect", type=PrefillDefect, help="a planted flash_fwd defect (prefill only): extra_exp"
    )
    parser.add_argument("--families", default=",".join(FAMILIES))
    args = parser.parse_args(argv)
    families = args.families.split(",")
    doc = {
        "device": detect().describe(),
        "torch": torch.__version__,
        "defect": args.defect,
        "copy_gbps": copy_gbps(),
        "records": [],
        "host": {},
    }
    if "prefill" in families:
        doc["records"] += prefill(args.defect)
    if "extend" in families:
        doc["records"] += extend()
    if "decode" in families:
        records, doc["host"] = decode()
        doc["records"] += records
    print(protocol.record_line(doc), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
