"""The SGLang child process: ``python -m tilegate.harness.sglang_child SPEC.json OUT.json``.

Runs in SGLang's python (.venv-sglang on a CPU machine, the runner's on the MI300X), started by
tilegate.harness.sglang_driver. It serves the model with each backend of the spec, one engine at
a time, compares nothing itself, and writes everything as JSON (tilegate.harness.sglang_protocol):

  reference     the FP32 Hugging Face greedy tokens per prompt, with each step's top-k logprobs
  generations   greedy token ids per backend and prompt, with each step's top-k logprobs
  errors        per broken configuration: what SGLang's engine start said
  markers       what the instrumented plugin and backend recorded in each SGLang process
  long_context  the same for the long-context model's retrieval prompts, served after the rest
                (its prompts' lengths and expected answers, reference, generations, markers)
  timings       seconds per phase and engine, and the whole run's
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tilegate.harness import sglang_protocol as proto


def _read_markers(folder: Path) -> dict:
    """Each SGLang process's records (tilegate.harness.sglang_instrumented): where the plugin
    registered, and each backend built and the first extend and decode it served."""
    out: dict = {"registered_pids": [], "backend": []}
    for path in sorted(folder.iterdir()):
        records = [json.loads(line) for line in path.read_text().splitlines() if line]
        if path.name.startswith("registered-"):
            out["registered_pids"] += [r["pid"] for r in records]
        elif path.name.startswith("backend-"):
            out["backend"] += records
    return out


def _generate(engine, prompt_ids: list[list[int]], max_new_tokens: int, top_k: int) -> list[dict]:
    """One batched greedy call on token ids; per prompt: the greedy token ids, each step's top-k
    as [[token, logprob], ...] (best first) and its top-1 minus top-2 logprob."""
    params = {"temperature": 0.0, "max_new_tokens": max_new_tokens, "ignore_eos": True}
    outs = engine.generate(input_ids=prompt_ids, sampling_params=params, return_logprob=True,
                           top_logprobs_num=top_k)
    results = []
    for out in outs:
        meta = out["meta_info"]
        tokens = [int(t[1]) for t in meta["output_token_logprobs"]]
        tops, gaps = [], []
        for step in meta["output_top_logprobs"]:  # per step: (logprob, token id, text) tuples, best first
            top = [[int(tok), float(lp)] for lp, tok, *_ in step]
            tops.append(top)
            gaps.append(top[0][1] - top[1][1])
        results.append({"tokens": tokens, "top": tops, "gaps": gaps,
                        "prompt_tokens": int(meta.get("prompt_tokens", -1)),
                        "cached_tokens": int(meta.get("cached_tokens", -1))})
    return results


def _model_path(which: str) -> str:
    """"trained": the trained tiny Llama-3 (built and trained once per machine, cached);
    "long-context": the tiny Llama-3 trained for retrieval (fixtures/long_context_llama.py);
    "tiny": the random one; anything else: a checkpoint folder (a local Meta-Llama-3)."""
    from tilegate.fixtures import long_context_llama, tiny_llama, tiny_llama_train

    if which == "trained":
        return str(tiny_llama_train.ensure_trained_tiny_llama())
    if which == "long-context":
        return str(long_context_llama.ensure_long_context_llama())
    if which == "tiny":
        return str(tiny_llama.ensure_tiny_llama(tiny_llama.TINY_LLAMA))
    return which


def _prompt_ids(model: str, rounds: list[list]) -> list[list[list[int]]]:
    """Token ids of every prompt, tokenized once here so SGLang and the FP32 reference see the
    same ids. A prompt is a text, or {"corpus_tokens": N}: the fixture corpus repeated to N tokens."""
    from transformers import AutoTokenizer

    from tilegate.fixtures.prompts import long_prompt_ids
    from tilegate.fixtures.tiny_llama import CORPUS

    tok = AutoTokenizer.from_pretrained(model)
    return [[long_prompt_ids(tok, CORPUS, p["corpus_tokens"]) if isinstance(p, dict) else tok(p)["input_ids"]
             for p in prompts] for prompts in rounds]


def _retrieval_prompts(model: str, long_context: dict) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, expected continuation) per retrieval prompt of the spec's "long_context"."""
    from transformers import AutoTokenizer

    from tilegate.fixtures.long_context_llama import retrieval_prompt

    tok = AutoTokenizer.from_pretrained(model)
    return [retrieval_prompt(tok, p["tokens"], p["seed"], span_at=p["span_at"], span_len=long_context["span_len"],
                             prefix=long_context["prefix"]) for p in long_context["prompts"]]


