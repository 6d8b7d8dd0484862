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
class Verdict:
    passed: bool
    max_ratio: float  # kernel max error / (2 x baseline max error + floor): <= 1 passes
    mean_ratio: float
    kernel: Errors
    baseline: Errors
    floor: float

    def explain(self) -> str:
        return (
            f"max err {self.kernel.max_abs:.3e} (baseline {self.baseline.max_abs:.3e}, floor "
            f"{self.floor:.1e}, "
            f"ratio {self.max_ratio:.2f}); mean err {self.kernel.mean_abs:.3e} "
            f"(baseline {self.baseline.mean_abs:.3e}, ratio {self.mean_ratio:.2f})"
        )


def _ratio(err: float, bound: float) -> float:
    """err / bound; a bound of 0 (an all-zero reference the baseline matched exactly) admits no
    error."""
    return err / bound if bound > 0 else (0.0 if err == 0 else math.inf)


def judge(out: torch.Tensor, ref: torch.Tensor, baseline_out: torch.Tensor) -> Verdict:
    """``out`` (kernel) and ``baseline_out`` (plain same-precision torch) against the FP32
    ``ref``."""
    base, floor = errors(baseline_out, ref), tol.abs_floor(ref, out.dtype)
    if not torch.isfinite(out).all():  # NaN/Inf never pass, whatever the baseline did
        return Verdict(False, math.inf, math.inf, Errors(math.inf, math.inf, 0.0), base, floor)
    kernel = errors(out, ref)
    max_ratio = _ratio(kernel.max_abs, tol.MAX_ERR_MULTIPLE * base.max_abs + floor)
    mean_ratio = _ratio(
        kernel.mean_abs, tol.MEAN_ERR_MULTIPLE * base.mean_abs + tol.mean_floor(ref, out.dtype)
    )
    return Verdict(max_ratio <= 1 and mean_ratio <= 1, max_ratio, mean_ratio, kernel, base, floor)


def loglog_slope(lengths, values) -> float:
    """Least-squares slope of log(value) against log(length): the growth exponent."""
    xs = [math.log(x) for x in lengths]
    ys = [math.log(max(y, 1e-30)) for y in values]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
