"""Error growth with sequence length, and the detector that flags fp16 accumulation.

A series holds, per length, the mean error of a kernel and of the plain same-precision
torch baseline, both against the FP32 reference, relative to the reference's magnitude.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from tilegate.references import tolerances as tol
from tilegate.references.metrics import loglog_slope


@dataclass(frozen=True)
class DriftSeries:
    label: str
    lengths: tuple[int, ...]
    kernel_rel_err: tuple[float, ...]
    baseline_rel_err: tuple[float, ...]

    @property
    def ratios(self) -> tuple[float, ...]:
        return tuple(k / b for k, b in zip(self.kernel_rel_err, self.baseline_rel_err))

    @property
    def kernel_slope(self) -> float:
        return loglog_slope(self.lengths, self.kernel_rel_err)

    @property
    def baseline_slope(self) -> float:
        return loglog_slope(self.lengths, self.baseline_rel_err)

    def as_dict(self) -> dict:
        return asdict(self) | {
            "ratios": self.ratios,
            "kernel_slope": self.kernel_slope,
            "baseline_slope": self.baseline_slope,
        }


def fp16_accumulation_flags(series: DriftSeries) -> list[str]:
    """Why ``series`` looks like low-precision accumulation; empty when it does not."""
    return [
        f"at {n} tokens the mean error is {r:.2f}x the fp16/bf16 baseline's (limit "
        f"{tol.DRIFT_RATIO_LIMIT})"
        for n, r in zip(series.lengths, series.ratios)
        if r > tol.DRIFT_RATIO_LIMIT
    ]


def table_lines(series: list[DriftSeries]) -> list[str]:
    head = f"{'length':>7} " + " ".join(f"{s.label + ' rel err':>22} {'x base':>7}" for s in series)
    lines = [head + f" {'baseline rel err':>17}"]
    for i, n in enumerate(series[0].lengths):
        row = f"{n:>7} " + " ".join(
            f"{s.kernel_rel_err[i]:>22.3e} {s.ratios[i]:>7.2f}" for s in series
        )
        lines.append(row + f" {series[0].baseline_rel_err[i]:>17.3e}")
    lines.append(
        "log-log slope: "
        + ", ".join(f"{s.label} {s.kernel_slope:.3f}" for s in series)
        + f", baseline {series[0].baseline_slope:.3f}"
    )
    return lines