def _fp32_reference(model: str, ids: list[list[list[int]]], max_new_tokens: int, top_k: int, device: str,
                    attention: str = "sdpa") -> list:
    """Hugging Face transformers, FP32: greedy with the top-k of every step. ``attention``
    "chunked": the gate's FP32 reference attention (tilegate.serving.hf_attention), query rows in
    chunks, for long prompts: transformers' sdpa in float32 builds the whole score matrix for GQA."""
    import torch

    from tilegate.harness.hf_runner import HfRunner

    if attention == "chunked":
        from tilegate.references.transformers_attention import REFERENCE_IMPLEMENTATION, reference_attention_function, register

        attention = register(REFERENCE_IMPLEMENTATION, reference_attention_function())
    with HfRunner(model, torch.float32, attention, device) as ref:
        out = []
        for prompts in ids:
            runs = [ref.greedy(p, max_new_tokens, top_k) for p in prompts]
            out.append([{"tokens": list(r.tokens), "top": [sorted(([t, lp] for t, lp in s.items()),
                                                                   key=lambda x: -x[1]) for s in r.top_logprobs]}
                        for r in runs])
    return out


# Small pools and no warm-up: the default KV pool on a CPU is sized from free memory (~50 s
# to allocate here); 4096 tokens is plenty for the tests' prompts.
# 8192 pool tokens and a 4096 context hold the long prompt (~2k tokens) beside the short ones.
ENGINE_DEFAULTS = {"max_total_tokens": 8192, "context_length": 4096, "max_running_requests": 8,
                   "disable_cuda_graph": True, "skip_server_warmup": True, "log_level": "error"}


def _engine(model_path: str, backend: str, *, device: str = "cpu", dtype: str = "float32", **kw):
    """backend "default": SGLang picks its default attention backend for the platform."""
    import sglang

    chosen = {} if backend == "default" else {"attention_backend": backend}
    return sglang.Engine(model_path=model_path, device=device, dtype=dtype, tp_size=1, random_seed=0,
                         **chosen, **kw)


def _serve(model: str, backend: str, ids: list[list[list[int]]], new: int, top_k: int, *, device: str, dtype: str,
           kw: dict) -> tuple[list, dict, str]:
    """One engine serving ``model`` with ``backend``, each round one batched greedy call on it.
    Returns the generations per round, the start and generate seconds, and the backend SGLang ran."""
    t0 = time.monotonic()
    engine = _engine(model, backend, device=device, dtype=dtype, **kw)
    t1 = time.monotonic()
    try:
        generations = [_generate(engine, prompts, new, top_k) for prompts in ids]
        chosen = engine.server_args.attention_backend
    finally:
        engine.shutdown()
    return generations, {"start_s": t1 - t0, "generate_s": time.monotonic() - t1}, chosen


def _use_marker_dir(folder: Path) -> Path:
    """SGLang processes started from now on (they inherit the environment) record into ``folder``,
    and so does the plugin here: a later phase's markers stay apart from the earlier ones."""
    folder.mkdir(exist_ok=True)
    os.environ[proto.MARKER_DIR_ENV] = str(folder)
    return folder


def _long_context(spec: dict, top_k: int, *, device: str, dtype: str, kw: dict, marker_dir: Path) -> dict:
    """The spec's "long_context": retrieval prompts on their model, its FP32 reference, then each
    backend, every prompt in one batch, generating the answer's length. Runs after the main
    engines, its markers in ``marker_dir``."""
    t0 = time.monotonic()
    model = _model_path(spec["model"])
    prompts = _retrieval_prompts(model, spec)
    ids = [p for p, _ in prompts]
    new = spec["span_len"] - spec["prefix"]  # the rest of the span: the answer
    out: dict = {"model": model, "generations": {}, "timings": {"model_s": time.monotonic() - t0},
                 "prompts": [{"name": p["name"], "ids_len": len(i), "expected": want}
                             for p, (i, want) in zip(spec["prompts"], prompts)]}
    t0 = time.monotonic()
    out["reference"] = _fp32_reference(model, [ids], new, top_k, device, attention="chunked")[0]
    out["timings"]["reference_s"] = time.monotonic() - t0
    _use_marker_dir(marker_dir)
    for backend in spec["backends"]:
        generations, out["timings"][backend], _ = _serve(model, backend, [ids], new, top_k, device=device,
                                                         dtype=dtype, kw=kw)
        out["generations"][backend] = generations[0]
    out["markers"] = _read_markers(marker_dir)
    return out


def _start_broken(spec_name: str) -> int:
    """Grandchild: start an engine that must refuse the model. SGLang's engine answers a
    scheduler that died at start-up by killing its own process tree (SIGQUIT, then SIGKILL), so
    this runs in a process of its own; its parent reads the exit code and the log."""
    from tilegate.fixtures import tiny_llama

    # context 1024: the broken variants keep the random model's 2048 positions
    kw: dict = ENGINE_DEFAULTS | {"context_length": 1024}
    engine = _engine(str(tiny_llama.ensure_tiny_llama(getattr(tiny_llama, spec_name))), "tilelang", **kw)
    print("TILEGATE: engine started", flush=True)
    engine.shutdown()
    return 0


