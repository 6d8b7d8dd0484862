"""What a GPU test launches, named before it runs: a Build is one kernel of the registry for a
shape and a config (or the local target's default or every config), and phase_builds gives the
builds of one call of a phase. The precompile step (tilegate/testing/precompile.py) compiles
them before the first test; the gate's own kernel records (tilegate/families/own.py) name theirs.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilegate.kernels.problem import AttentionShape

# A Build's config, when it is not one config: the local GPU's table decides (resolved on the GPU
# machine, where the table is known; never at collection).
DEFAULT = "default"  # the kernel's default config for the local target
EVERY = "every"  # every config of the local target's table


@dataclass(frozen=True)
class Build:
    """One kernel a test launches: a KERNELS name, its shape, a config (or DEFAULT / EVERY) and the
    factory's keyword arguments (a planted defect) as sorted (name, value) pairs."""

    kernel: str
    shape: AttentionShape
    cfg: object = DEFAULT
    options: tuple = ()

    def __post_init__(self):
        if "defect" in dict(self.options):  # the factories take knobs (kernels/hooks.py)
            raise TypeError(f"{self.kernel}: plant a defect with phase_builds(defect=...) or knobs")

    def resolved(self, target: str) -> list[Build]:
        """This build with a real config: one Build per config of ``target`` that it names."""
        from tilegate.gate.registry import KERNELS
        from tilegate.kernels.configs import default_config

        tables = KERNELS[self.kernel].config_tables
        if self.cfg == DEFAULT:
            configs = [default_config(target, self.shape.head_dim, tables)]
        elif self.cfg == EVERY:
            configs = list(tables[target][self.shape.head_dim])
        else:
            configs = [self.cfg]
        return [Build(self.kernel, self.shape, cfg, self.options) for cfg in configs]

    def compile(self) -> None:
        """Compile exactly as the runtime does when a test launches this kernel."""
        from tilegate import runtime
        from tilegate.gate.registry import KERNELS

        runtime.compiled(KERNELS[self.kernel].factory, self.shape, self.cfg, **dict(self.options))


def phase_builds(phase: str, shape: AttentionShape, cfg=DEFAULT, **options) -> list[Build]:
    """What one call of a phase launches (tilegate.gate.registry.PHASES: a decode is the split-KV
    step, then the combine step). ``defect`` is planted through its knobs
    (tilegate/gate/planted.py), in the kernel of the phase it belongs to."""
    from tilegate.gate.planted import knobs_for
    from tilegate.gate.registry import KERNELS, PHASES

    # None: the factory's default
    defect = options.pop("defect", None)
    builds = []
    for name in PHASES[phase]:
        # the defect's knobs go to the kernel it belongs to (decode: the combine step)
        mine = defect is not None and isinstance(defect, KERNELS[name].defects or ())
        opts = {**options, "knobs": knobs_for(defect) if mine else None}
        pairs = tuple(sorted((k, v) for k, v in opts.items() if v is not None))
        builds.append(Build(name, shape, cfg, pairs))
    if defect is not None and all(dict(b.options).get("knobs") is None for b in builds):
        raise TypeError(f"no kernel of {phase} plants {defect!r}")
    return builds
