"""One sanitizer run's workload: launch one phase on every config of every table the local
GPU runs (tilegate.platform: its own, and the gfx942 programs lowered for it) over small inputs
that reach every tail and mask path. Run as

    compute-sanitizer --tool T python -m tilegate.harness.sanitize.child FAMILY [--defect D]
    [--plain-stores]

so that the sanitizer judges this process alone: the gate's launches plus the torch ops that make
inputs and read outputs back. Every tensor is its own device allocation (the parent sets
PYTORCH_NO_CUDA_MEMORY_CACHING=1), so a read past a tensor's end leaves its allocation.

``--plain-stores`` builds with TileLang's TMA lowering off: on Hopper the output tile then leaves
shared memory through ordinary stores instead of a bulk tensor store (``tl::tma_store``), which
initcheck does not see (suite/sanitize/test_sanitize.py proves it). Loads are built as in
production.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

import torch

from tilegate import runtime
from tilegate.fixtures.paged_cases import PagedCase, paged_batch
from tilegate.gate.paths import cache_dir
from tilegate.gate.planted import PrefillDefect, knobs_for
from tilegate.gate.registry import PHASES, PREFILL_MASKS
from tilegate.harness.sanitize import protocol
from tilegate.harness.sanitize.asan_build import AsanHipCompile, asan_builds
from tilegate.harness.workloads import launch_paged
from tilegate.kernels.configs import CONFIG_TABLES, DECODE_TABLES, EXTEND_TABLES, configs_for
from tilegate.kernels.dtypes import TORCH_DTYPES
from tilegate.kernels.problem import AttentionShape
from tilegate.platform import detect

HEADS = (8, 2)  # GQA 4:1, small enough that a sanitized launch takes seconds
# racecheck's time grows with the blocks launched, and a shared-memory hazard lies within one block.
# Blocks differ only by their tile's place in the sequence (batch and head change addresses, not
# the code path), so racecheck's prefill runs one sequence of a GQA 2:1 pair: every tile position,
# 1/8 of the blocks (at 2x8 heads, racecheck over prefill ran past 270 s on the H200).
LEAN_BATCH, LEAN_HEADS = 1, (2, 1)
HEAD_DIMS = (64, 128)
DTYPE = "float16"
# (seq_q, seq_k): tails, and a 112-token prefix
PREFILL_LENGTHS = ((1, 1), (17, 17), (129, 129), (17, 129))
# (seq_lens, extend_lens): a ragged batch with a 65-token prefix
EXTEND_BATCH = ((1, 129, 17), (1, 64, 17))
DECODE_CONTEXTS = (1, 57, 130)


def _say(what: str) -> None:
    print(protocol.progress_line(what), flush=True)


def _configs(head_dim: int, tables, first_only: bool, fewest_threads: bool = False) -> tuple:
    """The configs of every table this GPU runs (its own, and gfx942's programs lowered for it)."""
    picked = []
    for target in detect().executed_targets:
        configs = configs_for(target, head_dim, tables)
        if fewest_threads:
            picked.append(min(configs, key=lambda cfg: cfg.threads))
        else:
            picked += configs[:1] if first_only else configs
    return tuple(picked)


def _prefill(
    head_dim: int,
    defect: PrefillDefect | None,
    first_only: bool,
    one: bool = False,
    lean: bool = False,
    fewest_threads: bool = False,
) -> None:
    g = torch.Generator().manual_seed(0)
    knobs = knobs_for(defect, PrefillDefect, "flash_fwd")
    batch, heads = (LEAN_BATCH, LEAN_HEADS) if lean else (2, HEADS)
    for cfg in _configs(head_dim, CONFIG_TABLES, first_only or one, fewest_threads):
        for mask in PREFILL_MASKS[:1] if one else PREFILL_MASKS:
            shape = AttentionShape.masked(*heads, head_dim, mask, DTYPE)
            for seq_q, seq_k in PREFILL_LENGTHS[2:3] if one else PREFILL_LENGTHS:

                def rand(seq, n_heads):
                    return (
                        torch.randn(batch, seq, n_heads, head_dim, generator=g)
                        .to(TORCH_DTYPES[DTYPE])
                        .cuda()
                    )

                q, k, v = rand(seq_q, heads[0]), rand(seq_k, heads[1]), rand(seq_k, heads[1])
                _say(f"flash_fwd {shape.name} {cfg.name} seq_q={seq_q} seq_k={seq_k}")
                out = runtime.flash_attention(shape, cfg, q, k, v, knobs=knobs)
                float(out.float().sum())  # read the output back, as a caller would


def _paged(phase: str, head_dim: int, first_only: bool) -> None:
    shape = AttentionShape(*HEADS, head_dim, True, DTYPE)
    decode = phase == "decode"
    case = PagedCase(shape, DECODE_CONTEXTS) if decode else PagedCase(shape, *EXTEND_BATCH)
    tables = DECODE_TABLES if decode else EXTEND_TABLES
    batch = paged_batch(case, "cuda")  # read-only inputs: every config runs on the same batch
    for cfg in _configs(head_dim, tables, first_only):
        _say(f"paged_{phase} {case.name} {cfg.name}")
        out = launch_paged(batch, decode, cfg)
        float(out.float().sum())


def _run(args: argparse.Namespace) -> None:
    if args.one and args.phase == "prefill":
        _prefill(128, args.defect, True, one=True)
    for head_dim in () if args.one else (args.head_dim,) if args.head_dim else HEAD_DIMS:
        if args.phase == "prefill":
            _prefill(
                head_dim,
                args.defect,
                args.first_config,
                lean=args.lean_grid,
                fewest_threads=args.fewest_threads,
            )
        else:
            _paged(args.phase, head_dim, args.first_config)


@contextlib.contextmanager
def builds(
    plain_stores: bool = False, asan: bool = False, cache: Path | None = None
) -> Iterator[AsanHipCompile | None]:
    """How this process builds kernels inside: TileLang's TMA lowering off (``plain_stores``); the
    HIP builds with device ASan (``asan``: tilegate.harness.sanitize.asan_build says why they are
    not TileLang's own build with flags added), their code objects cached in ``cache`` (default:
    tilegate.gate.paths.cache_dir()). Yields the ASan builds' record, or None."""
    saved = dict(runtime.process_pass_configs)
    if plain_stores:
        runtime.process_pass_configs["tl.disable_tma_lower"] = True
    try:
        with asan_builds(cache or cache_dir()) if asan else contextlib.nullcontext() as hook:
            yield hook
    finally:
        runtime.process_pass_configs.clear()
        runtime.process_pass_configs.update(saved)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("phase", choices=PHASES)
    # a misspelt name: PrefillDefect raises ValueError, which argparse reports as an invalid value
    defects = ", ".join(PrefillDefect)
    parser.add_argument(
        "--defect",
        type=PrefillDefect,
        metavar="DEFECT",
        help=f"a planted flash_fwd defect (prefill only): {defects}",
    )
    parser.add_argument(
        "--plain-stores", action="store_true", help="build with TMA lowering off (initcheck)"
    )
    parser.add_argument(
        "--asan",
        action="store_true",
        help="ROCm: build with AddressSanitizer (run with HSA_XNACK=1)",
    )
    parser.add_argument(
        "--first-config", action="store_true", help="only each table's first config"
    )
    parser.add_argument(
        "--fewest-threads",
        action="store_true",
        help="prefill: only each table's config with the fewest threads",
    )
    parser.add_argument(
        "--one", action="store_true", help="prefill: one launch (causal, head_dim 128, seq 129)"
    )
    parser.add_argument(
        "--lean-grid", action="store_true", help="prefill: one sequence, heads 2:1 (racecheck)"
    )
    parser.add_argument(
        "--head-dim", type=int, choices=HEAD_DIMS, help="only this head_dim (default: each)"
    )
    args = parser.parse_args(argv)
    if args.defect and args.phase != "prefill":
        parser.error("--defect plants a flash_fwd defect: use it with 'prefill'")
    with builds(args.plain_stores, args.asan) as asan:
        _run(args)
        # HIP's device ASan also needs HSA_XNACK=1 at run time (driver.run_asan sets it)
        if asan is not None and not asan.built:
            raise SystemExit("--asan: no kernel came through the ASan build (asan_build.py)")
        for reading in asan.built if asan else ():
            _say(f"asan build: {reading.summary()}")
    torch.cuda.synchronize()
    _say("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
