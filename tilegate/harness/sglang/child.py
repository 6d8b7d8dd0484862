"""The SGLang child process: ``python -m tilegate.harness.sglang.child SPEC.json OUT.json``.

Runs in SGLang's python (.venv-sglang on a CPU machine, the gate's own on a GPU machine), started
by tilegate.harness.sglang.driver (serving: tilegate.harness.sglang.serve; the FP32 reference:
tilegate.harness.sglang.reference; the long-context phase: .long_context; the models that must be
refused: .broken). It serves the model with each backend of the spec, one engine at a time, compares
nothing itself, and writes everything as JSON (tilegate.harness.sglang.protocol):

  reference     the FP32 Hugging Face greedy tokens per prompt, with each step's top-k logprobs
                (and the prompt rows' logprobs where a prompt asks for them)
  generations   the same per backend and prompt, as SGLang's engine served them
  errors        per broken configuration: what SGLang's engine start said
  markers       what the instrumented plugin and backend recorded in each SGLang process
  long_context  the same for the long-context model's retrieval prompts, served after the rest
                (its prompts' lengths and expected answers, reference, generations, markers)
  timings       seconds per phase and engine, and the whole run's

A spec without "rounds" has no first phase: the CPU tier runs its long-context phase in a child of
its own (tilegate.fixtures.e2e_prompts.LONG_CONTEXT_SPEC), beside the first one.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from tilegate.harness.sglang import broken as broken_engines
from tilegate.harness.sglang import long_context as long_context_phase
from tilegate.harness.sglang import protocol as proto
from tilegate.harness.sglang.observations import read_markers, use_marker_dir
from tilegate.harness.sglang.reference import fp32_reference
from tilegate.harness.sglang.serve import CPU_ENGINE_DEFAULTS, Request, engine, model_path, serve


def _requests(model: str, rounds: list[list], default_new: int) -> list[list[Request]]:
    """Every prompt as token ids, tokenized once here so SGLang and the FP32 reference see the same
    ids. A prompt is a text, {"corpus_tokens": N} (the fixture corpus repeated to N tokens), or a
    dict with "text" or "corpus_tokens" and optionally "max_new_tokens" and "logprob_start" (a
    negative start counts from the prompt's end)."""
    if not any(rounds):
        return [[] for _ in rounds]  # a benchmark-only spec: its model may have no tokenizer
    from transformers import AutoTokenizer

    from tilegate.fixtures.prompts import long_prompt_ids
    from tilegate.fixtures.tiny_llama import CORPUS

    tok = AutoTokenizer.from_pretrained(model)

    def request(p) -> Request:
        p = {"text": p} if isinstance(p, str) else p
        ids = (
            long_prompt_ids(tok, CORPUS, p["corpus_tokens"])
            if "corpus_tokens" in p
            else tok(p["text"])["input_ids"]
        )
        start = p.get("logprob_start")
        return Request(
            ids, p.get("max_new_tokens", default_new), None if start is None else start % len(ids)
        )

    return [[request(p) for p in prompts] for prompts in rounds]


def _first_phase(spec: dict, top_k: int, *, device: str, dtype: str, kw: dict) -> dict:
    """The spec's model, its prompts tokenized once, the FP32 reference (if asked), then each
    backend."""
    t0 = time.monotonic()
    model = model_path(spec.get("model", "tiny"))
    rounds = _requests(model, spec["rounds"], spec["max_new_tokens"])
    out: dict = {
        "model": model,
        "prompt_ids_len": [[len(r.ids) for r in rs] for rs in rounds],
        "generations": {},
        "timings": {"model_s": time.monotonic() - t0},
    }
    if spec.get("reference"):
        t0 = time.monotonic()
        out["reference"] = fp32_reference(model, rounds, top_k, device)
        out["timings"]["reference_s"] = time.monotonic() - t0
    for backend in spec.get("backends", []):
        out["generations"][backend], out["timings"][backend], chosen = serve(
            model, backend, rounds, top_k, device=device, dtype=dtype, kw=kw
        )
        if backend == "default":
            out["default_backend"] = chosen
    return out


def main(argv: list[str]) -> int:
    """spec.json: {"model": "trained", "rounds": [[prompt, ...], ...], "max_new_tokens": N,
    "top_k": K, "backends": ["torch_native", "tilelang-reference",
    "tilelang-reference-planted-stale_kv"], "reference": true, "broken": {"head-dim-32":
    "TINY_LLAMA_HEAD_DIM_32"}, "device": "cpu", "dtype": "float32", "engine_kwargs": {...},
    "long_context": {"model": "long-context", "prompts": [{"name": ..., "tokens": N, "seed": S,
    "span_at": F, "logprob_start": R}, ...], "span_len": L, "prefix": P, "backends": [...],
    "reference": true, "engine_kwargs": {...}}}; a prompt is as _requests reads it. Each round is
    one batched generate call on the same engine, so a later round whose prompts extend an
    earlier one's reaches SGLang's radix cache: an extend over a cached prefix. "reference" adds
    the FP32 transformers run of the same prompt ids (before the engines, so on a GPU it has the
    memory to itself). Backend "default": SGLang's own choice for the platform; the
    tilelang-reference names are the instrumented plugin's (tilegate.harness.sglang.registration
    and .instrumented). Each broken model is started in a process of its own
    (tilegate.harness.sglang.broken), launched first and collected after the good engines, so
    that its start-up overlaps theirs. "long_context" runs last, with markers of its own
    (tilegate.harness.sglang.long_context), so the first phase's records read as they did without
    it; "bench" (a serving benchmark: tilegate.harness.sglang.bench) after it."""
    spec_path, out_path = Path(argv[0]), Path(argv[1])
    spec = json.loads(spec_path.read_text())
    marker_dir = Path(os.environ[proto.MARKER_DIR_ENV])
    device, top_k, dtype = (
        spec.get("device", "cpu"),
        spec.get("top_k", 5),
        spec.get("dtype", "float32"),
    )
    kw = (CPU_ENGINE_DEFAULTS if device == "cpu" else {}) | spec.get("engine_kwargs", {})

    t_run = time.monotonic()
    broken = {
        label: broken_engines.start(label, name, out_path.parent)
        for label, name in spec.get("broken", {}).items()
    }
    result: dict = {"pid": os.getpid(), "generations": {}, "errors": {}, "timings": {}}
    try:
        if "rounds" in spec:
            result |= _first_phase(spec, top_k, device=device, dtype=dtype, kw=kw)
        # their markers land beside the first phase's, as they always did
        for label, started in broken.items():
            result["errors"][label] = broken_engines.collect(started)
    finally:  # detached, they would outlive a child that failed meanwhile
        for started in broken.values():
            broken_engines.stop(started)
    result["markers"] = read_markers(marker_dir)
    if "long_context" in spec:
        t0 = time.monotonic()
        result["long_context"] = long_context_phase.run(
            spec["long_context"],
            top_k,
            device=device,
            dtype=dtype,
            kw=kw,
            marker_dir=out_path.parent / "markers-long-context",
        )
        result["timings"]["long_context_s"] = time.monotonic() - t0
    if "bench" in spec:  # tilegate.harness.sglang.bench: the serving benchmark, alone on the device
        from tilegate.harness.sglang import bench as sglang_bench

        # its engines' own markers: with the production plugin alone (EngineRun(observed=False))
        # none is written, which the benchmark's callers check
        bench_markers = use_marker_dir(out_path.parent / "markers-bench")
        model = result.get("model") or model_path(spec.get("model", "tiny"))
        result["bench"] = sglang_bench.run(
            model,
            spec["bench"],
            lambda backend, **extra: engine(
                model, backend, device=device, dtype=dtype, **(kw | extra)
            ),
        )
        result["bench_markers"] = read_markers(bench_markers)
    result["timings"]["total_s"] = time.monotonic() - t_run
    out_path.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
