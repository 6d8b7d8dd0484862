"""The bugs the gate's instrumented SGLang plugin plants (tilegate.harness.sglang.registration
registers each as a backend of its own; .instrumented applies them). The end-to-end tiers must fail
every one: the reference adapter's on the CPU engine, the production kernels' on the GPU."""

from __future__ import annotations

from dataclasses import dataclass

from tilegate.gate.planted import CombineDefect, ExtendDefect

REFERENCE = "tilelang-reference"  # the production adapter over the kernels' FP32 torch reference


@dataclass(frozen=True, kw_only=True)
class PlantedBug:
    scale_factor: float = 1.0  # the softmax scale, multiplied
    decode_len_shift: int = 0  # each decode query misses its last keys
    # planted in the extend kernel, the decode combine (tilegate/gate/planted.py)
    extend_defect: ExtendDefect | None = None
    combine_defect: CombineDefect | None = None


# the reference adapter's bugs: the CPU comparisons' self-test
REFERENCE_BUGS = {
    "scale": PlantedBug(scale_factor=1.25),
    "stale_kv": PlantedBug(decode_len_shift=1),
    # keeps the long-context model's greedy tokens, moves logprobs
    "scale10": PlantedBug(scale_factor=1.1),
}
# the production kernels' bugs (GPU)
KERNEL_BUGS = {
    "stale_kv": PlantedBug(decode_len_shift=1),
    "scale10": PlantedBug(scale_factor=1.1),
    "prefix_off_by_one": PlantedBug(extend_defect=ExtendDefect.PREFIX_OFF_BY_ONE),
    "drop_smallest_split": PlantedBug(combine_defect=CombineDefect.DROP_SMALLEST_SPLIT),
}
