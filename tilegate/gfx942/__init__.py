"""The gfx942 code-object pipeline, on any machine: the cross toolchain (toolchain, pch), building
and reading a code object (code_object, isa), its inner loop and latency proxies (loop_forest,
inner_loop, latency), and the rules and golden snapshots that judge it (isa_checks, golden)."""
