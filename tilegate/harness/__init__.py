"""The gate's tiers that run outside pytest, one package each: a driver (runs in the test process),
a child (the process it starts, under a profiler, a sanitizer or SGLang's python) and the protocol
between them. Modules here are shared by the tiers: device baselines, workloads, runners."""
