"""The SGLang child process: ``python -m tilegate.harness.sglang_child SPEC.json OUT.json``.

Runs in SGLang's python (.venv-sglang on a CPU machine, the runner's on the MI300X), started by
tilegate.harness.sglang_driver. It serves the model with each backend of the spec, one engine at
a time, compares nothing itself, and writes everything as JSON (tilegate.harness.sglang_protocol):

  reference     the FP32 Hugging Face greedy tokens per prompt, with each step's top-k logprobs
  generations   greedy token ids per backend and prompt, with each step's top-k logprobs
  errors        per broken configuration: what SGLang's engine start said
  markers       what the instrumented plugin and backend recorded in each SGLang process
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
    "tiny": the random one; anything else: a checkpoint folder (a local Meta-Llama-3)."""
    from tilegate.fixtures import tiny_llama, tiny_llama_train

    if which == "trained":
        return str(tiny_llama_train.ensure_trained_tiny_llama())
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


def _fp32_reference(model: str, ids: list[list[list[int]]], max_new_tokens: int, top_k: int, device: str) -> list:
    """Hugging Face transformers, FP32, sdpa attention: greedy with the top-k of every step."""
    import torch

    from tilegate.harness.hf_runner import HfRunner

    with HfRunner(model, torch.float32, "sdpa", device) as ref:
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


def _engine(model_path: str, backend: str | None, *, device: str = "cpu", dtype: str = "float32", **kw):
    """backend None: SGLang picks its default attention backend for the platform."""
    import sglang

    chosen = {} if backend is None else {"attention_backend": backend}
    return sglang.Engine(model_path=model_path, device=device, dtype=dtype, tp_size=1, random_seed=0,
                         **chosen, **kw)


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
    "engine_kwargs": {...}}. Each round is one batched generate call on the same engine, so a
    later round whose prompts extend an earlier one's reaches SGLang's radix cache: an extend
    over a cached prefix. "reference" adds the FP32 transformers run of the same prompt ids
    (before the engines, so on a GPU it has the memory to itself). Backend "default": SGLang's
    own choice for the platform; the tilelang-reference names are the instrumented plugin's
    (tilegate.harness.sglang_instrumented). Each broken model is started in a process of its own."""
    if argv[0] == "--start-broken":
        return _start_broken(argv[1])
    spec_path, out_path = Path(argv[0]), Path(argv[1])
    spec = json.loads(spec_path.read_text())
    marker_dir = Path(os.environ[proto.MARKER_DIR_ENV])
    device, top_k, new = spec.get("device", "cpu"), spec.get("top_k", 5), spec["max_new_tokens"]

    t0 = time.monotonic()
    model = _model_path(spec.get("model", "tiny"))
    ids = _prompt_ids(model, spec["rounds"])
    result: dict = {"pid": os.getpid(), "model": model, "prompt_ids_len": [[len(p) for p in r] for r in ids],
              "generations": {}, "errors": {}, "timings": {"model_s": time.monotonic() - t0}}
    if spec.get("reference"):
        t0 = time.monotonic()
        result["reference"] = _fp32_reference(model, ids, new, top_k, device)
        result["timings"]["reference_s"] = time.monotonic() - t0
    kw = (ENGINE_DEFAULTS if device == "cpu" else {}) | spec.get("engine_kwargs", {})
    for backend in spec.get("backends", []):
        t0 = time.monotonic()
        engine = _engine(model, None if backend == "default" else backend, device=device,
                         dtype=spec.get("dtype", "float32"), **kw)
        t1 = time.monotonic()
        try:
            result["generations"][backend] = [_generate(engine, prompts, new, top_k) for prompts in ids]
            if backend == "default":
                result["default_backend"] = engine.server_args.attention_backend
        finally:
            engine.shutdown()
        result["timings"][backend] = {"start_s": t1 - t0, "generate_s": time.monotonic() - t1}
    # after the good engines, not alongside: on 2 cores two SGLang start-ups only slow each other
    for label, spec_name in spec.get("broken", {}).items():
        result["errors"][label] = _collect_broken(*_start_broken_process(label, spec_name, out_path.parent))
    result["markers"] = _read_markers(marker_dir)
    out_path.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
