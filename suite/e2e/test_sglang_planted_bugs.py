"""The harness's planted kernel bugs (tilegate.harness.sglang.instrumented.PlantedKernelOps), on the
CPU: each hands the production paged entry points exactly its one change, and nothing else. The GPU
tier (suite/e2e/test_sglang_gpu.py) proves each one fails the judgement through SGLang's engine."""

from __future__ import annotations

import pytest
import torch

from tilegate.gate.planted import CombineDefect, ExtendDefect, knobs_for
from tilegate.harness.sglang import registration
from tilegate.harness.sglang.instrumented import PlantedKernelOps
from tilegate.harness.sglang.planted import KERNEL_BUGS
from tilegate.kernels.hooks import CombineKnobs, ExtendKnobs
from tilegate.serving import paged, sglang_backend
from tilegate.serving.batch_indices import BatchIndices

EXPECTED = {  # bug -> (extend call, decode call): (scale factor, defect, decode seq_lens shift)
    "stale_kv": ((1.0, None, 0), (1.0, None, 1)),
    "scale10": ((1.1, None, 0), (1.1, None, 0)),
    "prefix_off_by_one": ((1.0, ExtendDefect.PREFIX_OFF_BY_ONE, 0), (1.0, None, 0)),
    "drop_smallest_split": ((1.0, None, 0), (1.0, CombineDefect.DROP_SMALLEST_SPLIT, 0)),
}


@pytest.mark.parametrize("bug", sorted(KERNEL_BUGS))
def test_each_planted_bug_changes_one_thing(bug, monkeypatch):
    calls = []

    def recorder(kind):
        def call(meta, q, k_pool, v_pool, scale=None, cfg=None, knobs=None):
            calls.append((kind, scale, knobs, meta.seq_lens.tolist()))

        return call

    monkeypatch.setattr(sglang_backend, "local_target", lambda: "sm90")
    monkeypatch.setattr(paged, "extend_batch", recorder("extend"))
    monkeypatch.setattr(paged, "decode_batch", recorder("decode"))
    ops = PlantedKernelOps(bug)
    assert ops.name == "kernel"
    lens = torch.tensor([5, 9])
    meta = BatchIndices(torch.zeros(2, 16, dtype=torch.int32), torch.tensor([0, 1]), lens, tokens=2)
    ops.extend(meta, None, None, None, 0.5)
    ops.decode(meta, None, None, None, 0.5)
    (e_scale, e_defect, _), (d_scale, d_defect, shift) = EXPECTED[bug]
    assert calls == [
        ("extend", 0.5 * e_scale, knobs_for(e_defect), [5, 9]),
        ("decode", 0.5 * d_scale, knobs_for(d_defect), [5 - shift, 9 - shift]),
    ]
    # each kernel gets its own family's knobs (kernels/hooks.py), healthy where nothing is planted
    assert [type(c[2]) for c in calls] == [
        ExtendKnobs if e_defect else type(None),
        CombineKnobs if d_defect else type(None),
    ]


def test_every_kernel_bug_is_planted_under_its_own_backend_name():
    assert set(EXPECTED) == set(KERNEL_BUGS)
    names = {registration.kernel_planted_name(b) for b in KERNEL_BUGS}
    assert len(names) == len(KERNEL_BUGS) and all(n.startswith("tilelang-planted-") for n in names)


def test_a_selection_starts_only_the_engine_sets_it_reads():
    """A shard or a -k selection of the GPU tier starts the children its tests read: the reference
    always, a planted bug's set with the set whose peer judges it, nothing else."""
    from tilegate.fixtures import sglang_gpu_plan as plan

    names = {b: registration.kernel_planted_name(b) for b in KERNEL_BUGS}
    sets = {s.name: s for s in plan.engine_sets("triton", names)}
    params = [{"engines": sets["bfloat16-graphs"]}, {"bug": "drop_smallest_split"}, {}]
    assert plan.wanted_sets(params, sets.values(), names) == {
        "reference",
        "bfloat16-graphs",
        "float16-eager",
        "planted-prefix_off_by_one-drop_smallest_split",
    }
