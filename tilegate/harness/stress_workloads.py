"""The stress tier's launches: each phase on a stress case's inputs, ready to repeat
(tilegate/harness/stress.py), and the FP32 judge of its first output."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from tilegate.fixtures.shapes import baseline, reference
from tilegate.fixtures.stress_cases import StressCase, dense_inputs, paged_inputs
from tilegate.gate.planted import CombineDefect, Defect, ExtendDefect, PrefillDefect, knobs_for
from tilegate.references.metrics import Verdict, judge
from tilegate.references.paged import baseline_paged_extend, ref_paged_decode, ref_paged_extend
from tilegate.runtime import flash_attention
from tilegate.serving.batch_indices import prepare_decode, prepare_extend
from tilegate.serving.paged import decode_batch, extend_batch


@dataclass(frozen=True)
class StressWorkload:
    """``launch()`` runs the kernel on fixed inputs into one output buffer, refilled with NaN first
    (an element it skips cannot keep the last launch's value); ``judge(out)`` against FP32."""

    launch: Callable[[], torch.Tensor]
    judge: Callable[[torch.Tensor], Verdict]


def workload(case: StressCase, cfg, device: str, defect: Defect | None = None) -> StressWorkload:
    """``defect`` is planted in the case's kernel, which refuses one of another family's enumeration
    (prefill: PrefillDefect, extend: ExtendDefect, decode: CombineDefect)."""
    if case.phase == "prefill":
        return _prefill(case, cfg, device, defect)
    return _paged(case, cfg, device, defect)


def _prefill(case: StressCase, cfg, device: str, defect) -> StressWorkload:
    s = case.shape
    q, k, v = dense_inputs(case, device)
    out = torch.empty_like(q)

    def launch() -> torch.Tensor:
        out.fill_(float("nan"))
        return flash_attention(s, cfg, q, k, v, out=out, knobs=knobs_for(defect, PrefillDefect))

    return StressWorkload(
        launch,
        lambda o: judge(o, reference(s, q, k, v), baseline(s, q, k, v)),
    )


def _paged(case: StressCase, cfg, device: str, defect) -> StressWorkload:
    decode = case.phase == "decode"
    batch = paged_inputs(case, device)
    args = batch.args(decode)
    index_args = (batch.req_to_token, batch.req_pool_indices, batch.seq_lens)
    meta = (
        prepare_decode(*index_args, device)
        if decode
        else prepare_extend(*index_args, batch.extend_lens, device)
    )
    out = torch.empty_like(batch.q)
    step = decode_batch if decode else extend_batch
    knobs = knobs_for(defect, CombineDefect if decode else ExtendDefect)

    def launch() -> torch.Tensor:
        out.fill_(float("nan"))
        return step(meta, batch.q, batch.k_pool, batch.v_pool, cfg=cfg, knobs=knobs, out=out)

    def judge_out(o: torch.Tensor) -> Verdict:
        ref = ref_paged_decode(*args) if decode else ref_paged_extend(*args)
        # decode is extend with one new token each
        return judge(o, ref, baseline_paged_extend(*batch.args(False)))

    return StressWorkload(launch, judge_out)
