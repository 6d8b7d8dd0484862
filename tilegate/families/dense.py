"""The dense prefill family: the cases, inputs, reference, baseline and closed forms every dense
attention kernel is judged by, the gate's own prefill (tilegate/families/own.py) and adapted ones.

Cases: every RunCase of tilegate.fixtures.shapes.numerics_cases() (every mask of the gate's own
prefill kernel: causal, full, sliding windows, a kernel without one skipping its cases by name; GQA
32:8 and 64:8, MHA; head_dim 64 and 128; fp16 and bf16; 1 to 32768 tokens; queries at the end of
the keys, as in chunked prefill; batches of 2 and 3), as
  random      standard normal q, k, v (tilegate.fixtures.inputs.random_qkv)
  nan-padded  the same inputs, in buffers whose rows past seq_q and seq_k hold NaN (the unused K/V
              rows a partial key tile reaches), and the output in a buffer whose rows past seq_q
              hold NaN and must still (the cases of nan_padding_cases())
  large-logits, dominant-key, identical-keys
              the gate's adversarial inputs (tilegate.fixtures.inputs), on adversarial_cases():
              scores of thousands (a softmax without its running max overflows), a one-hot
              softmax, a uniform one
and beside each one-sequence 3782-token prefill (seq_q = seq_k) its twin at 3840 tokens (30 blocks
of 128 keys, 60 of 64: no partial key block), so that a bug in the last key block shows as the
difference. 3840 is the one length here that is not the gate's own. Last, the determinism and
sanitizer cases of bf16 d128 and fp16 d64 that are not among these (DETERMINISM_CASES,
SANITIZED_CASES: the fp16 d128 ones in each build's dtype and head_dim).
Reference: references.attention.ref_attention (FP32); baseline: ref_attention_lowp (plain torch in
the inputs' dtype), each with the case's mask and window; judge: references.metrics.judge.

An adapter's launcher is ``launcher(module, inputs)``, returning ``inputs.out`` or None: ``inputs``
is an Inputs, and the kernel writes ``inputs.out`` (NaN until written: an element it never writes
fails the judge), which is what the family judges.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import torch

from tilegate.families import per_case
from tilegate.families.outputs import written_output
from tilegate.fixtures.inputs import (
    dominant_key,
    identical_keys,
    large_logits,
    nan_padded,
    random_qkv,
)
from tilegate.fixtures.shapes import (
    RunCase,
    adversarial_cases,
    determinism_cases,
    nan_padding_cases,
    numerics_cases,
)
from tilegate.gate.tile_site import dense_site
from tilegate.references.attention import ref_attention, ref_attention_lowp
from tilegate.references.metrics import judge

if TYPE_CHECKING:
    from tilegate.families.spec import Kernel

FEATURE_OF: dict[str, str] = {}  # no case needs an optional input
AXES: tuple[str, ...] = (
    "batch",
    "row",
    "head",
    "col",
)  # the output's axes, as a failure names them
# the adversarial kinds, each stressing one failure mode (tilegate.fixtures.inputs)
ADVERSARIAL = {
    "large-logits": large_logits,
    "dominant-key": dominant_key,
    "identical-keys": identical_keys,
}
KINDS = ("random", "nan-padded", *ADVERSARIAL)
# the seed each kind's inputs are drawn with (tilegate.fixtures.inputs): a failure names it
SEEDS = {"random": 0, "nan-padded": 0, "large-logits": 1, "dominant-key": 2, "identical-keys": 3}
TAIL_TWIN = {3782: 3840}  # a length with a partial last key block -> one with none


def mask_of(shape) -> str:
    """The capability a case's mask needs: "causal", "full" or "sliding-window"."""
    if shape.window is not None:
        return "sliding-window"
    return "causal" if shape.causal else "full"


# What the cases exercise: a kernel declaring more is refused at load (a value no case can judge).
EXERCISED = {
    "dtype": tuple(sorted({c.shape.dtype for c in numerics_cases()})),
    "head_dim": tuple(sorted({c.shape.head_dim for c in numerics_cases()})),
    "mask": tuple(dict.fromkeys(mask_of(c.shape) for c in numerics_cases())),
}


@dataclass(frozen=True)
class Case:
    run: RunCase
    kind: str

    @property
    def name(self) -> str:
        return f"{self.run.name}-{self.kind}"

    @property
    def mask(self) -> str:
        return mask_of(self.run.shape)