def _start_broken_process(label: str, spec_name: str, workdir: Path):
    log_path = workdir / f"broken-{label}.log"
    log = open(log_path, "w")  # noqa: SIM115  # closed by _collect_broken, after the process ends
    proc = subprocess.Popen([sys.executable, "-m", "tilegate.harness.sglang_child", "--start-broken", spec_name],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return proc, log, log_path, time.monotonic()


def _collect_broken(proc, log, log_path: Path, t0: float) -> dict:
    try:
        returncode = proc.wait(timeout=600)
    finally:
        log.close()
    text = log_path.read_text()
    reasons = [line.strip() for line in text.splitlines() if "UnsupportedByTileLangBackend:" in line]
    return {"returncode": returncode, "started": "TILEGATE: engine started" in text,
            "reasons": reasons, "log": str(log_path), "wall_s": time.monotonic() - t0}


def main(argv: list[str]) -> int:
    """spec.json: {"model": "trained", "rounds": [[prompt, ...], ...], "max_new_tokens": N, "top_k": K,
    "backends": ["torch_native", "tilelang-reference", "tilelang-reference-planted-stale_kv"], "reference": true,
    "broken": {"head-dim-32": "TINY_LLAMA_HEAD_DIM_32"}, "device": "cpu", "dtype": "float32",
    "engine_kwargs": {...}, "long_context": {"model": "long-context", "prompts": [{"name": ..., "tokens": N,
    "seed": S, "span_at": F}, ...], "span_len": L, "prefix": P, "backends": [...]}}. Each round is one
    batched generate call on the same engine, so a later round whose prompts extend an earlier
    one's reaches SGLang's radix cache: an extend over a cached prefix. "reference" adds the FP32
    transformers run of the same prompt ids (before the engines, so on a GPU it has the memory to
    itself). Backend "default": SGLang's own choice for the platform; the tilelang-reference names
    are the instrumented plugin's (tilegate.harness.sglang_instrumented). Each broken model is
    started in a process of its own. "long_context" runs last, with markers of its own
    (_long_context), so the first phase's records read as they did without it; "bench" (a serving
    benchmark: tilegate.harness.sglang_bench) after it."""
    if argv[0] == "--start-broken":
        return _start_broken(argv[1])
    spec_path, out_path = Path(argv[0]), Path(argv[1])
    spec = json.loads(spec_path.read_text())
    marker_dir = Path(os.environ[proto.MARKER_DIR_ENV])
    device, top_k, new = spec.get("device", "cpu"), spec.get("top_k", 5), spec["max_new_tokens"]

    t_run = t0 = time.monotonic()
    model = _model_path(spec.get("model", "tiny"))
    ids = _prompt_ids(model, spec["rounds"])
    result: dict = {"pid": os.getpid(), "model": model, "prompt_ids_len": [[len(p) for p in r] for r in ids],
              "generations": {}, "errors": {}, "timings": {"model_s": time.monotonic() - t0}}
    if spec.get("reference"):
        t0 = time.monotonic()
        result["reference"] = _fp32_reference(model, ids, new, top_k, device)
        result["timings"]["reference_s"] = time.monotonic() - t0
    kw = (ENGINE_DEFAULTS if device == "cpu" else {}) | spec.get("engine_kwargs", {})
    dtype = spec.get("dtype", "float32")
    for backend in spec.get("backends", []):
        result["generations"][backend], result["timings"][backend], chosen = _serve(
            model, backend, ids, new, top_k, device=device, dtype=dtype, kw=kw)
        if backend == "default":
            result["default_backend"] = chosen
    # after the good engines, not alongside: on 2 cores two SGLang start-ups only slow each other
    for label, spec_name in spec.get("broken", {}).items():
        result["errors"][label] = _collect_broken(*_start_broken_process(label, spec_name, out_path.parent))
    result["markers"] = _read_markers(marker_dir)
    if "long_context" in spec:
        t0 = time.monotonic()
        result["long_context"] = _long_context(spec["long_context"], top_k, device=device, dtype=dtype, kw=kw,
                                               marker_dir=out_path.parent / "markers-long-context")
        result["timings"]["long_context_s"] = time.monotonic() - t0
    if "bench" in spec:  # tilegate.harness.sglang_bench: the serving benchmark, alone on the device
        from tilegate.harness import sglang_bench

        result["bench"] = sglang_bench.run(model, spec["bench"], lambda backend, **extra: _engine(
            model, backend, device=device, dtype=dtype, **(kw | extra)))
    result["timings"]["total_s"] = time.monotonic() - t_run
    out_path.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
