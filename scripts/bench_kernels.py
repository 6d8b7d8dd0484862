"""Speed of each adapted kernel against its peer (the adapter's ``peer``: SGLang's own Triton
sparse-MLA kernels), measured in one process on one GPU, interleaved, as a ratio.

    python3 scripts/bench_kernels.py [--tokens 1 8 17 8192] [--out artifacts/perf/kernels.json]

Per kernel and token count: the family's tail-padded case; both run once to compile and warm, then
ROUNDS rounds of REPS launches each, kernel and peer alternating; the table gives each one's median
time per launch and their ratio (kernel / peer, < 1: the kernel is faster), and both one's max
error ratio against FP32 (the numerics tier's judge, for the peer too).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch

from tilegate.families import gpu, sparse_mla
from tilegate.families.case import load_module
from tilegate.families.discover import discover
from tilegate.references.metrics import judge

ROUNDS, REPS = 15, 10


def _time(fn) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(REPS):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / REPS * 1000  # us a launch


def bench(kernel, tokens: int) -> dict:
    case = sparse_mla.Case(tokens, "tail-padded", sparse_mla.Shape(*kernel.gpu_shape))
    p = gpu.prepare(kernel, case)
    module = load_module(kernel)
    mine, peer = (
        (lambda: kernel.launcher(module, p.inputs, p.stored)),
        (lambda: kernel.peer(p.inputs, p.stored)),
    )
    ref, base = gpu.reference(kernel, p), gpu.baseline(kernel, p)
    errs = {
        name: judge(fn().to(torch.bfloat16), ref, base).max_ratio
        for name, fn in (("kernel", mine), ("peer", peer))
    }
    times: dict[str, list[float]] = {"kernel": [], "peer": []}
    for _ in range(ROUNDS):
        times["kernel"].append(_time(mine))
        times["peer"].append(_time(peer))
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "kernel": kernel.name,
        "tokens": tokens,
        "kernel_us": round(med["kernel"], 1),
        "peer_us": round(med["peer"], 1),
        "ratio": round(med["kernel"] / med["peer"], 3),
        "kernel_max_ratio": round(errs["kernel"], 3),
        "peer_max_ratio": round(errs["peer"], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[1, 8, 17, 8192])
    parser.add_argument(
        "--kernels",
        nargs="+",
        default=["tilegate.families.sglang_dsa", "tilegate.families.sglang_dsv4"],
    )
    parser.add_argument("--out", type=Path, default=Path("artifacts/perf/kernels.json"))
    args = parser.parse_args()
    rows = []
    for kernel in (k for k in discover(args.kernels) if k.peer is not None and k.gpu_shape):
        for tokens in args.tokens:
            try:
                rows.append(bench(kernel, tokens))
                print(json.dumps(rows[-1]), flush=True)
            # a kernel that does not build here (tilegate.families.sglang_findings) is said, and the
            # rest run
            except Exception as exc:
                print(
                    f"{kernel.name} at {tokens} tokens did not run: {type(exc).__name__}: "
                    f"{str(exc).splitlines()[0][:200]}"
                )
                break
    print(
        f"{'kernel':28} {'tokens':>6} {'kernel us':>10} {'peer us':>10} {'ratio':>6} {'err k':>6} "
        f"{'err peer':>8}"
    )
    for r in rows:
        print(
            f"{r['kernel']:28} {r['tokens']:>6} {r['kernel_us']:>10} {r['peer_us']:>10} "
            f"{r['ratio']:>6} "
            f"{r['kernel_max_ratio']:>6} {r['peer_max_ratio']:>8}"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {"device": torch.cuda.get_device_name(), "rounds": ROUNDS, "reps": REPS, "rows": rows},
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
