"""A serving benchmark inside the SGLang child (tilegate.harness.sglang_child, spec key "bench"):
the same model served with each attention backend in turn, the same random prompts for each.

Per backend: time to first token of a whole batch (one greedy step over ``batch`` prompts of
``input_len`` tokens), output tokens per second for the batch generating ``output_len`` tokens
each, and for one ``long_len``-token prompt its time to first token and its decode tokens per
second over ``long_output`` more tokens. The radix cache is off, so a repeated prompt is prefilled
again rather than found cached. Times are wall-clock seconds of ``engine.generate`` calls after a
warm-up request: a report for humans and for ratios between backends of the same run, not a gate.
"""

from __future__ import annotations

import random
import time


def _prompts(vocab: int, count: int, length: int, rng: random.Random) -> list[list[int]]:
    return [[rng.randrange(vocab) for _ in range(length)] for _ in range(count)]


def _timed(engine, ids: list[list[int]], new: int) -> tuple[float, list[dict]]:
    params = {"temperature": 0.0, "max_new_tokens": new, "ignore_eos": True}
    t0 = time.perf_counter()
    outs = engine.generate(input_ids=ids, sampling_params=params)
    return time.perf_counter() - t0, [o["meta_info"] for o in outs]


def _measure(engine, batch_ids, long_ids, spec: dict) -> dict:
    _timed(engine, batch_ids[:1], 4)  # warm-up: first-call allocations and kernel builds
    ttft_s, _ = _timed(engine, batch_ids, 1)
    wall_s, metas = _timed(engine, batch_ids, spec["output_len"])
    generated = sum(int(m["completion_tokens"]) for m in metas)
    long_ttft_s, long_meta = _timed(engine, [long_ids], 1)
    long_wall_s, _ = _timed(engine, [long_ids], 1 + spec["long_output"])
    decode_s = long_wall_s - long_ttft_s  # two calls apart: None when the decode is within the prefill's noise
    return {"batch_ttft_s": ttft_s, "batch_wall_s": wall_s, "batch_generated": generated,
            "batch_tokens_per_s": generated / wall_s, "long_prompt_tokens": int(long_meta[0]["prompt_tokens"]),
            "long_ttft_s": long_ttft_s,
            "long_decode_tokens_per_s": spec["long_output"] / decode_s if decode_s > 0 else None}


def run(model: str, spec: dict, engine_for) -> dict:
    """``engine_for(backend, **engine_kwargs)`` starts an engine (the child's, with its device,
    dtype and defaults). Returns per backend its start time and ``_measure``'s figures."""
    from transformers import AutoConfig

    rng = random.Random(spec.get("seed", 0))
    vocab = AutoConfig.from_pretrained(model).vocab_size
    batch_ids = _prompts(vocab, spec["batch"], spec["input_len"], rng)
    long_ids = _prompts(vocab, 1, spec["long_len"], rng)[0]
    out = {"spec": spec, "backends": {}}
    for backend in spec["backends"]:
        t0 = time.perf_counter()
        engine = engine_for(backend, disable_radix_cache=True)
        started = time.perf_counter() - t0
        try:
            out["backends"][backend] = {"start_s": started, "attention_backend": engine.server_args.attention_backend,
                                        **_measure(engine, batch_ids, long_ids, spec)}
        finally:
            engine.shutdown()
    return out


def _rate(tokens_per_s: float | None) -> str:
    return "not measurable" if tokens_per_s is None else f"{tokens_per_s:.1f}"


def table(bench: dict) -> list[str]:
    """Markdown: one row per backend, with tokens/s and TTFT also as ratios to the first backend."""
    rows = list(bench["backends"].items())
    first = rows[0][1]
    s = bench["spec"]
    lines = [f"batch {s['batch']} x input {s['input_len']} -> output {s['output_len']}; one {s['long_len']}-token prompt",
             "| backend | ran as | batch TTFT s | batch tok/s | tok/s vs first | long TTFT s | TTFT vs first | long decode tok/s |",
             "|---|---|---|---|---|---|---|---|"]
    for name, r in rows:
        lines.append(f"| {name} | {r['attention_backend']} | {r['batch_ttft_s']:.3f} | {r['batch_tokens_per_s']:.1f} | "
                     f"{r['batch_tokens_per_s'] / first['batch_tokens_per_s']:.2f} | {r['long_ttft_s']:.3f} | "
                     f"{r['long_ttft_s'] / first['long_ttft_s']:.2f} | {_rate(r['long_decode_tokens_per_s'])} |")
    return lines
