"""Error metrics and the verdicts built on them. Pure torch; no kernel knowledge."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from tilegate.references import tolerances as tol


@dataclass(frozen=True)
class Errors:
    max_abs: float
    mean_abs: float
    ref_mean_abs: float

    @property
    def mean_rel(self) -> float:
        """Mean error relative to the reference's mean magnitude (the drift measure)."""
        return self.mean_abs / self.ref_mean_abs if self.ref_mean_abs else math.inf


def errors(out: torch.Tensor, ref: torch.Tensor) -> Errors:
    diff = (out.double() - ref.double()).abs()
    return Errors(diff.max().item(), diff.mean().item(), ref.double().abs().mean().item())


@dataclass(frozen=True)
class Worst:
    """Where the kernel's output is furthest from the reference (over its finite elements): the
    element's index, and the kernel's, the reference's and plain torch's values there."""

    index: tuple[int, ...]
    got: float
    want: float
    baseline: float


@dataclass(frozen=True)
class NonFinite:
    """The rows (every index but the last) where the kernel's output holds a NaN or an Inf."""

    rows: int
    first: tuple[tuple[int, ...], ...]  # the first few, in index order


NONFINITE_SHOWN = 4


@dataclass(frozen=True)
class Verdict:
    passed: bool
    max_ratio: float  # kernel max error / (2 x baseline max error + floor): <= 1 passes
    mean_ratio: float
    kernel: Errors
    baseline: Errors
    floor: float
    worst: Worst | None = None  # None: no finite element
    nonfinite: NonFinite | None = None  # None: every element finite
    axes: tuple[str, ...] = ()  # the output's axis names, for the messages (default: i0, i1, ...)
    context: str = ""  # what the caller adds: the site in the tiling, the seed, a command

    @property
    def failure_index(self) -> tuple[int, ...] | None:
        """The element a failure points at: the first NaN/Inf, else the worst one."""
        if self.nonfinite is not None:
            return self.nonfinite.first[0]
        return self.worst.index if self.worst is not None else None

    def at(self, index: tuple[int, ...]) -> str:
        # a row's index is the axes but the last
        names = self.axes[: len(index)] if len(self.axes) >= len(index) else ()
        names = names or tuple(f"i{n}" for n in range(len(index)))
        return ", ".join(f"{name} {i}" for name, i in zip(names, index))

    def explain(self) -> str:
        text = (
            f"max err {self.kernel.max_abs:.3e} (baseline {self.baseline.max_abs:.3e}, floor "
            f"{self.floor:.1e}, "
            f"ratio {self.max_ratio:.2f}); mean err {self.kernel.mean_abs:.3e} "
            f"(baseline {self.baseline.mean_abs:.3e}, ratio {self.mean_ratio:.2f})"
        )
        if self.worst is not None:
            w = self.worst
            text += (
                f"; worst at {self.at(w.index)}: got {w.got:.4e}, want {w.want:.4e} (plain torch "
                f"{w.baseline:.4e})"
            )
        if self.nonfinite is not None:
            first = "; ".join(f"({self.at(i)})" for i in self.nonfinite.first)
            text += f"; NaN/Inf in {self.nonfinite.rows} rows, first {first}"
        return f"{text}\n{self.context}" if self.context else text


def _worst(out: torch.Tensor, ref: torch.Tensor, baseline_out: torch.Tensor) -> Worst | None:
    # fp32 is exact enough to find the place; non-finite elements never win it
    diff = (out.float() - ref.float()).abs_().nan_to_num_(nan=-1.0, posinf=-1.0, neginf=-1.0)
    if diff.numel() == 0 or diff.max().item() < 0:
        return None
    flat = int(diff.argmax().item())
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), diff.shape))
    return Worst(index, out[index].item(), ref[index].item(), baseline_out[index].item())


def _nonfinite(out: torch.Tensor) -> NonFinite | None:
    bad = ~torch.isfinite(out)
    rows = bad.any(-1) if out.dim() > 1 else bad
    count = int(rows.sum().item())
    if not count:
        return None
    first = rows.nonzero()[:NONFINITE_SHOWN].tolist()
    return NonFinite(count, tuple(tuple(int(i) for i in r) for r in first))


def _ratio(err: float, bound: float) -> float:
    """err / bound; a bound of 0 (an all-zero reference the baseline matched exactly) admits no
    error."""
    return err / bound if bound > 0 else (0.0 if err == 0 else math.inf)


def judge(
    out: torch.Tensor, ref: torch.Tensor, baseline_out: torch.Tensor, axes: tuple[str, ...] = ()
) -> Verdict:
    """``out`` (kernel) and ``baseline_out`` (plain same-precision torch) against the FP32
    ``ref``; ``axes`` names the output's axes in the verdict's messages."""
    base, floor = errors(baseline_out, ref), tol.abs_floor(ref, out.dtype)
    worst = _worst(out, ref, baseline_out)
    if nonfinite := _nonfinite(out):  # NaN/Inf never pass, whatever the baseline did
        inf, infinite = math.inf, Errors(math.inf, math.inf, 0.0)
        return Verdict(False, inf, inf, infinite, base, floor, worst, nonfinite, axes)
    kernel = errors(out, ref)
    max_ratio = _ratio(kernel.max_abs, tol.MAX_ERR_MULTIPLE * base.max_abs + floor)
    mean_ratio = _ratio(
        kernel.mean_abs, tol.MEAN_ERR_MULTIPLE * base.mean_abs + tol.mean_floor(ref, out.dtype)
    )
    passed = max_ratio <= 1 and mean_ratio <= 1
    return Verdict(passed, max_ratio, mean_ratio, kernel, base, floor, worst, None, axes)


def loglog_slope(lengths, values) -> float:
    """Least-squares slope of log(value) against log(length): the growth exponent."""
    xs = [math.log(x) for x in lengths]
    ys = [math.log(max(y, 1e-30)) for y in values]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
