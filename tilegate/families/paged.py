"""The paged family: SGLang's extend and decode over its token pools (req_to_token): the cases,
inputs, reference and baseline every paged kernel is judged by, the gate's own (own.py) included.

Cases: every PagedCase of tilegate.fixtures.paged_cases (EXTEND_CASES: prefill through the pool,
cached prefixes of 12 to 28986 tokens, ragged batches; DECODE_CASES: 1 to 32768 tokens of
context, ragged batches; fp16 and bf16; head_dim 64 and 128; GQA 32:8 and 64:8), as
  random        paged_batch(case): each request's K/V in pool slots scattered over a pool twice the
                size needed, its req_to_token row one of a table with spare rows. Every pool slot
                no request names is NaN, slot 0 included, where unused req_to_token entries point:
                a kernel that reads past a request's context cannot pass.
  large-logits  the decode cases of LARGE_LOGIT_CASES on large_logit_batch's inputs (q and k x8)
and last the sanitizer cases of bf16 d128 and fp16 d64 that are not among these (SANITIZED_CASES:
the fp16 d128 ones in each build's dtype and head_dim), as random.
Reference: references.paged.ref_paged_extend / ref_paged_decode (FP32); baseline:
baseline_paged_extend (plain torch in q's dtype; a decode is an extend of one token a request, as
the gate's own test takes it); judge: references.metrics.judge.

An adapter's launcher is a ``Launchers(extend=..., decode=...)``: the phases the kernel launches,
each ``launcher(module, inputs) -> output`` with ``inputs`` an Inputs. The kernel writes
``inputs.out`` (NaN until written). A phase left out is a named skip of its cases.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

import torch

from tilegate.families.outputs import written_output
from tilegate.fixtures.inputs import NAN_PAD_ROWS
from tilegate.fixtures.paged_cases import (
    DECODE_CASES,
    EXTEND_CASES,
    LARGE_LOGIT_CASES,
    LARGE_LOGIT_SEED,
    PagedCase,
    large_logit_batch,
    paged_batch,
)
from tilegate.gate.tile_site import paged_site
from tilegate.references.paged import baseline_paged_extend, ref_paged_decode, ref_paged_extend

if TYPE_CHECKING:
    from tilegate.families.spec import Kernel

FEATURE_OF: dict[str, str] = {}  # no case needs an optional input
AXES: tuple[str, ...] = ("token", "head", "col")  # the output's axes, as a failure names them
KINDS = ("random", "large-logits")


@dataclass(frozen=True)
class Case:
    paged: PagedCase
    kind: str

    @property
    def name(self) -> str:  # the gate's own paged test ids, less the config: ...-ctx57-new57-random
        return f"{self.paged.name}-{self.kind}"

    @property
    def phase(self) -> str:
        return "decode" if self.paged.extend_lens is None else "extend"


def _gate_cases() -> list[Case]:
    return [
        *(Case(c, "random") for c in [*EXTEND_CASES, *DECODE_CASES]),
        *(Case(c, "large-logits") for c in LARGE_LOGIT_CASES),
    ]


def all_cases() -> list[Case]:
    """The gate's own paged cases, then the sanitizer cases of the other builds that are not
    among them (so the numerics tier judges every case the sanitizers launch)."""
    gate = _gate_cases()
    known = {c.name for c in gate}
    derived = (c for cases in _SANITIZED.values() for c in cases)
    return [*gate, *dict.fromkeys(c for c in derived if c.name not in known)]


def _exercised(phases: tuple[str, ...]) -> dict[str, tuple]:
    """dtype, head_dim and mask values the cases of ``phases`` run: a kernel declaring more is
    refused at load (a value no case can judge)."""
    shapes = [c.paged.shape for c in all_cases() if c.phase in phases]
    return {
        "dtype": tuple(sorted({s.dtype for s in shapes})),
        "head_dim": tuple(sorted({s.head_dim for s in shapes})),
        "mask": tuple(sorted({"causal" if s.causal else "full" for s in shapes})),
    }


def _in(case: Case, dtype: str, head_dim: int) -> Case:
    """``case`` in another dtype and head_dim: its heads, lengths and kind kept."""
    shape = replace(case.paged.shape, dtype=dtype, head_dim=head_dim)
    return Case(replace(case.paged, shape=shape), case.kind)


def _build(c: Case) -> tuple[str, int]:
    return c.paged.shape.dtype, c.paged.shape.head_dim


def _named(names: tuple[str, ...]) -> list[Case]:
    by_name = {c.name: c for c in _gate_cases()}
    return [by_name[n] for n in names]


def _at(c: Case, dtype: str, head_dim: int) -> bool:
    s = c.paged.shape
    return (s.dtype, s.head_dim, s.q_heads, c.kind) == (dtype, head_dim, 32, "random")


def _has_prefix(c: Case) -> bool:
    return c.paged.extend_lens is not None and c.paged.seq_lens != c.paged.extend_lens


def _determinism(c: Case, dtype: str, head_dim: int) -> bool:
    """Extends over a cached prefix (below 32768 tokens), and decodes of 3782 tokens or more or of
    a ragged batch: the gate's own paged tests have no determinism cases of their own."""
    lens = c.paged.seq_lens
    if c.phase == "decode":
        return _at(c, dtype, head_dim) and (max(lens) >= 3782 or len(lens) > 1)
    return _at(c, dtype, head_dim) and _has_prefix(c) and max(lens) < 32768


