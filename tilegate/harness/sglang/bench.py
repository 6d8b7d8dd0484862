"""The serving benchmark inside the SGLang child (tilegate.harness.sglang.child, spec key "bench"):
the same model served by each backend, the same random prompts for each, the figures MI300X users
quote. Every backend's engine is started first and stays resident; then ``rounds`` rounds measure
each backend in turn (A B A B ...), so that a machine's drift moves both sides of a ratio alike.

Per backend and round: time to first token of a whole batch (one greedy step over ``batch``
prompts of ``input_len`` tokens), output tokens per second for that batch generating
``output_len`` tokens each, and for one ``long_len``-token prompt its time to first token and its
decode tokens per second over ``long_output`` more tokens. The radix cache is off, so a repeated
prompt is prefilled again. Times are wall-clock seconds of ``engine.generate`` calls after a
warm-up request. ``records`` puts them as the perf tier's records (tilegate.harness.perf.driver):
the
first backend's figure over the peer's (the last backend), per round, median and spread.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from pathlib import Path

from tilegate.harness.sglang import step_profile

# (figure, unit, True when larger is better)
FIGURES = (
    ("batch_tokens_per_s", "tok/s", True),
    ("batch_ttft_s", "s", False),
    ("long_ttft_s", "s", False),
    ("long_decode_tokens_per_s", "tok/s", True),
)


class HarnessPluginRan(RuntimeError):
    """The benchmark's engines served the harness's observed backend, not the production one."""


def child_spec(
    bench: dict, model: str = "llama3-8b-shape", device: str = "cuda", dtype: str = "bfloat16"
) -> dict:
    """A child spec (tilegate.harness.sglang.child) with only the benchmark phase: no comparison
    prompts, no reference."""
    return {
        "model": model,
        "rounds": [],
        "max_new_tokens": 1,
        "reference": False,
        "backends": [],
        "device": device,
        "dtype": dtype,
        "engine_kwargs": {},
        "bench": bench,
    }


def figures_of(result: dict) -> dict:
    """The child's benchmark figures, refused if the harness plugin ran in its engines: it writes
    markers from every SGLang process it loads in (suite/serving/test_bench_plugins.py shows both
    sides)."""
    recorded = result["bench_markers"]
    if recorded["registered_pids"] or recorded["backend"]:
        raise HarnessPluginRan(f"the harness plugin ran in the benchmark's engines: {recorded}")
    return result["bench"]


def _prompts(vocab: int, count: int, length: int, rng: random.Random) -> list[list[int]]:
    return [[rng.randrange(vocab) for _ in range(length)] for _ in range(count)]


def _timed(engine, ids: list[list[int]], new: int) -> tuple[float, list[dict]]:
    params = {"temperature": 0.0, "max_new_tokens": new, "ignore_eos": True}
    t0 = time.perf_counter()
    outs = engine.generate(input_ids=ids, sampling_params=params)
    return time.perf_counter() - t0, [o["meta_info"] for o in outs]


def _measure(engine, batch_ids, long_ids, spec: dict) -> dict:
    ttft_s, _ = _timed(engine, batch_ids, 1)
    wall_s, metas = _timed(engine, batch_ids, spec["output_len"])
    generated = sum(int(m["completion_tokens"]) for m in metas)
    long_ttft_s, long_meta = _timed(engine, [long_ids], 1)
    long_wall_s, _ = _timed(engine, [long_ids], 1 + spec["long_output"])
    decode_s = long_wall_s - long_ttft_s  # two calls apart: None when within the prefill's noise
    return {
        "batch_ttft_s": ttft_s,
        "batch_wall_s": wall_s,
        "batch_generated": generated,
        "batch_tokens_per_s": generated / wall_s,
        "long_prompt_tokens": int(long_meta[0]["prompt_tokens"]),
        "long_ttft_s": long_ttft_s,
        "long_decode_tokens_per_s": spec["long_output"] / decode_s if decode_s > 0 else None,
    }


def run(model: str, spec: dict, engine_for) -> dict:
    """``engine_for(backend, **engine_kwargs)`` starts an engine (the child's, with its device,
    dtype and defaults). Returns per backend its start time, attention backend and per-round
    figures."""
    from transformers import AutoConfig

    rng = random.Random(spec.get("seed", 0))
    vocab = AutoConfig.from_pretrained(model).vocab_size
    batch_ids = _prompts(vocab, spec["batch"], spec["input_len"], rng)
    long_ids = _prompts(vocab, 1, spec["long_len"], rng)[0]
    engines, out = {}, {"spec": spec, "backends": {}}
    try:
        for backend in spec["backends"]:
            t0 = time.perf_counter()
            engines[backend] = engine_for(
                backend, disable_radix_cache=True, **spec.get("engine_kwargs", {})
            )
            out["backends"][backend] = {
                "start_s": time.perf_counter() - t0,
                "rounds": [],
                "attention_backend": engines[backend].server_args.attention_backend,
            }
            # warm-up at the measured shapes: first-call allocations, JIT builds (a first batch's
            # TTFT measured 1.9 s against 0.93 s after it on the H200)
            _timed(engines[backend], batch_ids, 2)
            _timed(engines[backend], [long_ids], 2)
        for _ in range(spec.get("rounds", 1)):
            for backend, eng in engines.items():
                out["backends"][backend]["rounds"].append(_measure(eng, batch_ids, long_ids, spec))
        if spec.get("profile_tokens"):
            out["profile"] = _profiles(
                engines, batch_ids, spec["profile_tokens"], spec.get("profile_activities")
            )
    finally:
        for eng in engines.values():
            eng.shutdown()
    return out


def _profiles(
    engines: dict, batch_ids: list[list[int]], new_tokens: int, activities: list[str] | None
) -> dict:
    """Each backend's decode step under SGLang's profiler (tilegate.harness.sglang.step_profile),
    after the measured rounds so that the profiler's overhead touches none of them."""
    root = Path(tempfile.mkdtemp(prefix="tilegate-step-profile-"))
    return {
        backend: step_profile.profile_decode(
            eng, batch_ids, new_tokens, root / backend, activities or step_profile.ACTIVITIES
        ).as_dict()
        for backend, eng in engines.items()
    }


