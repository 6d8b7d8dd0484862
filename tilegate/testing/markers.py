"""The gate's markers, registered by the plugin (``--strict-markers`` refuses any other). A tier's
marker is its suite folder's (tilegate/testing/tiers.py)."""

MARKERS = (
    "compile: lowers kernels with TileLang (CPU)",
    "isa: builds gfx942 code objects and checks their ISA (CPU + cross toolchain or ROCm)",
    "numerics: kernel vs FP32 reference (GPU)",
    "drift: error growth with sequence length, fp16 accumulation (GPU)",
    "decode: paged decode kernels (GPU)",
    "e2e: end-to-end token agreement (SGLang / transformers)",
    "serving: the SGLang tilelang backend's adapter and contract (suite/serving/)",
    "families: the kernel tiers: every kernel through its family, the gate's own and adapted ones "
    "(suite/families/)",
    "library: the gate's own machinery: references, ISA readers, records, CI scripts, the runner "
    "boundary "
    "(suite/library/)",
    "sglang: runs SGLang's real engine: on the CPU from .venv-sglang "
    "(scripts/install-sglang-cpu.sh); "
    "with gpu, SGLang's GPU build in this python",
    "tilelang_venv(version): runs the compile + ISA tiers under another TileLang from its venv "
    "(scripts/install-tilelang-venv.sh)",
    "compat: the compile + ISA tiers under another supported TileLang, from its venv (part of the "
    "full run and of tox -e cpu-tl012)",
    "gpu: needs a ROCm or CUDA device",
    "rocm: needs a gfx942 device under ROCm",
    "config_target(target): a GPU case built from that target's tile-config table",
    "cuda: needs a CUDA device",
    "container: runs the MI300X job's container script under a real container runtime (docker) "
    "with the "
    "gate's test image (scripts/install-container-runtime.sh)",
    "actions_js: runs the pinned GitHub actions' own JavaScript libraries under node "
    "(scripts/install-artifact-unpack.sh)",
    "llama3: needs a local Meta-Llama-3 checkpoint (--llama3-path or TILEGATE_LLAMA3_PATH)",
    "slow: long sequences or big builds",
    "nested: runs the gate again in another environment (a venv, a wheel install, a shard); "
    "opt-in: -m nested "
    "(.ci/run runs them after the README's test command)",
    "sanitize: kernels under compute-sanitizer (memcheck, racecheck, initcheck, synccheck); "
    "opt-in: -m sanitize",
    "stress: races on the asynchronous paths: every async config launched hundreds of times on "
    "full pipelines, "
    "bit for bit against the first launch, alone and beside a copy stream (GPU); opt-in: -m stress",
    "counters: hardware counters (ncu; rocprofv3 on MI300X) against per-device baselines; opt-in: "
    "-m counters",
    "perf: kernel speed as a ratio to torch SDPA against per-device baselines (GPU); opt-in: -m "
    "perf",
    "builds(*builds): the GPU kernels this test launches (tilegate/testing/precompile.py: a GPU "
    "run "
    "compiles them all before its first test)",
    "deadline(seconds): this GPU test's own deadline (default TILEGATE_GPU_TEST_TIMEOUT, 900 s)",
)