# The determinism and sanitizer cases: fp16 d128 ones first (their names are those the GPU runs
# recorded), then the same in each other dtype and head_dim the cases judge, so that a kernel
# without fp16 or d128 (bf16 only, d64 only) is not left with capability skips alone.
OWN_BUILD = ("float16", 128)
OTHER_BUILDS = tuple(
    sorted(
        {(c.shape.dtype, c.shape.head_dim) for c in [*EXTEND_CASES, *DECODE_CASES]} - {OWN_BUILD}
    )
)
# Two launches, bit for bit: fp16 d128, 7 cases; in each other build, the gate's own cases there
# that the rule picks, less the slow (32768-token) ones: 2 each (an extend and a decode).
DETERMINISM_CASES = tuple(
    c.name
    for build in (OWN_BUILD, *OTHER_BUILDS)
    for c in _gate_cases()
    if _determinism(c, *build) and (build == OWN_BUILD or not c.paged.slow)
)
_SMALL_EXTEND = "causal-gqa32x8-d128-fp16-ctx57-new57-random"
_SMALL_DECODE = "causal-gqa32x8-d128-fp16-ctx57-decode-random"
# Sanitized launches, each a few blocks: 57 tokens of each phase; memcheck also a 1-token context,
# a ragged decode and the d64 extend over a 3653-token prefix (each request's tail and prefix).
# The fp16 d128 ones again in every other build.
_OWN_SANITIZED = {
    "memcheck": (
        _SMALL_EXTEND,
        "causal-gqa32x8-d64-fp16-ctx57_3782-new57_129-random",
        _SMALL_DECODE,
        "causal-gqa32x8-d128-fp16-ctx1-decode-random",
        "causal-gqa32x8-d128-fp16-ctx1_3782_17-decode-random",
    ),
    "racecheck": (_SMALL_EXTEND, _SMALL_DECODE),
    "initcheck": (_SMALL_EXTEND, _SMALL_DECODE),
}
_SANITIZED = {
    tool: list(
        dict.fromkeys(
            [
                *_named(names),
                *(
                    _in(c, *b)
                    for b in OTHER_BUILDS
                    for c in _named(names)
                    if _build(c) == OWN_BUILD
                ),
            ]
        )
    )
    for tool, names in _OWN_SANITIZED.items()
}
SANITIZED_CASES = {tool: tuple(c.name for c in cases) for tool, cases in _SANITIZED.items()}


@dataclass
class Inputs:
    """What SGLang's backend hands its attention (tilegate/serving/sglang_backend.py:1-13), the
    new tokens' K/V already in the pools. Index tensors are int64, as the gate's fixtures give."""

    phase: str  # "extend" or "decode"
    q: torch.Tensor  # [tokens, q_heads, d]: extend, each request's new tokens back to back;
    # decode, one token a request
    k_buffer: torch.Tensor  # [pool_tokens, kv_heads, d]: token_to_kv_pool.get_key_buffer(layer)
    v_buffer: torch.Tensor
    req_to_token: torch.Tensor  # [max_reqs, max_context]: pool slot of each request's position
    req_pool_indices: torch.Tensor  # [batch]: each request's row of req_to_token
    seq_lens: torch.Tensor  # [batch]: context tokens, the new ones included
    # extend only (None for decode), as SGLang 0.5.23's ForwardBatch names them
    # (sglang/srt/model_executor/forward_batch_info.py:666-668): new tokens, cached prefix
    # (seq_lens - extend_seq_lens) and each request's first row in q
    extend_seq_lens: torch.Tensor | None
    extend_prefix_lens: torch.Tensor | None
    extend_start_loc: torch.Tensor | None
    out: torch.Tensor  # like q, NaN: the kernel writes it
    sm_scale: float  # head_dim ** -0.5 (SGLang's layer.scaling)
    out_buffer: torch.Tensor  # ``out`` is its first rows; NAN_PAD_ROWS rows of NaN follow
    # the LaunchOption's value this launch runs with (the kernel's launch_options); None: none
    option: Any = None


