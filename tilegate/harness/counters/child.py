"""The counters tier's workload: one launch of each kernel on each local config, at a size that
fills the GPU, run under a profiler (ncu or rocprofv3) by tilegate/harness/counters/driver.py:

    python -m tilegate.harness.counters.child FAMILY

It prints one ``tilegate-counters: launch <kernel> <config>`` line per profiled launch, in launch
order, so that the profiler's N-th record can be named. Decode runs split and combine; only the
split kernel is profiled (the combine reads a few KiB).
"""

from __future__ import annotations

import argparse
import sys

import torch

from tilegate import runtime
from tilegate.fixtures.paged_cases import PagedCase, paged_batch
from tilegate.fixtures.shapes import LLAMA3_8B
from tilegate.gate.registry import PHASES
from tilegate.harness.counters import protocol
from tilegate.harness.workloads import launch_paged
from tilegate.kernels.configs import CONFIG_TABLES, DECODE_TABLES, EXTEND_TABLES, configs_for
from tilegate.kernels.dtypes import TORCH_DTYPES
from tilegate.kernels.problem import AttentionShape
from tilegate.platform import local_target

HEAD_DIM = 128
DTYPE = "float16"
PREFILL_SEQ = 4096
EXTEND = ((8192,), (3782,))  # 3782 new tokens over a 4410-token prefix
DECODE = tuple([8192] * 32)  # batch 32 x context 8192 over a scattered pool: bandwidth-bound


def _say(kernel: str, cfg) -> None:
    print(protocol.launch_line(kernel, cfg.name), flush=True)


def run(phase: str) -> None:
    shape = AttentionShape(*LLAMA3_8B, HEAD_DIM, True, DTYPE)
    target = local_target()
    if phase == "prefill":
        g = torch.Generator().manual_seed(0)
        q = (
            torch.randn(1, PREFILL_SEQ, shape.q_heads, HEAD_DIM, generator=g)
            .to(TORCH_DTYPES[DTYPE])
            .cuda()
        )
        k, v = (
            torch.randn(1, PREFILL_SEQ, shape.kv_heads, HEAD_DIM, generator=g).to(q.dtype).cuda()
            for _ in "kv"
        )
        for cfg in configs_for(target, HEAD_DIM, CONFIG_TABLES):
            _say("flash_fwd", cfg)
            runtime.flash_attention(shape, cfg, q, k, v)
        return
    decode = phase == "decode"
    batch = paged_batch(PagedCase(shape, DECODE) if decode else PagedCase(shape, *EXTEND), "cuda")
    for cfg in configs_for(target, HEAD_DIM, DECODE_TABLES if decode else EXTEND_TABLES):
        _say(PHASES[phase][0], cfg)  # a decode: its split step
        launch_paged(batch, decode, cfg)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("phase", choices=sorted(PHASES))
    run(parser.parse_args(argv).phase)
    torch.cuda.synchronize()
    print(protocol.DONE, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
