"""The bugs the gate plants in its own kernels, one enumeration per kernel family.

Each is a bug some tier must catch: the gate's sensitivity tests build a kernel with one planted
and check that its tier fails it. A member's value is the name that build names, cache keys,
golden snapshots and test ids carry, so a member formats, compares, hashes and serialises (JSON)
as that string; a misspelt member is an AttributeError at import, a misspelt name an error where
it is converted (``PrefillDefect("raec")``: ValueError).

A defect is planted through its family's knobs (kernels/hooks.py: ``knobs(defect)``), the hooks
every production factory takes with healthy defaults; the kernels never import this module.
A kernel takes only a member of its own family (``planted``): a plain string or another family's
member is refused. This module imports no TileLang: SGLang's plugin processes import it.
"""

from __future__ import annotations

from enum import Enum
from typing import TypeVar

from tilegate.kernels.hooks import CombineKnobs, ExtendKnobs, Knobs, PrefillKnobs


class Defect(str, Enum):
    """A planted defect; each kernel family's enumeration derives from this one."""

    # the value alone, on every Python (3.11 formats a str mixin as Class.MEMBER)
    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class PrefillDefect(Defect):
    """flash_fwd's defects (kernels/flash_fwd.py)."""

    SCALAR_GEMM = "scalar_gemm"  # matrix products as plain loops: no MFMA (ISA tier)
    WRONG_SCALE = "wrong_scale"  # softmax scale 1/sqrt(d) * 1.05 (numerics tier)
    CAUSAL_OFF_BY_ONE = "causal_off_by_one"  # each query also sees the next key (numerics tier)
    DROP_LAST_BLOCK = "drop_last_block"  # the last partial key block is skipped (numerics tier)
    HANG = "hang"  # a loop that does not end in any test's lifetime (the GPU tiers' deadline)
    # no barrier between the output tile's shared-memory writes and other threads' reads (racecheck)
    RACE = "race"
    # K tiles read with no bound check: the last partial block reads past seq_k (memcheck)
    READ_PAST_SEQ_K = "read_past_seq_k"
    # the key block in the middle of the context is ignored (end-to-end tier, long prompts)
    SKIP_MIDDLE_BLOCK = "skip_middle_block"
    WRONG_SCALE_10PCT = "wrong_scale_10pct"  # softmax scale 1/sqrt(d) * 1.1 (end-to-end tier)
    # gfx942's direct store of Out from registers (q_in_registers) leaves the last query row
    # unwritten; configs that store through shared memory (sm90's) are unchanged (numerics tier)
    REGISTER_STORE_SKIPS_LAST_ROW = "register_store_skips_last_row"
    # a sliding window's first key block rounded up: a row tile whose window opens inside a key
    # block skips that block (numerics tier, windowed cases only)
    WINDOW_START_PAST_TILE_EDGE = "window_start_past_tile_edge"


class ExtendDefect(Defect):
    """paged_extend's defects (kernels/paged_extend.py). The last three are races on asynchronous
    paths, which compute-sanitizer does not see: the stress tier (suite/stress/test_stress.py)."""

    # after a cached prefix, each new token is placed one position late, so it also sees the key
    # after its own (end-to-end tier)
    PREFIX_OFF_BY_ONE = "prefix_off_by_one"
    # producer-warpgroup path (gather_warpgroup): P@V reads a V stage without waiting on its ready
    # barrier
    V_READ_BEFORE_READY = "v_read_before_ready"
    # producer-warpgroup path: a K stage is released (k_free) before Q@K^T has read it
    K_STAGE_RELEASED_EARLY = "k_stage_released_early"
    # register-prefetch path (prefetch_kv): block kb + 1, prefetched into registers, is written
    # into the shared K and V tiles while other warps' products of block kb may still read them
    # (the barrier at the top of the key-block loop is gone)
    PREFETCH_OVERWRITES_TILE_IN_USE = "prefetch_overwrites_tile_in_use"


class CombineDefect(Defect):
    """paged_decode_combine's defects (kernels/paged_decode.py)."""

    # the last split holding keys (the context cut into chunks of whole key blocks) is left out
    # of the combination (end-to-end tier): a short part of a long context, or, where one split
    # holds the whole context, every key (NaN out)
    DROP_SMALLEST_SPLIT = "drop_smallest_split"