@dataclass(frozen=True, kw_only=True)
class Launchers:
    """The phases a paged kernel launches, by keyword: ``Launchers(decode=my_decode)``. Each is
    ``launcher(module, inputs)``, writing ``inputs.out`` and returning it or None; the cases of a
    phase left out are named skips."""

    extend: Callable[[Any, Inputs], torch.Tensor] | None = None
    decode: Callable[[Any, Inputs], torch.Tensor] | None = None

    @property
    def phases(self) -> tuple[str, ...]:
        return tuple(f.name for f in fields(self) if getattr(self, f.name) is not None)

    def __call__(self, module: Any, x: Inputs) -> torch.Tensor:
        launcher = getattr(self, x.phase)
        if launcher is None:
            raise ValueError(f"no {x.phase} launcher: Launchers gives {', '.join(self.phases)}")
        return launcher(module, x)


def _launchers(kernel: Kernel) -> Launchers:
    assert isinstance(kernel.launcher, Launchers)  # refusal() saw to it
    return kernel.launcher


def refusal(kernel: Kernel) -> str | None:
    """Why the adapter cannot be judged by this family (Kernel refuses it, naming its
    line), or None."""
    usage = "launcher=tilegate.families.paged.Launchers(extend=..., decode=...)"
    if not isinstance(kernel.launcher, Launchers):
        given = "none" if kernel.launcher is None else f"{kernel.launcher!r}"
        return (
            f"family 'paged' takes {usage}, naming the phases the kernel launches (given: "
            f"{given}); each is launcher(module, inputs) -> output"
        )
    launchers = kernel.launcher
    if not launchers.phases:
        return f"its Launchers name no phase: give extend=, decode= or both ({usage})"
    for phase in launchers.phases:
        if not callable(getattr(launchers, phase)):
            return f"Launchers({phase}=...) is not callable: give launcher(module, inputs)"
    if kernel.gpu_shape is not None:
        return (
            "family 'paged' takes its shapes from the gate's own cases "
            "(tilegate/fixtures/paged_cases.py): leave gpu_shape out"
        )
    exercised, caps = _exercised(launchers.phases), kernel.capabilities
    for axis, declared in (
        ("dtype", caps.dtypes),
        ("head_dim", caps.head_dims),
        ("mask", caps.masks),
    ):
        unjudged = [v for v in declared if v not in exercised[axis]]
        if unjudged:
            return (
                f"capabilities declare {axis} {unjudged}, which no {'/'.join(launchers.phases)} "
                f"case of family 'paged' exercises (its {axis}s: "
                f"{', '.join(map(str, exercised[axis]))}); leave them out"
            )
    # as the dense family's: each axis may be exercised while a problem's pair is not (no bf16
    # case at d64), and its build would then skip every GPU case, green without a GPU check
    judged = {
        (c.paged.shape.dtype, c.paged.shape.head_dim)
        for c in all_cases()
        if c.phase in launchers.phases
    }
    unjudged = [p.name for p in kernel.problems if (p.dtype, p.head_dim) not in judged]
    if unjudged:
        return (
            f"problems {unjudged} have a dtype and head_dim that no "
            f"{'/'.join(launchers.phases)} case of family 'paged' runs together (its cases: "
            f"{', '.join(map(str, sorted(judged)))})"
        )
    return None


def family_cases(kernel: Kernel) -> list[Case]:
    return all_cases()


def missing(kernel: Kernel, case: Case) -> str | None:
    """A named skip: a phase the kernel's Launchers leave out, or a dtype, head_dim or mask its
    capabilities do."""
    phases = _launchers(kernel).phases
    if case.phase not in phases:
        return f"{kernel.name}: its Launchers leave out {case.phase} (given: {', '.join(phases)})"
    shape = case.paged.shape
    mask = "causal" if shape.causal else "full"
    return kernel.capabilities.left_out(
        kernel.name, dtype=shape.dtype, head_dim=shape.head_dim, mask=mask
    )


