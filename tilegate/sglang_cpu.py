"""SGLang's real engine on the CPU, driven from the gate's own pytest process.

SGLang 0.5.23 lives in its own venv (``.venv-sglang``, scripts/install-sglang-cpu.sh): it pins
torch 2.14.1 while the gate runs torch 2.13. The tests therefore start one subprocess with that
venv's python (``python -m tilegate.sglang_cpu SPEC.json OUT.json``), which tokenizes the prompts
once, runs the FP32 transformers reference on those ids, serves the (trained) tiny Llama-3 with
each backend asked for, one engine at a time, and writes everything as JSON:

  reference     the FP32 Hugging Face greedy tokens per prompt, with each step's top-k logprobs
  generations   greedy token ids per backend and prompt, with each step's top-k logprobs
  errors        per broken configuration: the exception SGLang's engine start raised
  markers       what the plugin and the backend wrote in each SGLang process (pid, mode, class)

Driver side (the gate's python): ``venv_python``, ``missing_reason``, ``EngineRun``.
Child side (the venv's python): ``main``; imports SGLang only there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tilegate import REPO_ROOT

VENV = Path(os.environ.get("TILEGATE_SGLANG_VENV", REPO_ROOT / ".venv-sglang"))
INSTALL_HINT = "run scripts/install-sglang-cpu.sh"


def venv_python() -> Path:
    return VENV / "bin" / "python"


def missing_reason() -> str | None:
    """One line naming what is missing, or None when the SGLang CPU venv is there. Only the
    venv's absence is a reason to skip: a venv that is there but broken fails the tests."""
    if not venv_python().exists():
        return f"SGLang CPU venv missing: {INSTALL_HINT}"
    return None


def child_env(marker_dir: Path, extra: dict | None = None, *, cpu: bool = True) -> dict:
    """The child's environment. ``cpu``: SGLang's CPU engine with the backend in reference mode
    (this machine); otherwise the GPU engine with the backend in kernel mode (the MI300X runner)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TILEGATE_BACKEND_", "SGLANG_"))}
    env |= {
        "HF_HUB_OFFLINE": "1",  # never the hub: the model is built locally or is a local checkpoint
        "TRANSFORMERS_OFFLINE": "1",
        "TILEGATE_BACKEND_MODE": "reference" if cpu else "kernel",
        "TILEGATE_SGLANG_MARKER_DIR": str(marker_dir),
        "PYTHONUNBUFFERED": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    if cpu:
        env |= {
            "SGLANG_USE_CPU_ENGINE": "1",  # SGLang's CPU platform (torch sees no GPU here)
            # One intra-op thread per process: on the 2-core CI machine torch's thread pool makes each
            # tiny matmul take ~8 ms instead of ~5 us (the reference backend's decode went from 13 s to
            # 0.4 s), and the engine's processes and the other xdist worker share those cores anyway.
            "OMP_NUM_THREADS": "1",
        }
        env.pop("PYTHONPATH", None)  # the venv's editable install provides tilegate
    return env | (extra or {})


class EngineRun:
    """One run of the child per pytest run, shared through files in ``workdir`` by every xdist
    worker: whoever comes first (``start``, under a file lock) launches it in the background, as
    early as collection, so that its ~2 minutes of engine start-ups overlap the rest of the suite;
    ``result`` waits for it. The child runs under ``sh`` so its exit code lands in a file that any
    worker can read, whichever started it. A failed run raises, with the log's tail, in every test
    that asks: never a skip. ``python`` and ``cpu``: the CPU venv by default; the MI300X tests pass
    the gate's own python (SGLang's ROCm build in the system site-packages) and cpu=False."""

    def __init__(self, workdir: Path, spec: dict, *, python: Path | None = None, cpu: bool = True):
        self.workdir, self.spec = Path(workdir), spec
        self.python, self.cpu = Path(python or venv_python()), cpu
        self.out, self.exit_file, self.log = self.workdir / "result.json", self.workdir / "exit-code", \
            self.workdir / "child.log"

    def start(self) -> None:
        from filelock import FileLock

        self.workdir.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.workdir / "start.lock")):
            started = self.workdir / "started"
            if started.exists():
                return
            markers = self.workdir / "markers"
            markers.mkdir(exist_ok=True)
            spec_path = self.workdir / "spec.json"
            spec_path.write_text(json.dumps(self.spec, indent=2))
            with open(self.log, "w") as log:
                proc = subprocess.Popen(
                    ["sh", "-c", '"$0" -m tilegate.sglang_cpu "$1" "$2"; echo $? > "$3"', str(self.python),
                     str(spec_path), str(self.out), str(self.exit_file)],
                    cwd=self.workdir, env=child_env(markers, cpu=self.cpu), stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True)
            started.write_text(json.dumps({"time": time.time(), "pgid": proc.pid}))

    def result(self, timeout: float = 900) -> dict:
        self.start()
        t0 = json.loads((self.workdir / "started").read_text())["time"]
        while not self.exit_file.exists():
            if time.time() - t0 > timeout:
                raise TimeoutError(f"SGLang runner still running after {timeout:.0f} s (log {self.log})")
            time.sleep(0.5)
        code = self.exit_file.read_text().strip()
        if code != "0" or not self.out.exists():
            raise RuntimeError(f"SGLang runner exited {code} (log {self.log}):\n{self.log.read_text()[-6000:]}")
        result = json.loads(self.out.read_text())
        result["driver"] = {"pid": os.getpid(), "wall_s": self.out.stat().st_mtime - t0, "log": str(self.log)}
        return result


    def stop_if_running(self) -> None:
        """End the run's process group if it is still going (a pytest run that ended early)."""
        import signal

        started = self.workdir / "started"
        if started.exists() and not self.exit_file.exists():
            try:
                os.killpg(json.loads(started.read_text())["pgid"], signal.SIGTERM)
            except ProcessLookupError:
                pass


