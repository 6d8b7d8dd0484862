"""Serve through tilegate's runtime wheel alone:
``python runtime_wheel_child.py MODEL PROMPTS.json OUT.json``.

Run by suite/e2e/test_runtime_wheel_serves.py with a PYTHONPATH that holds SGLang, torch, TileLang
and the runtime wheel installed by itself, and neither the checkout nor the gate's distribution:
so this file imports nothing of tilegate; SGLang's plugin loading brings what it brings. It serves
the prompts (token ids) greedily with SGLang's own triton backend and with tilelang, one engine
after the other, and writes each backend's greedy tokens and top-k logprobs, and the file of every
tilegate module this process loaded.
"""

import json
import sys

import sglang

TOP_K, NEW_TOKENS = 5, 24


def serve(model: str, backend: str, prompts: list[list[int]]) -> list[dict]:
    engine = sglang.Engine(
        model_path=model,
        attention_backend=backend,
        dtype="float16",
        sampling_backend="pytorch",
        grammar_backend="none",
        disable_cuda_graph=True,
        mem_fraction_static=0.3,
        random_seed=0,
        log_level="error",
    )
    try:
        outs = engine.generate(
            input_ids=prompts,
            sampling_params={"temperature": 0.0, "max_new_tokens": NEW_TOKENS, "ignore_eos": True},
            return_logprob=True,
            top_logprobs_num=TOP_K,
        )
    finally:
        engine.shutdown()
    return [
        {
            "tokens": [int(t[1]) for t in o["meta_info"]["output_token_logprobs"]],
            "top": [
                [[int(tok), float(lp)] for lp, tok, *_ in step]
                for step in o["meta_info"]["output_top_logprobs"]
            ],
        }
        for o in outs
    ]


def main() -> None:
    model, prompts_file, out_file = sys.argv[1:4]
    prompts = json.loads(open(prompts_file).read())
    served = {backend: serve(model, backend, prompts) for backend in ("triton", "tilelang")}
    files = {
        name: getattr(module, "__file__", None)
        for name, module in sorted(sys.modules.items())
        if name == "tilegate" or name.startswith("tilegate.")
    }
    with open(out_file, "w") as f:
        json.dump({"served": served, "tilegate_files": files}, f)


if __name__ == "__main__":
    main()