def _twins(runs: list[RunCase]) -> list[RunCase]:
    return [
        replace(r, seq_q=TAIL_TWIN[r.seq_k], seq_k=TAIL_TWIN[r.seq_k])
        for r in runs
        if r.seq_k in TAIL_TWIN and r.seq_q == r.seq_k and r.batch == 1
    ]


def _gate_cases() -> list[Case]:
    runs = numerics_cases()
    return [
        *(Case(r, "random") for r in [*runs, *_twins(runs)]),
        *(Case(r, "nan-padded") for r in nan_padding_cases()),
        *(Case(r, kind) for kind in ADVERSARIAL for r in adversarial_cases()),
    ]


def _in(case: Case, dtype: str, head_dim: int) -> Case:
    """``case`` in another dtype and head_dim: its heads, mask, lengths, batch and kind kept."""
    shape = replace(case.run.shape, dtype=dtype, head_dim=head_dim)
    return Case(replace(case.run, shape=shape), case.kind)


def _named(names: tuple[str, ...]) -> list[Case]:
    by_name = {c.name: c for c in _gate_cases()}
    return [by_name[n] for n in names]


# The determinism and sanitizer cases: the gate's own fp16 d128 ones (their names are those the
# GPU runs recorded), and the same in each other dtype and head_dim the numerics cases judge, so
# that a kernel without fp16 or d128 (bf16 only, d64 only) is not left with capability skips alone.
OWN_BUILD = ("float16", 128)
OTHER_BUILDS = tuple(
    sorted({(r.shape.dtype, r.shape.head_dim) for r in numerics_cases()} - {OWN_BUILD})
)
# two launches, bit for bit: the gate's own determinism cases; in the other builds, those below
# 32768 tokens (3782, both masks: cases the numerics tier runs already)
_OWN_DETERMINISM = tuple(Case(r, "random") for r in determinism_cases())
_DETERMINISM = [
    *_OWN_DETERMINISM,
    *(_in(c, *b) for b in OTHER_BUILDS for c in _OWN_DETERMINISM if not c.run.slow),
]
DETERMINISM_CASES = tuple(c.name for c in _DETERMINISM)
# Sanitized launches, each a few blocks: both masks, a partial tile at each end, NaN padding, a
# batch of two over a prefix (causal), one query over 3782 keys (full); each in every build.
_SMALL = ("causal-gqa32x8-d128-fp16", "full-gqa32x8-d128-fp16")
_OWN_SANITIZED = {
    "memcheck": (
        *(f"{s}-{lens}" for s in _SMALL for lens in ("s1-random", "s17-random", "s129-nan-padded")),
        f"{_SMALL[0]}-q17-k129-b2-random",
        f"{_SMALL[1]}-q1-k3782-random",
    ),
    # racecheck's time grows with the blocks launched: 16 heads, two query tiles
    "racecheck": ("causal-mha16-d128-fp16-s129-random", "full-mha16-d128-fp16-s129-random"),
    "initcheck": ("full-mha16-d128-fp16-s129-random",),
}
_SANITIZED = {
    tool: [*_named(names), *(_in(c, *b) for b in OTHER_BUILDS for c in _named(names))]
    for tool, names in _OWN_SANITIZED.items()
}
SANITIZED_CASES = {tool: tuple(c.name for c in cases) for tool, cases in _SANITIZED.items()}


def all_cases() -> list[Case]:
    """The gate's own cases, then the determinism and sanitizer cases of the other builds that
    are not among them (so the numerics tier judges every case those tiers launch)."""
    gate = _gate_cases()
    known = {c.name for c in gate}
    picked = [*_DETERMINISM, *(c for cases in _SANITIZED.values() for c in cases)]
    return [*gate, *dict.fromkeys(c for c in picked if c.name not in known)]


