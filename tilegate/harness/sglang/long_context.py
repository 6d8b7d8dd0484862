"""The long-context phase of the SGLang child (tilegate.harness.sglang.child): retrieval prompts
(retrieval_prompt, fixtures/long_context_task.py) on their model, its FP32 reference, then
each backend, every prompt in one batch, generating the answer's length."""

from __future__ import annotations

import time
from pathlib import Path

from tilegate.harness.sglang.observations import read_markers, use_marker_dir
from tilegate.harness.sglang.reference import fp32_reference
from tilegate.harness.sglang.serve import Request, model_path, serve


def retrieval_requests(model: str, long_context: dict) -> list[tuple[Request, list[int]]]:
    """(request, expected continuation) per retrieval prompt of the spec's "long_context"."""
    from transformers import AutoTokenizer

    from tilegate.fixtures.long_context_llama import retrieval_prompt

    tok = AutoTokenizer.from_pretrained(model)
    out = []
    for p in long_context["prompts"]:
        ids, want = retrieval_prompt(
            tok,
            p["tokens"],
            p["seed"],
            span_at=p["span_at"],
            span_len=long_context["span_len"],
            prefix=long_context["prefix"],
        )
        out.append((Request(ids, len(want), p.get("logprob_start")), want))
    return out


def run(spec: dict, top_k: int, *, device: str, dtype: str, kw: dict, marker_dir: Path) -> dict:
    """The spec's "long_context": its FP32 reference (unless "reference" is false), then each of
    its "backends", with the phase's "engine_kwargs" over ``kw``. The engines' markers go to
    ``marker_dir`` (apart from any earlier phase's)."""
    t0 = time.monotonic()
    model = model_path(spec["model"])
    pairs = retrieval_requests(model, spec)
    requests = [r for r, _ in pairs]
    out: dict = {
        "model": model,
        "generations": {},
        "timings": {"model_s": time.monotonic() - t0},
        "prompts": [
            {
                "name": p["name"],
                "ids_len": len(r.ids),
                "expected": want,
                "logprob_start": r.logprob_start,
            }
            for p, (r, want) in zip(spec["prompts"], pairs)
        ],
    }
    if spec.get("reference", True):
        t0 = time.monotonic()
        out["reference"] = fp32_reference(model, [requests], top_k, device, attention="chunked")[0]
        out["timings"]["reference_s"] = time.monotonic() - t0
    use_marker_dir(marker_dir)
    kw = kw | spec.get("engine_kwargs", {})
    for backend in spec["backends"]:
        generations, out["timings"][backend], _ = serve(
            model, backend, [requests], top_k, device=device, dtype=dtype, kw=kw
        )
        out["generations"][backend] = generations[0]
    out["markers"] = read_markers(marker_dir)
    return out
