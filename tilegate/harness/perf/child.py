"""The perf tier's workload: each phase on each local config, timed against its peers in
the same process, on one GPU, with nothing else running (tilegate/harness/perf/driver.py starts it):

    python -m tilegate.harness.perf.child [--slowdown 0.10] [--phases prefill,extend,decode]

Each record pairs the kernel with one peer (torch SDPA; for decode also SGLang's triton decode
kernel where SGLang imports; for extend also the prefill kernel on the same shape), timed by
tilegate.harness.perf.timing: graph replays of back-to-back calls, kernel and peer alternating,
``ROUNDS`` rounds of ``PAIRS`` pairs. The last line printed is ``tilegate-perf: {json}``: per record
the kernel's and the peer's median time per round, their ratio and its spread over the rounds,
each round's ratio, and the figures (TFLOP/s for prefill and extend, GB/s of K+V read for decode,
next to the device-to-device copy bandwidth measured in the same run). Shapes: Llama-3-8B heads
(32:8), head_dim 128, fp16. ``--slowdown F`` is the test-only slow variant: every kernel call
followed by a device-side spin of F times that kernel's own time, which the perf check must flag.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F

from tilegate import runtime
from tilegate.fixtures.paged_cases import PagedCase, paged_batch
from tilegate.fixtures.shapes import LLAMA3_8B
from tilegate.gate.registry import PHASES, PREFILL_MASKS
from tilegate.harness.perf import protocol, timing
from tilegate.kernels.configs import CONFIG_TABLES, DECODE_TABLES, EXTEND_TABLES, configs_for
from tilegate.kernels.problem import CAUSAL, FULL, AttentionShape, Mask
from tilegate.platform import detect, local_target
from tilegate.serving import paged

HEAD_DIM, DTYPE = 128, torch.float16
# (seq, mask): causal and full, and every other mask variant of the phase at 32768 tokens
PREFILL = ((3782, CAUSAL), (8192, CAUSAL), (32768, CAUSAL), (32768, FULL)) + tuple(
    (32768, mask) for mask in PREFILL_MASKS if mask not in (CAUSAL, FULL)
)
EXTEND = (8192, 3782)  # cached prefix, new tokens
# (batch, context) over a scattered pool: the serving benchmark's shape (32 x 1024-1536, and 64),
# and long contexts
DECODE = ((32, 1024), (32, 1536), (64, 1024), (64, 1536), (32, 8192), (8, 32768))
ROUNDS, PAIRS = 5, 10
TRITON_MAX_SPLITS = 8  # SGLang's triton backend default (triton_attention_num_kv_splits)


class Slowdown:
    """The test-only slow variant: ``fraction`` of a kernel's own time added after each call, as
    a device-side spin (torch.cuda._sleep), calibrated in cycles per ms once."""

    def __init__(self, fraction: float):
        self.fraction = fraction
        probe = 1_000_000
        self.cycles_per_ms = probe / timing.eager_ms(lambda: torch.cuda._sleep(probe))

    def __call__(self, kernel: Callable[[], object]) -> Callable[[], object]:
        alone = timing.graph_ms(kernel)
        cycles = int(self.fraction * alone * self.cycles_per_ms)

        def slowed():
            kernel()
            torch.cuda._sleep(cycles)

        return slowed


def attention_flops(seq_q: int, seq_k: int, causal: bool, heads: int, window=None) -> float:
    """2 matmuls x 2 flops x q x k x d per head; causal keeps the visible (bottom-right) part,
    a sliding window at most window + 1 keys a row."""
    visible = seq_q * seq_k - (seq_q * (seq_q - 1) / 2 if causal else 0)
    if window is not None:
        rows = torch.arange(seq_q, dtype=torch.float64) + (seq_k - seq_q)
        visible = float(torch.clamp(rows + 1, max=window + 1).sum())
    return 4.0 * heads * visible * HEAD_DIM


def mask_name(mask: Mask) -> str:
    return "causal" if mask == CAUSAL else "full" if mask == FULL else f"window {mask.window}"


def sdpa_masked(q, k, v, mask: Mask):
    """SDPA with ``mask``: is_causal where it is the plain causal or full mask, else an explicit
    boolean mask (SDPA has no window of its own: it computes every block the window hides)."""
    if mask.window is None:
        return partial(sdpa, q, k, v, is_causal=mask.causal)
    seq_q, seq_k = q.shape[1], k.shape[1]
    rows = torch.arange(seq_q, device=q.device)[:, None] + (seq_k - seq_q)
    keys = torch.arange(seq_k, device=q.device)[None, :]
    visible = (keys <= rows) & (keys >= rows - mask.window)
    return partial(sdpa, q, k, v, attn_mask=visible)


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


class Recorder:
    """Times kernel-peer pairs into records; a Slowdown, if given, wraps every kernel."""

    def __init__(self, slowdown: Slowdown | None):
        self.slowdown = slowdown
        self.records: list[dict] = []

    def pair(self, phase, case, cfg, kernel, peer, work, unit) -> None:
        if self.slowdown is not None:
            kernel = self.slowdown(kernel)
        t = timing.paired(kernel, peer, rounds=ROUNDS, pairs=PAIRS)
        ms, peer_ms = statistics.median(t.kernel_ms), statistics.median(t.peer_ms)
        scale = 1e-9 if unit == "TFLOP/s" else 1e-6  # work per ms -> TFLOP/s or GB/s
        self.records.append(
            {
                "phase": phase,
                "case": case,
                "config": cfg,
                "ms": ms,
                "peer_ms": peer_ms,
                "unit": unit,
                "value": work / ms * scale,
                "peer_value": work / peer_ms * scale,
                "ratio": t.ratio,
                "ratio_spread": t.spread,
                "round_ratios": t.ratios,
                "graphed": t.graphed,
            }
        )


def prefill(rec: Recorder) -> None:
    q_heads, kv_heads = LLAMA3_8B
    g = torch.Generator(device="cuda").manual_seed(0)
    for seq, mask in PREFILL:
        shape = AttentionShape.masked(q_heads, kv_heads, HEAD_DIM, mask, "float16")
        q = torch.randn(1, seq, q_heads, HEAD_DIM, generator=g, device="cuda", dtype=DTYPE)
        k, v = (
            torch.randn(1, seq, kv_heads, HEAD_DIM, generator=g, device="cuda", dtype=DTYPE)
            for _ in "kv"
        )
        name = f"{seq} {mask_name(mask)}"
        flops = attention_flops(seq, seq, mask.causal, q_heads, mask.window)
        for cfg in configs_for(local_target(), HEAD_DIM, CONFIG_TABLES):
            kernel = partial(runtime.flash_attention, shape, cfg, q, k, v)
            rec.pair(
                "prefill", name, cfg.name, kernel, sdpa_masked(q, k, v, mask), flops, "TFLOP/s"
            )
            aiter = aiter_attention()
            if aiter is not None and mask.window is None:
                peer = partial(aiter, q, k, v, causal=mask.causal)
                rec.pair("prefill-vs-aiter", name, cfg.name, kernel, peer, flops, "TFLOP/s")


def extend(rec: Recorder) -> None:
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
    k_full, v_full = (t.repeat_interleave(shape.groups, dim=2) for t in (k, v))  # no GQA in bias
    flops = attention_flops(new, ctx, True, shape.q_heads)
    sdpa_peer = partial(
        F.scaled_dot_product_attention,
        q4.transpose(1, 2),
        k_full.transpose(1, 2),
        v_full.transpose(1, 2),
        attn_mask=mask,
    )
    # the same shape through the prefill kernel (bottom-right causal): extend's own peer
    pre_cfg = configs_for(local_target(), HEAD_DIM, CONFIG_TABLES)[0]
    prefill_peer = partial(runtime.flash_attention, shape, pre_cfg, q4, k, v)
    case = f"{new} over {prefix}"
    for cfg in configs_for(local_target(), HEAD_DIM, EXTEND_TABLES):
        kernel = partial(paged.extend_batch, meta, batch.q, batch.k_pool, batch.v_pool, cfg=cfg)
        rec.pair("extend", case, cfg.name, kernel, sdpa_peer, flops, "TFLOP/s")
        rec.pair(
            "extend-vs-prefill",
            f"{case} vs flash_fwd {pre_cfg.name}",
            cfg.name,
            kernel,
            prefill_peer,
            flops,
            "TFLOP/s",
        )


def triton_decode(batch, shape: AttentionShape, ctx: int):
    """SGLang's own triton decode kernel (its triton backend's) over the same pool, with the
    split counts its backend would choose, or None where SGLang does not import."""
    try:
        from sglang.kernels.ops.attention.decode_attention import decode_attention_fwd
        from sglang.kernels.ops.attention.metadata import get_num_kv_splits_triton
    except ImportError:
        return None
    bs = batch.q.shape[0]
    lens = batch.seq_lens.to(torch.int32)
    indptr = torch.zeros(bs + 1, dtype=torch.int32, device="cuda")
    indptr[1:] = torch.cumsum(lens, 0)
    rows = batch.req_to_token[batch.req_pool_indices]
    indices = rows[:, :ctx].reshape(-1).to(torch.int64)  # every request holds ctx tokens
    splits = torch.empty(bs, dtype=torch.int32, device="cuda")
    units = torch.cuda.get_device_properties(0).multi_processor_count
    get_num_kv_splits_triton[(1,)](
        splits, lens, bs, 1, shape.q_heads, shape.kv_heads, TRITON_MAX_SPLITS, units,
        MAX_NUM_SEQ=256,
    )  # fmt: skip
    logits = torch.empty(
        bs, shape.q_heads, TRITON_MAX_SPLITS, HEAD_DIM, dtype=torch.float32, device="cuda"
    )
    lse = torch.empty(bs, shape.q_heads, TRITON_MAX_SPLITS, dtype=torch.float32, device="cuda")
    out = torch.empty_like(batch.q)
    scale = HEAD_DIM**-0.5
    return partial(
        decode_attention_fwd,
        batch.q, batch.k_pool, batch.v_pool, out, indptr, indices, logits, lse, splits,
        TRITON_MAX_SPLITS, scale, 1.0, 1.0,
    )  # fmt: skip


def decode(rec: Recorder) -> dict:
    shape = AttentionShape(*LLAMA3_8B, HEAD_DIM, True, "float16")
    host: dict = {}
    for bs, ctx in DECODE:
        batch = paged_batch(PagedCase(shape, (ctx,) * bs), "cuda")
        meta = paged.prepare_decode(
            batch.req_to_token, batch.req_pool_indices, batch.seq_lens, "cuda"
        )
        rows = batch.req_to_token[batch.req_pool_indices]
        k, v = (
            torch.stack([pool[rows[i, :ctx]] for i in range(bs)])
            for pool in (batch.k_pool, batch.v_pool)
        )
        kv_bytes = 2 * bs * ctx * shape.kv_heads * HEAD_DIM * batch.k_pool.element_size()
        peers = {"decode": partial(sdpa, batch.q[:, None], k, v)}
        triton = triton_decode(batch, shape, ctx)
        if triton is not None:
            peers["decode-vs-triton"] = triton
        for cfg in configs_for(local_target(), HEAD_DIM, DECODE_TABLES):
            kernel = partial(paged.decode_batch, meta, batch.q, batch.k_pool, batch.v_pool, cfg=cfg)
            for phase, peer in peers.items():
                rec.pair(phase, f"{bs}x{ctx}", cfg.name, kernel, peer, kv_bytes, "GB/s")
        if not host:
            try:
                host = host_time_per_call(
                    partial(paged.decode_batch, meta, batch.q, batch.k_pool, batch.v_pool)
                )
            # a launch the graph cannot capture: reported, and the graph test fails
            except RuntimeError as exc:
                host = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        del batch, k, v, peers
        torch.cuda.empty_cache()
    return host


def host_time_per_call(step, calls: int = 50) -> dict:
    """Host microseconds per decode call: eager, and as a replayed CUDA/HIP graph."""
    graph = timing.capture(step, 1)
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
    ms = timing.eager_ms(lambda: y.copy_(x))
    return 2 * x.numel() / ms * 1e-6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--slowdown",
        type=float,
        help="the test-only slow variant: each kernel call takes this fraction longer",
    )
    parser.add_argument("--phases", default=",".join(PHASES))
    args = parser.parse_args(argv)
    phases = args.phases.split(",")
    rec = Recorder(Slowdown(args.slowdown) if args.slowdown else None)
    doc = {
        "device": detect().describe(),
        "torch": torch.__version__,
        "slowdown": args.slowdown,
        "copy_gbps": copy_gbps(),
        "records": rec.records,
        "host": {},
    }
    if "prefill" in phases:
        prefill(rec)
    if "extend" in phases:
        extend(rec)
    if "decode" in phases:
        doc["host"] = decode(rec)
    print(protocol.record_line(doc), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