def refusal(kernel: Kernel) -> str | None:
    """Why the adapter cannot be judged by this family (Kernel refuses it, naming its
    line), or None."""
    if kernel.launcher is None:
        return "family 'dense' needs a launcher: launcher(module, inputs) -> output"
    if kernel.gpu_shape is not None:
        return (
            "family 'dense' takes its shapes from the gate's own cases "
            "(tilegate/fixtures/shapes.py): leave gpu_shape out"
        )
    if why := per_case.refusal(kernel):
        return why
    caps = kernel.capabilities
    for axis, declared in (
        ("dtype", caps.dtypes),
        ("head_dim", caps.head_dims),
        ("mask", caps.masks),
    ):
        unjudged = [v for v in declared if v not in EXERCISED[axis]]
        if unjudged:
            return (
                f"capabilities declare {axis} {unjudged}, which no case of family 'dense' "
                f"exercises (its {axis}s: {', '.join(map(str, EXERCISED[axis]))}); leave them "
                "out, or leave family and launcher out for the CPU tiers only"
            )
    # each axis may be exercised while a problem's combination is not (no bf16 case at d64): its
    # build would then skip every GPU case, and the run be green without a GPU check of it
    judged = {(c.run.shape.dtype, c.run.shape.head_dim, c.mask) for c in all_cases()}
    unjudged_problems = [
        p.name for p in kernel.problems if (p.dtype, p.head_dim, p.mask) not in judged
    ]
    if unjudged_problems:
        return (
            f"problems {unjudged_problems} have a dtype, head_dim and mask that no case of family "
            f"'dense' runs together (its cases: {', '.join(map(str, sorted(judged)))})"
        )
    return None


def family_cases(kernel: Kernel) -> list[Case]:
    return all_cases()


def missing(kernel: Kernel, case: Case) -> str | None:
    """A named skip: the case has a dtype, head_dim or mask the kernel's capabilities leave out."""
    shape = case.run.shape
    return kernel.capabilities.left_out(
        kernel.name, dtype=shape.dtype, head_dim=shape.head_dim, mask=case.mask
    ) or per_case.missing(kernel, case_shape(case))


def case_shape(case: Case) -> per_case.CaseShape:
    run, shape = case.run, case.run.shape
    return per_case.CaseShape(
        batch=run.batch,
        seq_q=run.seq_q,
        seq_k=run.seq_k,
        q_heads=shape.q_heads,
        kv_heads=shape.kv_heads,
        head_dim=shape.head_dim,
        dtype=shape.dtype,
        causal=shape.causal,
        window=shape.window,
        mask=case.mask,
    )


def case_axes(case: Case) -> dict[str, Any]:
    """The capability axes' values the case runs."""
    s = case.run.shape
    return {"dtype": s.dtype, "head_dim": s.head_dim, "mask": case.mask}


def seed(case: Case) -> int:
    return SEEDS[case.kind]


def site(case: Case, index: tuple[int, ...], tiles: tuple[int, int]) -> str:
    """Where output element ``index`` ([batch, row, head, col]) lies in the tiling."""
    run = case.run
    return dense_site(index[1], run.seq_q, run.seq_k, run.shape.causal, *tiles)


def build_of(case: Case) -> str:
    """The compile-time part of a case (heads and lengths stay dynamic in a dense kernel): its
    tests share an xdist worker, so that each build compiles once."""
    s = case.run.shape
    return f"{case.mask}-d{s.head_dim}-{s.dtype}"


def is_slow(case: Case) -> bool:
    return case.run.slow


def sanitized_by_default(case: Case) -> bool:
    return case.name in SANITIZED_CASES["memcheck"]


@dataclass
class Inputs:
    q: torch.Tensor  # [batch, seq_q, heads, d]
    k: torch.Tensor  # [batch, seq_k, kv_heads, d]
    v: torch.Tensor
    out: torch.Tensor  # like q, NaN: the kernel writes it
    causal: bool
    # a sliding window (the case's mask is "sliding-window"): the query at position p sees keys
    # p - window .. p (SGLang's sliding_window_size); None: none
    window: int | None
    sm_scale: float
    # the buffer ``out`` is a view of: NaN past seq_q in a nan-padded case, else ``out`` itself
    out_buffer: torch.Tensor
    # the kernel built for this case (tilegate.families.per_case), where its adapter fixes sizes at
    # compile time; None: the launcher runs the kernel its own way
    compiled: Any = None
    # the LaunchOption's value this launch runs with (the kernel's launch_options); None: none
    option: Any = None


def _padded(t: torch.Tensor) -> torch.Tensor:
    """A view of ``t``'s values at the start of a NaN-padded buffer (inputs.nan_padded)."""
    return nan_padded(t)[:, : t.shape[1]]