def case_axes(case: Case) -> dict[str, Any]:
    """The capability axes' values the case runs."""
    s = case.paged.shape
    return {"dtype": s.dtype, "head_dim": s.head_dim, "mask": "causal" if s.causal else "full"}


def seed(case: Case) -> int:
    return LARGE_LOGIT_SEED if case.kind == "large-logits" else 0


def site(case: Case, index: tuple[int, ...], tiles: tuple[int, int]) -> str:
    """Where output element ``index`` ([token, head, col]) lies in the tiling (a decode's query
    block is its one row)."""
    p = case.paged
    return paged_site(index[0], p.seq_lens, p.extend_lens, *tiles)


def build_of(case: Case) -> str:
    """The compile-time part of a case (heads, head_dim, dtype: what the gate's own paged kernels
    fix at build): its tests share an xdist worker, so that each build compiles once."""
    return f"{case.phase}-{case.paged.shape.name}"


def is_slow(case: Case) -> bool:
    return case.paged.slow


def sanitized_by_default(case: Case) -> bool:
    return case.name in SANITIZED_CASES["memcheck"]


def prepare(kernel: Kernel, case: Case, device: str) -> Inputs:
    """The gate's own batch for the case (paged_batch, or large_logit_batch), as SGLang names it."""
    build = large_logit_batch if case.kind == "large-logits" else paged_batch
    b = build(case.paged, device)
    tokens, heads, dim = b.q.shape
    buffer = b.q.new_full((tokens + NAN_PAD_ROWS, heads, dim), float("nan"))
    extend = case.phase == "extend"
    starts = torch.cumsum(b.extend_lens, 0) - b.extend_lens
    return Inputs(
        phase=case.phase,
        q=b.q,
        k_buffer=b.k_pool,
        v_buffer=b.v_pool,
        req_to_token=b.req_to_token,
        req_pool_indices=b.req_pool_indices,
        seq_lens=b.seq_lens,
        extend_seq_lens=b.extend_lens if extend else None,
        extend_prefix_lens=b.seq_lens - b.extend_lens if extend else None,
        extend_start_loc=starts if extend else None,
        out=buffer[:tokens],
        sm_scale=dim**-0.5,
        out_buffer=buffer,
    )


def launch(kernel: Kernel, module, x: Inputs) -> torch.Tensor:
    """One launch into ``x.out``, NaN again first (each launch must write every element); the
    family judges ``x.out`` (tilegate.families.outputs), and gpu.run copies it."""
    x.out.fill_(float("nan"))
    return written_output(kernel, "paged", x.out, _launchers(kernel)(module, x))


def reference(kernel: Kernel, x: Inputs) -> torch.Tensor:
    pools = (x.k_buffer, x.v_buffer, x.req_to_token, x.req_pool_indices, x.seq_lens)
    if x.extend_seq_lens is None:
        return ref_paged_decode(x.q, *pools, scale=x.sm_scale)
    return ref_paged_extend(x.q, *pools, x.extend_seq_lens, scale=x.sm_scale)


def baseline(kernel: Kernel, x: Inputs) -> torch.Tensor:
    new = x.extend_seq_lens if x.extend_seq_lens is not None else torch.ones_like(x.seq_lens)
    return baseline_paged_extend(
        x.q, x.k_buffer, x.v_buffer, x.req_to_token, x.req_pool_indices, x.seq_lens, new
    )


def record_dtype(kernel: Kernel, case: Case) -> str:
    """The numerics summary's row: the case's dtype, as the gate's own paged tests record."""
    return case.paged.shape.dtype


def closed_form_failure(case: Case, x: Inputs, out: torch.Tensor, ref: torch.Tensor) -> None:
    """No paged case has an answer in closed form: the reference alone judges them."""
    return None


def stray_writes(x: Inputs) -> str | None:
    """What the kernel wrote outside its output: the NaN rows past the batch's tokens."""
    tokens = x.out.shape[0]
    written = int((~torch.isnan(x.out_buffer[tokens:])).sum().item())
    if written:
        return f"the kernel wrote {written} elements past the batch's {tokens} tokens of output"
    return None