def records(bench: dict) -> list[dict]:
    """The first backend against the last (the peer), as perf-tier records: ``ratio`` > 1 is the
    first backend faster, median over rounds; ``ratio_spread`` the rounds' relative spread."""
    names = list(bench["backends"])
    test, peer = bench["backends"][names[0]]["rounds"], bench["backends"][names[-1]]["rounds"]
    s = bench["spec"]
    cases = {
        "batch_tokens_per_s": f"batch {s['batch']} x {s['input_len']} -> {s['output_len']}",
        "batch_ttft_s": f"batch {s['batch']} x {s['input_len']} TTFT",
        "long_ttft_s": f"{s['long_len']}-token prompt TTFT",
        "long_decode_tokens_per_s": f"{s['long_len']}-token prompt decode",
    }
    out = []
    for figure, unit, larger_better in FIGURES:
        pairs = [
            (t[figure], p[figure])
            for t, p in zip(test, peer, strict=True)
            if t[figure] and p[figure]
        ]
        if not pairs:
            continue
        ratios = sorted((t / p) if larger_better else (p / t) for t, p in pairs)
        mid = statistics.median(ratios)
        out.append(
            {
                "phase": "serving",
                "case": cases[figure],
                "config": f"{names[0]} vs {names[-1]}",
                "unit": unit,
                "value": statistics.median(t for t, _ in pairs),
                "peer_value": statistics.median(p for _, p in pairs),
                "ratio": mid,
                "ratio_spread": (ratios[-1] - ratios[0]) / mid,
                "rounds": len(pairs),
            }
        )
    return out


def table(bench: dict) -> list[str]:
    """Markdown: each figure's median over the rounds for both backends, and the ratio."""
    s = bench["spec"]
    names = list(bench["backends"])
    lines = [
        f"batch {s['batch']} x input {s['input_len']} -> output {s['output_len']}; one "
        f"{s['long_len']}-token prompt "
        f"(+{s['long_output']} tokens); {s.get('rounds', 1)} interleaved rounds, medians",
        f"| figure | {names[0]} | {names[-1]} | {names[0]} vs {names[-1]} | spread over rounds |",
        "|---|---|---|---|---|",
    ]
    for r in records(bench):
        lines.append(
            f"| {r['case']} ({r['unit']}) | {r['value']:.3f} | {r['peer_value']:.3f} | "
            f"{r['ratio']:.2f}x | "
            f"{r['ratio_spread']:.1%} |"
        )
    lines.append(
        "ratio: speed of the first over the second (tok/s over tok/s, or the second's TTFT over "
        "the first's)"
    )
    return lines