def prepare(kernel: Kernel, case: Case, device: str) -> Inputs:
    q, k, v = ADVERSARIAL.get(case.kind, random_qkv)(case.run, device, seed=SEEDS[case.kind])
    out = torch.full_like(q, float("nan"))
    if case.kind == "nan-padded":
        if case.run.batch != 1:  # a view of a longer buffer is contiguous for one sequence only
            raise ValueError(f"{case.name}: NaN padding takes one sequence")
        q, k, v, out = _padded(q), _padded(k), _padded(v), _padded(out)
        buffer = out._base if out._base is not None else out
    else:
        buffer = out
    shape = case.run.shape
    built = per_case.compiled(kernel, case_shape(case)) if per_case.fixed(kernel) else None
    return Inputs(q, k, v, out, shape.causal, shape.window, shape.head_dim**-0.5, buffer, built)


def launch(kernel: Kernel, module, x: Inputs) -> torch.Tensor:
    """One launch into ``x.out``, NaN again first (each launch must write every element). The
    family judges ``x.out``: a launcher that returns another tensor (its own output, which the NaN
    fill and the padded buffer's check never see) is refused, naming the adapter's line."""
    assert kernel.launcher is not None  # refusal() saw to it
    x.out.fill_(float("nan"))
    return written_output(kernel, "dense", x.out, kernel.launcher(module, x))


def reference(kernel: Kernel, x: Inputs) -> torch.Tensor:
    return ref_attention(x.q, x.k, x.v, causal=x.causal, window=x.window, scale=x.sm_scale)


def baseline(kernel: Kernel, x: Inputs) -> torch.Tensor:
    return ref_attention_lowp(x.q, x.k, x.v, causal=x.causal, window=x.window)


def closed_form_failure(case: Case, x: Inputs, out: torch.Tensor, ref: torch.Tensor) -> str | None:
    """The adversarial kinds whose answer has a closed form, against it: a dominant key 0 gives its
    value (to the last bit of the output's dtype) in every row that sees it; identical keys give
    the mean of the values each row sees, judged against plain torch as the reference is. The
    reference must meet the closed form too, or the generator is broken."""
    if case.kind == "dominant-key":
        if x.window is not None and x.window < x.k.shape[1] - 1:
            return None  # the rows past the window do not see key 0
        groups = x.q.shape[2] // x.k.shape[2]
        expected = x.v[:, 0].repeat_interleave(groups, dim=1)[:, None].expand_as(out).float()
        tolerance, generator = torch.finfo(out.dtype).eps, 1e-6
    elif case.kind == "identical-keys":
        expected = _visible_mean(x)
        tolerance, generator = None, 1e-3
    else:
        return None
    if not (ref - expected).abs().max() <= generator:  # NaN too
        return f"{case.kind}: the reference is not the closed form: its generator is broken"
    if tolerance is not None:
        err = (out.float() - expected).abs().max().item()
        return None if err <= tolerance else f"{case.kind}: {err:.3e} off its closed form"
    to_mean = judge(
        out, expected, ref_attention_lowp(x.q, x.k, x.v, causal=x.causal, window=x.window)
    )
    return None if to_mean.passed else f"{case.kind}, against the mean: {to_mean.explain()}"


def _visible_mean(x: Inputs) -> torch.Tensor:
    """The mean of the values each query sees: keys first..last, last = i + (seq_k - seq_q) when
    causal (bottom-right), the last key otherwise; first = last - window with one, else key 0."""
    seq_q, seq_k = x.q.shape[1], x.k.shape[1]
    vf = x.v.float().repeat_interleave(x.q.shape[2] // x.k.shape[2], dim=2)
    rows = torch.arange(seq_q, device=x.v.device)
    last = rows + (seq_k - seq_q) if x.causal else torch.full_like(rows, seq_k - 1)
    first = last * 0 if x.window is None else (last - x.window).clamp(min=0)
    sums = torch.nn.functional.pad(vf.cumsum(dim=1), (0, 0, 0, 0, 1, 0))  # sums[:, j]: keys < j
    return (sums[:, last + 1] - sums[:, first]) / (last - first + 1)[None, :, None, None]


def record_dtype(kernel: Kernel, case: Case) -> str:
    """The numerics summary's row: the case's dtype, as the gate's own prefill records."""
    return case.run.shape.dtype


def stray_writes(x: Inputs) -> str | None:
    """What the kernel wrote outside its output: the NaN rows past seq_q of a padded buffer."""
    seq_q = x.out.shape[1]
    past = x.out_buffer[:, seq_q:]
    written = int((~torch.isnan(past)).sum().item())
    if written:
        return f"the kernel wrote {written} elements past seq_q ({seq_q}) in the output buffer"
    return None
