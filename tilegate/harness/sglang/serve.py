"""Serving inside the SGLang child (tilegate.harness.sglang.child): the model a spec names, an
engine per backend, greedy generation on token ids with each step's top-k, and prompt logprobs
aligned with the FP32 reference's rows (tilegate.harness.sglang.reference).

A prompt of the child's spec is a ``Request``: its token ids, how many tokens to generate, and
optionally the first prompt row whose logprob is asked for (``logprob_start``): row i is
log p(ids[i + 1] | ids[:i + 1]), as transformers computes it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from tilegate.harness.sglang.ports import lease_engine_port

# Small pools and no warm-up on a CPU: the default KV pool there is sized from free memory (~50 s
# to allocate here). 8192 pool tokens and a 4096-token context hold the CPU tier's prompts (the
# longest, 3782 tokens, with its answer) beside the short ones.
CPU_ENGINE_DEFAULTS = {
    "max_total_tokens": 8192,
    "context_length": 4096,
    "max_running_requests": 8,
    "disable_cuda_graph": True,
    "skip_server_warmup": True,
    "log_level": "error",
}


# how long a start waits for a port when every one of the range is taken (a narrowed range)
PORT_WAIT_S = 300.0


@dataclass(frozen=True)
class Request:
    ids: list[int]
    max_new_tokens: int
    logprob_start: int | None = None  # None: no prompt logprobs


def model_path(which: str) -> str:
    """ "trained": the trained tiny Llama-3 (built and trained once per machine, cached);
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


def engine(model_path: str, backend: str, *, device: str = "cpu", dtype: str = "float32", **kw):
    """backend "default": SGLang picks its default attention backend for the platform. The
    rendezvous port (``nccl_port``) is leased machine-wide (tilegate.harness.sglang.ports) unless
    ``kw`` pins one: SGLang's own pick probes a port and binds it later, so two engines started
    together could pick the same. The lease ends with the engine's ``shutdown``."""
    import sglang

    chosen = {} if backend == "default" else {"attention_backend": backend}

    def make(**rendezvous):
        return sglang.Engine(
            model_path=model_path,
            device=device,
            dtype=dtype,
            tp_size=1,
            random_seed=0,
            **chosen,
            **kw,
            **rendezvous,
        )

    if "nccl_port" in kw:
        return make()
    lease = lease_engine_port(wait_s=PORT_WAIT_S)
    try:
        eng = make(nccl_port=lease.port)
    except BaseException:
        lease.release()
        raise
    shutdown = eng.shutdown

    def shutdown_and_release() -> None:
        try:
            shutdown()
        finally:
            lease.release()

    eng.shutdown = shutdown_and_release
    return eng


def _reported_id(token: int, vocab_size: int) -> int:
    """The token id SGLang 0.5.23 reports beside a prompt logprob: it writes 0 for ids >=
    vocab_size - 1 (scheduler_components/logprob_result_processor.py), so the vocabulary's last
    id too; the logprob itself is that token's (measured on the CPU engine against transformers
    FP32: equal)."""
    return token if token < vocab_size - 1 else 0


def _prompt_rows(req: Request, entries: list, vocab_size: int) -> list[float]:
    """The engine's input_token_logprobs as the reference's rows from ``logprob_start``: entry
    (logprob, token, text) of position j is log p(ids[j] | ids[:j]), so row i is position i + 1.
    Aligned by the token ids they name: a misaligned or short answer raises."""
    start = req.logprob_start
    assert start is not None
    want = [_reported_id(t, vocab_size) for t in req.ids[start + 1 :]]
    got = [e for e in entries if e[0] is not None][-len(want) :] if want else []
    ids = [int(e[1]) for e in got]
    if ids != want:
        bad = next(
            (i for i, (a, b) in enumerate(zip(ids, want)) if a != b), min(len(ids), len(want))
        )
        raise RuntimeError(
            f"prompt logprobs from row {start}: the engine names token {ids[bad : bad + 1]} at row "
            f"{start + bad}, the prompt {want[bad : bad + 1]} ({len(got)} rows of {len(want)})"
        )
    return [float(e[0]) for e in got]


def generate(eng, requests: list[Request], top_k: int, vocab_size: int) -> list[dict]:
    """One batched greedy call; per request: the greedy token ids, each step's top-k as
    [[token, logprob], ...] (best first), its top-1 minus top-2 logprob, the prompt rows'
    logprobs where asked, and the prompt and cached token counts the engine reports."""
    params = [
        {"temperature": 0.0, "max_new_tokens": r.max_new_tokens, "ignore_eos": True}
        for r in requests
    ]
    starts = [-1 if r.logprob_start is None else r.logprob_start for r in requests]
    outs = eng.generate(
        input_ids=[r.ids for r in requests],
        sampling_params=params,
        return_logprob=True,
        top_logprobs_num=top_k,
        logprob_start_len=starts,
    )
    results = []
    for req, out in zip(requests, outs, strict=True):
        meta = out["meta_info"]
        tops = [
            [[int(tok), float(lp)] for lp, tok, *_ in step] for step in meta["output_top_logprobs"]
        ]
        record = {
            "tokens": [int(t[1]) for t in meta["output_token_logprobs"]],
            "top": tops,
            "gaps": [top[0][1] - top[1][1] for top in tops],
            "prompt_tokens": int(meta.get("prompt_tokens", -1)),
            "cached_tokens": int(meta.get("cached_tokens", -1)),
            "completion_tokens": int(meta.get("completion_tokens", -1)),
        }
        if req.logprob_start is not None:
            record["prompt_logprobs"] = _prompt_rows(
                req, meta.get("input_token_logprobs") or [], vocab_size
            )
        results.append(record)
    return results


def serve(
    model: str,
    backend: str,
    rounds: list[list[Request]],
    top_k: int,
    *,
    device: str,
    dtype: str,
    kw: dict,
) -> tuple[list, dict, str]:
    """One engine serving ``model`` with ``backend``, each round one batched greedy call on it.
    Returns the generations per round, the start and generate seconds, and the backend SGLang
    ran."""
    from transformers import AutoConfig

    vocab_size = AutoConfig.from_pretrained(model).vocab_size
    t0 = time.monotonic()
    eng = engine(model, backend, device=device, dtype=dtype, **kw)
    t1 = time.monotonic()
    try:
        generations = [generate(eng, requests, top_k, vocab_size) for requests in rounds]
        chosen = eng.server_args.attention_backend
    finally:
        eng.shutdown()
    return generations, {"start_s": t1 - t0, "generate_s": time.monotonic() - t1}, chosen