# --------------------------------------------------------------------------------------------
# child side: runs in .venv-sglang


def _read_markers(folder: Path) -> dict:
    out = {"registered_pids": [], "backend": []}
    for path in sorted(folder.iterdir()):
        if path.name.startswith("registered-"):
            out["registered_pids"].append(int(path.name.split("-", 1)[1]))
        elif path.name.startswith("backend-"):
            out["backend"] += [json.loads(line) for line in path.read_text().splitlines() if line]
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

    from tilegate.hf_runner import HfRunner

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
    engine = _engine(str(tiny_llama.ensure_tiny_llama(getattr(tiny_llama, spec_name))), "tilelang",
                     **(ENGINE_DEFAULTS | {"context_length": 1024}))
    print("TILEGATE: engine started", flush=True)
    engine.shutdown()
    return 0


def _start_broken_process(label: str, spec_name: str, workdir: Path):
    log_path = workdir / f"broken-{label}.log"
    log = open(log_path, "w")  # noqa: SIM115  # closed by _collect_broken, after the process ends
    proc = subprocess.Popen([sys.executable, "-m", "tilegate.sglang_cpu", "--start-broken", spec_name],
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
    "backends": ["torch_native", "tilelang", "tilelang:planted-scale"], "reference": true,
    "broken": {"head-dim-32": "TINY_LLAMA_HEAD_DIM_32"}, "device": "cpu", "dtype": "float32",
    "engine_kwargs": {...}}. Each round is one batched generate call on the same engine, so a
    later round whose prompts extend an earlier one's reaches SGLang's radix cache: an extend
    over a cached prefix. "reference" adds the FP32 transformers run of the same prompt ids
    (before the engines, so on a GPU it has the memory to itself). Backend "default": SGLang's
    own choice for the platform. Each broken model is started in a process of its own."""
    if argv[0] == "--start-broken":
        return _start_broken(argv[1])
    spec_path, out_path = Path(argv[0]), Path(argv[1])
    spec = json.loads(spec_path.read_text())
    marker_dir = Path(os.environ["TILEGATE_SGLANG_MARKER_DIR"])
    device, top_k, new = spec.get("device", "cpu"), spec.get("top_k", 5), spec["max_new_tokens"]

    t0 = time.monotonic()
    model = _model_path(spec.get("model", "tiny"))
    ids = _prompt_ids(model, spec["rounds"])
    result = {"pid": os.getpid(), "model": model, "prompt_ids_len": [[len(p) for p in r] for r in ids],
              "generations": {}, "errors": {}, "timings": {"model_s": time.monotonic() - t0}}
    if spec.get("reference"):
        t0 = time.monotonic()
        result["reference"] = _fp32_reference(model, ids, new, top_k, device)
        result["timings"]["reference_s"] = time.monotonic() - t0
    kw = (ENGINE_DEFAULTS if device == "cpu" else {}) | spec.get("engine_kwargs", {})
    for backend in spec.get("backends", []):
        # "tilelang:planted-scale": the tilelang backend with a planted bug (the comparison's self-test);
        # the spawned scheduler inherits the variable
        name, _, bug = backend.partition(":planted-")
        os.environ.pop("TILEGATE_BACKEND_PLANTED_BUG", None)
        if bug:
            os.environ["TILEGATE_BACKEND_PLANTED_BUG"] = bug
        t0 = time.monotonic()
        engine = _engine(model, None if name == "default" else name, device=device,
                         dtype=spec.get("dtype", "float32"), **kw)
        t1 = time.monotonic()
        try:
            result["generations"][backend] = [_generate(engine, prompts, new, top_k) for prompts in ids]
            if name == "default":
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
