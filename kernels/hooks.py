"""The steps of a kernel the gate may change, as plain values: one record of knobs per kernel
family, every default the healthy kernel.

A factory takes its family's knobs (``flash_fwd(shape, cfg, knobs=PrefillKnobs())``) and builds
its TileLang hooks from them, so the kernel body never branches on a bug. Production passes none;
the gate fills them from its planted defects (tilegate/gate/planted.py), which nothing here
imports. A record also names the TileLang pass configs its build needs: TileLang itself inserts
the barriers and bound checks that some knobs take away.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


class Knobs:
    """What every family's knobs share: healthy or not, the changed fields, the pass configs."""

    @property
    def healthy(self) -> bool:
        return self == type(self)()

    def changed(self) -> dict[str, object]:
        """The fields that differ from the healthy kernel's."""
        default = type(self)()
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)  # type: ignore[arg-type]
            if getattr(self, f.name) != getattr(default, f.name)
        }

    def pass_configs(self) -> dict[str, object]:
        """The TileLang pass configs a build with these knobs needs ({} when healthy)."""
        return {}

    def __str__(self) -> str:
        changed = ",".join(f"{k}={v}" for k, v in self.changed().items())
        return f"{type(self).__name__}({changed})"


def require(knobs: object, family: type[Knobs], kernel: str) -> None:
    """TypeError unless ``knobs`` is ``family``'s record: another family's knobs, or a defect's
    name, would build a kernel without the hooks it meant."""
    if not isinstance(knobs, family):
        raise TypeError(f"{kernel} takes {family.__name__}, not {knobs!r}")


@dataclass(frozen=True)
class PrefillKnobs(Knobs):
    """flash_fwd's hooks (kernels/flash_fwd.py)."""

    scalar_gemm: bool = False  # the products as loops (online_softmax.qk_scores, accumulate_pv)
    scale_factor: float = 1.0  # on the softmax scale
    sees_next_key: int = 0  # keys past its causal diagonal that a query row sees
    whole_key_blocks: bool = False  # key blocks counted rounding down: a partial last one skipped
    hang: bool = False  # spin before normalising the output
    racy_store: bool = False  # the output stored through shared memory with no barrier
    unguarded_k: bool = False  # K loaded element by element, with no bound check
    skip_middle_block: bool = False  # the middle key block masked out
    unstored_last_rows: int = 0  # query rows at the end of the sequence the register store skips
    window_start_rounds_up: bool = False  # a sliding window's first key block rounded up, not down

    def pass_configs(self) -> dict[str, object]:
        configs: dict[str, object] = {}
        if self.racy_store:  # TileLang would place the barrier the racy store leaves out
            configs |= {"tl.disable_thread_storage_sync": True, "tl.disable_tma_lower": True}
        if self.unguarded_k:  # and the bound check the unguarded load leaves out
            configs["tl.disable_safe_memory_legalize"] = True
        return configs


@dataclass(frozen=True)
class ExtendKnobs(Knobs):
    """paged_extend's hooks (kernels/paged_extend.py)."""

    prefix_shift: int = 0  # positions each new token after a cached prefix is placed late
    skip_v_wait: bool = False  # P@V does not wait on the V stage's ready barrier
    release_k_early: bool = False  # the K stage is released before Q@K^T reads it
    own_barriers: bool = False  # the kernel places the prefetch's barriers, less the loop-top one

    def pass_configs(self) -> dict[str, object]:
        # TileLang places every shared-memory barrier unless told the kernel places its own
        return {"tl.disable_thread_storage_sync": True} if self.own_barriers else {}


@dataclass(frozen=True)
class CombineKnobs(Knobs):
    """paged_decode_combine's hook (kernels/paged_decode.py)."""

    drop_smallest_split: bool = False  # the last split holding keys gets weight 0
