"""Runs an adapted kernel over its GPU family's cases, for a sanitizer to watch
(tilegate.testing.kernel_tiers.test_kernel_sanitizer):

    python -m tilegate.families.child MODULE[:ATTR] KERNEL [CASE ...]

MODULE[:ATTR] is where discovery found the kernel (tilegate.families.discover.origin_of). Each case
is one launch, announced on a progress line; the last line is the sanitizer protocol's DONE. With
no CASE: the family's cases its sanitized_by_default picks (sparse-mla: every case below 1024
tokens; under memcheck the 8192-token ones take minutes). Cases the kernel's capabilities leave
out, and cases a known lowering finding covers here, are not run. A CASE that no case of the
family carries is an error naming it, and so is a CASE the kernel does not run (exit 2): a typo
would otherwise run nothing and print DONE.
"""

from __future__ import annotations

import sys

from tilegate.families import gpu
from tilegate.families.discover import load
from tilegate.families.spec import Kernel
from tilegate.harness.sanitize import protocol


def chosen_cases(
    kernel: Kernel, wanted: tuple[str, ...] = (), named_by: str = "the child's arguments"
) -> list:
    """The family's cases named in ``wanted``, or (none named) those it sanitizes by default. A
    name no case carries is an error (gpu.UnknownCase) naming it and ``named_by``."""
    if wanted:
        return gpu.named_cases(kernel, wanted, named_by)
    by_default = kernel.family_module().sanitized_by_default
    return [c for c in gpu.family_cases(kernel) if by_default(c)]


def child_cases(
    kernel: Kernel, wanted: tuple[str, ...] = (), named_by: str = "the child's arguments"
) -> list:
    """chosen_cases less those its capabilities leave out and those a lowering finding covers."""

    def runs(case) -> bool:
        known = any("lowering" in f.rules for f in kernel.findings_for_case(case.name, "numerics"))
        return not known and gpu.feature_missing(kernel, case) is None

    return [c for c in chosen_cases(kernel, wanted, named_by) if runs(c)]


def main(argv: list[str]) -> int:
    origin, name, *wanted = argv
    (kernel,) = [k for k in load(origin, "the child's argument") if k.name == name]
    cases = child_cases(kernel, tuple(wanted))
    runs = {c.name for c in cases}
    if skipped := [n for n in dict.fromkeys(wanted) if n not in runs]:
        # a named case the kernel does not run: running the rest and printing DONE would hide it
        print(
            f"tilegate.families.child: {kernel.name} does not run {skipped}: its capabilities "
            "leave them out, or a known lowering finding covers them",
            file=sys.stderr,
        )
        return 2
    for case in cases:
        print(protocol.progress_line(case.name), flush=True)
        # a launch that fails ends the child: no DONE, the test says so
        gpu.run(kernel, gpu.prepare(kernel, case))
    print(protocol.DONE, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