# The extend defects planted in one of its asynchronous paths: a config without that path has
# nowhere to plant them (paged_extend refuses the knobs for such a config).
WARPGROUP_DEFECTS = (ExtendDefect.V_READ_BEFORE_READY, ExtendDefect.K_STAGE_RELEASED_EARLY)
PREFETCH_DEFECTS = (ExtendDefect.PREFETCH_OVERWRITES_TILE_IN_USE,)
# The prefill defects planted in a sliding window's code: a shape without a window builds the
# healthy kernel with them, so only windowed cases can catch them.
WINDOW_DEFECTS = (PrefillDefect.WINDOW_START_PAST_TILE_EDGE,)

_KNOBS: dict[Defect, Knobs] = {
    PrefillDefect.SCALAR_GEMM: PrefillKnobs(scalar_gemm=True),
    PrefillDefect.WRONG_SCALE: PrefillKnobs(scale_factor=1.05),
    PrefillDefect.CAUSAL_OFF_BY_ONE: PrefillKnobs(sees_next_key=1),
    PrefillDefect.DROP_LAST_BLOCK: PrefillKnobs(whole_key_blocks=True),
    PrefillDefect.HANG: PrefillKnobs(hang=True),
    PrefillDefect.RACE: PrefillKnobs(racy_store=True),
    PrefillDefect.READ_PAST_SEQ_K: PrefillKnobs(unguarded_k=True),
    PrefillDefect.SKIP_MIDDLE_BLOCK: PrefillKnobs(skip_middle_block=True),
    PrefillDefect.WRONG_SCALE_10PCT: PrefillKnobs(scale_factor=1.10),
    PrefillDefect.REGISTER_STORE_SKIPS_LAST_ROW: PrefillKnobs(unstored_last_rows=1),
    PrefillDefect.WINDOW_START_PAST_TILE_EDGE: PrefillKnobs(window_start_rounds_up=True),
    ExtendDefect.PREFIX_OFF_BY_ONE: ExtendKnobs(prefix_shift=1),
    ExtendDefect.V_READ_BEFORE_READY: ExtendKnobs(skip_v_wait=True),
    ExtendDefect.K_STAGE_RELEASED_EARLY: ExtendKnobs(release_k_early=True),
    ExtendDefect.PREFETCH_OVERWRITES_TILE_IN_USE: ExtendKnobs(own_barriers=True),
    CombineDefect.DROP_SMALLEST_SPLIT: CombineKnobs(drop_smallest_split=True),
}
# each family's knobs record
FAMILY_KNOBS: dict[type[Defect], type[Knobs]] = {
    PrefillDefect: PrefillKnobs,
    ExtendDefect: ExtendKnobs,
    CombineDefect: CombineKnobs,
}

D = TypeVar("D", bound=Defect)


def planted(defect: object, family: type[D] | None, kernel: str) -> D | None:
    """``defect`` as ``kernel`` takes it: None (healthy) or a member of ``family`` (None: the
    kernel plants none). TypeError for anything else, a plain string included."""
    if defect is None or (family is not None and isinstance(defect, family)):
        return defect
    if family is None:
        raise TypeError(f"{kernel} plants no defects, got {defect!r}")
    name = family.__name__
    if isinstance(defect, Defect):
        other = type(defect).__name__
        raise TypeError(f"{kernel} plants {name}s, not the {other} {defect.value!r}")
    member = next((m for m in family if m.value == defect), None)
    hint = f"{name}.{member.name}" if member else f"one of {[m.value for m in family]}"
    raise TypeError(
        f"{kernel} takes a {name} member, not {defect!r}: pass {hint} ({name}(name) "
        "converts a name read from a command line or a file)"
    )


def knobs_for(defect: Defect | None, family: type[D] | None = None, kernel: str = "the kernel"):
    """The knobs that plant ``defect`` (None: None, the factory's healthy default). With
    ``family``, ``defect`` must be one of its members (``planted``)."""
    if family is not None:
        defect = planted(defect, family, kernel)
    if defect is None:
        return None
    if not isinstance(defect, Defect):
        raise TypeError(f"not a planted defect: {defect!r}")
    return _KNOBS[defect]
