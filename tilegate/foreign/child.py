"""Runs a foreign kernel over its GPU family's cases, for a sanitizer to watch
(tilegate.foreign.tiers.test_foreign_memcheck):

    python -m tilegate.foreign.child ADAPTER_MODULE KERNEL [CASE ...]

Each case is one launch, announced on a progress line; the last line is the sanitizer protocol's
DONE. The 8192-token cases are left out unless named: under memcheck they take minutes.
"""

from __future__ import annotations

import sys

from tilegate.foreign import gpu
from tilegate.foreign.discover import load
from tilegate.harness.sanitize import protocol


def main(argv: list[str]) -> int:
    adapter, name, *wanted = argv
    (kernel,) = [k for k in load(adapter, "the child's argument") if k.name == name]
    for case in gpu.family_cases(kernel):
        if (wanted and case.name not in wanted) or (not wanted and case.tokens > 1024) or gpu.feature_missing(kernel, case):
            continue
        print(protocol.progress_line(case.name), flush=True)
        try:
            gpu.run(kernel, gpu.prepare(kernel, case))
        except Exception as exc:  # the sanitizer's verdict is about launches: a build failure is said, not hidden
            print(protocol.progress_line(f"{case.name} did not run: {type(exc).__name__}: {str(exc)[:300]}"), flush=True)
            return 1
    print(protocol.DONE, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
