"""The SGLang child process: ``python -m tilegate.harness.sglang_child SPEC.json OUT.json``.

Runs in SGLang's python (.venv-sglang on a CPU machine, the gate's own on a GPU machine), started
by tilegate.harness.sglang_driver (serving: tilegate.harness.sglang_serve; the FP32 reference:
tilegate.harness.sglang_reference). It serves the model with each backend of the spec, one engine at
a time, compares nothing itself, and writes everything as JSON (tilegate.harness.sglang_protocol):

  reference     the FP32 Hugging Face greedy tokens per prompt, with each step's top-k logprobs
                (and the prompt rows' logprobs where a prompt asks for them)
  generations   the same per backend and prompt, as SGLang's engine served them
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
from tilegate.harness.sglang_reference import fp32_reference
from tilegate.harness.sglang_serve import CPU_ENGINE_DEFAULTS, Request, engine, serve


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


def _model_path(which: str) -> str:
    """"trained": the trained tiny Llama-3 (built and trained once per machine, cached);
    "long-context": the tiny Llama-3 trained for retrieval (fixtures/long_context_llama.py);
    "tiny": the random one; "llama3-8b-shape": a config without weights (load_format="dummy");
    anything else: a checkpoint folder (a local Meta-Llama-3)."""
    from tilegate.fixtures import llama3_shape, long_context_llama, tiny_llama, tiny_llama_train

    if which == "trained":
        return str(tiny_llama_train.ensure_trained_tiny_llama())
    if which == "long-context":
        return str(long_context_llama.ensure_long_context_llama())
    if which == "llama3-8b-shape":
        return str(llama3_shape.ensure_llama3_8b_shape())
    if which == "tiny":
        return str(tiny_llama.ensure_tiny_llama(tiny_llama.TINY_LLAMA))
    return which


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
        ids = long_prompt_ids(tok, CORPUS, p["corpus_tokens"]) if "corpus_tokens" in p else tok(p["text"])["input_ids"]
        start = p.get("logprob_start")
        return Request(ids, p.get("max_new_tokens", default_new), None if start is None else start % len(ids))

    return [[request(p) for p in prompts] for prompts in rounds]


def _retrieval_requests(model: str, long_context: dict) -> list[tuple[Request, list[int]]]:
    """(request, expected continuation) per retrieval prompt of the spec's "long_context"."""
    from transformers import AutoTokenizer

    from tilegate.fixtures.long_context_llama import retrieval_prompt

    tok = AutoTokenizer.from_pretrained(model)
    out = []
    for p in long_context["prompts"]:
        ids, want = retrieval_prompt(tok, p["tokens"], p["seed"], span_at=p["span_at"], span_len=long_context["span_len"],
                                     prefix=long_context["prefix"])
        out.append((Request(ids, len(want), p.get("logprob_start")), want))
    return out


def _use_marker_dir(folder: Path) -> Path:
    """SGLang processes started from now on (they inherit the environment) record into ``folder``,
    and so does the plugin here: a later phase's markers stay apart from the earlier ones."""
    folder.mkdir(exist_ok=True)
    os.environ[proto.MARKER_DIR_ENV] = str(folder)
    return folder


def _long_context(spec: dict, top_k: int, *, device: str, dtype: str, kw: dict, marker_dir: Path) -> dict:
    """The spec's "long_context": retrieval prompts on their model, its FP32 reference (unless
    "reference" is false), then each backend, every prompt in one batch, generating the answer's
    length, with the phase's "engine_kwargs" over the child's. Runs after the main engines, its
    markers in ``marker_dir``."""
    t0 = time.monotonic()
    model = _model_path(spec["model"])
    pairs = _retrieval_requests(model, spec)
    requests = [r for r, _ in pairs]
    out: dict = {"model": model, "generations": {}, "timings": {"model_s": time.monotonic() - t0},
                 "prompts": [{"name": p["name"], "ids_len": len(r.ids), "expected": want, "logprob_start": r.logprob_start}
                             for p, (r, want) in zip(spec["prompts"], pairs)]}
    if spec.get("reference", True):
        t0 = time.monotonic()
        out["reference"] = fp32_reference(model, [requests], top_k, device, attention="chunked")[0]
        out["timings"]["reference_s"] = time.monotonic() - t0
    _use_marker_dir(marker_dir)
    kw = kw | spec.get("engine_kwargs", {})
    for backend in spec["backends"]:
        generations, out["timings"][backend], _ = serve(model, backend, [requests], top_k, device=device, dtype=dtype,
                                                        kw=kw)
        out["generations"][backend] = generations[0]
    out["markers"] = _read_markers(marker_dir)
    return out


def _start_broken(spec_name: str) -> int:
    """Grandchild: start an engine that must refuse the model. SGLang's engine answers a
    scheduler that died at start-up by killing its own process tree (SIGQUIT, then SIGKILL), so
    this runs in a process of its own; its parent reads the exit code and the log."""
    from tilegate.fixtures import tiny_llama

    # context 1024: the broken variants keep the random model's 2048 positions
    kw: dict = CPU_ENGINE_DEFAULTS | {"context_length": 1024}
    eng = engine(str(tiny_llama.ensure_tiny_llama(getattr(tiny_llama, spec_name))), "tilelang", **kw)
    print("TILEGATE: engine started", flush=True)
    eng.shutdown()
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
    "seed": S, "span_at": F, "logprob_start": R}, ...], "span_len": L, "prefix": P, "backends": [...],
    "reference": true, "engine_kwargs": {...}}}; a prompt is as _requests reads it. Each round is one
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
    device, top_k = spec.get("device", "cpu"), spec.get("top_k", 5)

    t_run = t0 = time.monotonic()
    model = _model_path(spec.get("model", "tiny"))
    rounds = _requests(model, spec["rounds"], spec["max_new_tokens"])
    result: dict = {"pid": os.getpid(), "model": model, "prompt_ids_len": [[len(r.ids) for r in rs] for rs in rounds],
                    "generations": {}, "errors": {}, "timings": {"model_s": time.monotonic() - t0}}
    if spec.get("reference"):
        t0 = time.monotonic()
        result["reference"] = fp32_reference(model, rounds, top_k, device)
        result["timings"]["reference_s"] = time.monotonic() - t0
    kw = (CPU_ENGINE_DEFAULTS if device == "cpu" else {}) | spec.get("engine_kwargs", {})
    dtype = spec.get("dtype", "float32")
    for backend in spec.get("backends", []):
        result["generations"][backend], result["timings"][backend], chosen = serve(
            model, backend, rounds, top_k, device=device, dtype=dtype, kw=kw)
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

        result["bench"] = sglang_bench.run(model, spec["bench"], lambda backend, **extra: engine(
            model, backend, device=device, dtype=dtype, **(kw | extra)))
    result["timings"]["total_s"] = time.monotonic() - t_run
    out_path.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
