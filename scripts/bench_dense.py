"""Speed of each dense-family adapted kernel against the gate's own prefill kernel and torch SDPA,
measured in one process on one GPU, interleaved, as ratios.

    python3 scripts/bench_dense.py [--kernels dense_example.adapter] [--cases NAME ...]
                                   [--out artifacts/perf/dense.json]

Per kernel and case (a dense-family case, tilegate/families/dense.py: the gate's own numerics case
and its random inputs): the kernel is timed against each peer with the gate's paired timing
(tilegate.harness.perf.timing.paired: graph replays alternating, ROUNDS rounds of PAIRS pairs, the
ratio taken pair by pair); the table gives each one's median time per launch, the ratios
kernel / gate and kernel / SDPA (< 1: the adapted kernel is faster), and each one's max-error ratio
against FP32 (the numerics tier's judge). The gate's kernel runs its local default config
(tilegate.kernels.configs); SDPA is torch's default backend, with the causal mask aligned
bottom-right as the cases are (torch.nn.attention.bias.causal_lower_right).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention.bias import causal_lower_right

from tilegate.families import gpu
from tilegate.families.case import load_module
from tilegate.families.discover import discover
from tilegate.harness.perf.timing import paired
from tilegate.kernels.configs import default_config
from tilegate.platform import local_target
from tilegate.references.metrics import judge
from tilegate.runtime import flash_attention

ROUNDS, PAIRS = 5, 5
PEERS = ("gate", "sdpa")
CASES = (
    "causal-gqa32x8-d128-fp16-s3782-random",
    "full-gqa32x8-d128-fp16-s3782-random",
    "causal-gqa32x8-d128-fp16-s8192-random",
    "causal-gqa32x8-d128-fp16-q3782-k8192-random",
    "causal-gqa32x8-d128-fp16-s32768-random",
)


def contenders(kernel, case, x) -> dict:
    """name -> a launch writing the case's output: the adapted kernel, the gate's, SDPA's."""
    shape = case.run.shape
    cfg = default_config(local_target(), shape.head_dim)
    gate_out = torch.empty_like(x.q)
    sq, sk = x.q.shape[1], x.k.shape[1]
    mask = causal_lower_right(sq, sk) if x.causal and sq != sk else None

    def sdpa():
        out = F.scaled_dot_product_attention(
            *(t.transpose(1, 2) for t in (x.q, x.k, x.v)),
            attn_mask=mask,
            is_causal=x.causal and mask is None,
            enable_gqa=True,
        )
        return out.transpose(1, 2)

    module = load_module(kernel)
    return {  # no synchronisation inside: each is timed as a graph of back-to-back calls
        "kernel": lambda: kernel.launcher(module, x),
        "gate": lambda: flash_attention(shape, cfg, x.q, x.k, x.v, out=gate_out),
        "sdpa": sdpa,
    }


def bench(kernel, case) -> dict:
    x = gpu.prepare(kernel, case)
    runs = contenders(kernel, case, x)
    ref, base = gpu.reference(kernel, x), gpu.baseline(kernel, x)
    outs = {"kernel": gpu.run(kernel, x), "gate": runs["gate"](), "sdpa": runs["sdpa"]()}
    errs = {name: judge(out, ref, base).max_ratio for name, out in outs.items()}
    del ref, base, outs  # the 32k reference's memory, before timing
    # the gate's paired timing (tilegate.harness.perf.timing): the kernel against each peer in
    # alternating graph replays, the ratio taken pair by pair
    vs = {peer: paired(runs["kernel"], runs[peer], rounds=ROUNDS, pairs=PAIRS) for peer in PEERS}
    us = {
        "kernel": statistics.median(vs["gate"].kernel_ms) * 1000,
        **{peer: statistics.median(t.peer_ms) * 1000 for peer, t in vs.items()},
    }
    return {
        "kernel": kernel.name,
        "case": case.name,
        **{f"{name}_us": round(v, 1) for name, v in us.items()},
        # kernel time over the peer's: below 1, the kernel is faster
        **{f"vs_{peer}": round(1 / t.ratio, 3) for peer, t in vs.items()},
        "graphed": all(t.graphed for t in vs.values()),
        **{f"{name}_max_ratio": round(e, 3) for name, e in errs.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", nargs="+", default=["dense_example.adapter"])
    parser.add_argument("--cases", nargs="+", default=list(CASES))
    parser.add_argument("--out", type=Path, default=Path("artifacts/perf/dense.json"))
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "suite" / "dense_kernel"))
    rows = []
    for kernel in (k for k in discover(args.kernels) if k.family == "dense"):
        by_name = {c.name: c for c in gpu.family_cases(kernel)}
        for name in args.cases:
            if gpu.feature_missing(kernel, by_name[name]) is None:
                rows.append(bench(kernel, by_name[name]))
                print(json.dumps(rows[-1]), flush=True)
    head = f"{'kernel':20} {'case':44} {'kernel us':>10} {'gate us':>9} {'sdpa us':>9}"
    print(f"{head} {'/gate':>6} {'/sdpa':>6} {'err k':>6} {'err g':>6} {'err s':>6}")
    for r in rows:
        print(
            f"{r['kernel']:20} {r['case']:44} {r['kernel_us']:>10} {r['gate_us']:>9} "
            f"{r['sdpa_us']:>9} {r['vs_gate']:>6} {r['vs_sdpa']:>6} {r['kernel_max_ratio']:>6} "
            f"{r['gate_max_ratio']:>6} {r['sdpa_max_ratio']:>6}"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "device": torch.cuda.get_device_name(),
                "rounds": ROUNDS,
                "pairs": PAIRS,
                "rows": rows,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
