"""The tilelang backend under SGLang 0.5.23's CUDA/HIP-graph hooks (init_cuda_graph_state; then
init_forward_metadata_out_graph before each capture and each replay, and
init_forward_metadata_in_graph inside the capture, over the graph runner's padded static buffers,
which the runner refills before each replay), on the GPU: a decode step captured once, replayed
with new sequence lengths and new pool contents, equals the eager step bitwise. SGLang's own
engine captures and replays these hooks in suite/e2e/test_sglang_gpu.py."""

from types import SimpleNamespace

import pytest
import torch
from suite_helpers import (
    DEVICE,
    EXTEND_BATCHES,
    causal_builds,
    fake_layer,
    fake_runner,
    forward_batch,
)
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from tilegate.harness.sglang.instrumented import ReferenceOps
from tilegate.serving.sglang_backend import TileLangAttnBackend
from tilegate.serving.sglang_checks import UnsupportedByTileLangBackend

DECODE = SimpleNamespace(name="DECODE")
MAX_BS, BS, HEADS, DIM = 4, 3, 8, 64


def _runner(dtype):
    runner = fake_runner(dtype=dtype)
    runner.device = DEVICE
    runner.req_to_token_pool.req_to_token = runner.req_to_token_pool.req_to_token.to(DEVICE)
    pool = runner.token_to_kv_pool
    pool.k, pool.v = [t.to(DEVICE) for t in pool.k], [t.to(DEVICE) for t in pool.v]
    return runner


def _batch(reqs, lens, device=DEVICE, mode=DECODE):
    """A decode batch as SGLang's graph runner hands it to the hooks (its replay view has
    batch_size)."""
    return SimpleNamespace(
        forward_mode=mode,
        batch_size=len(reqs),
        req_pool_indices=torch.tensor(reqs, device=device),
        seq_lens=torch.tensor(lens, device=device),
        encoder_lens=None,
        out_cache_loc=None,
        spec_info=None,
    )


def _eager(runner, layer, q, fb):
    backend = TileLangAttnBackend(runner)
    backend.init_forward_metadata(fb)
    return backend.forward_decode(q, None, None, layer, fb, save_kv_cache=False)


@pytest.mark.gpu
@pytest.mark.xdist_group("cuda-graph")
@causal_builds(HEADS, 2, DIM, "decode")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_replayed_decode_equals_eager_bitwise(dtype):
    runner, layer = _runner(dtype), fake_layer(1)
    backend = TileLangAttnBackend(runner)
    backend.init_cuda_graph_state(MAX_BS, MAX_BS)
    q_static = torch.randn(BS, HEADS * DIM, device=DEVICE).to(dtype)
    static = _batch((3, 0, 5), (1, 33, 160))  # the graph runner's static buffers
    backend.init_forward_metadata_out_graph(static, in_capture=True)

    def step():  # the captured body, as SGLang's run_once: in-graph prep, then the layers
        backend.init_forward_metadata_in_graph(static)
        return backend.forward_decode(q_static, None, None, layer, static, save_kv_cache=False)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up (compile, allocate) off the capture, as SGLang does
        step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out_static = step()

    pool = runner.token_to_kv_pool
    for n, (reqs, lens) in enumerate((((3, 0, 5), (1, 33, 160)), ((2, 4, 1), (160, 2, 57)))):
        gen = torch.Generator(device=DEVICE).manual_seed(n)
        # new pool contents
        pool.k[1].copy_(torch.randn(pool.k[1].shape, generator=gen, device=DEVICE).to(dtype))
        pool.v[1].copy_(torch.randn(pool.v[1].shape, generator=gen, device=DEVICE).to(dtype))
        q_static.copy_(torch.randn(q_static.shape, generator=gen, device=DEVICE).to(dtype))
        fb = _batch(reqs, lens)
        static.req_pool_indices.copy_(fb.req_pool_indices)  # the runner's refill
        static.seq_lens.copy_(fb.seq_lens)
        backend.init_forward_metadata_out_graph(_with_host_lens(static))
        graph.replay()
        want = _eager(runner, layer, q_static.clone(), fb)
        assert torch.equal(out_static, want), (
            f"step {n}: replay differs from eager by "
            f"{(out_static.float() - want.float()).abs().max().item()}"
        )


# The hooks' bookkeeping on the CPU, with the reference ops: after a replay's refill, a forward
# through the captured batch's buffers computes the new batch, as the eager path does.


def _cpu_batch(reqs, lens, mode=DECODE):
    return _batch(reqs, lens, device="cpu", mode=mode)


def _captured(backend, first):
    backend.init_cuda_graph_state(MAX_BS, MAX_BS)
    backend.init_forward_metadata_out_graph(first, in_capture=True)
    backend.init_forward_metadata_in_graph(first)


def _replayed(backend, fb):
    """A replay's prep: out_graph on the host, then what the graph repeats (in_graph) over the
    runner's buffers, here refilled with ``fb``."""
    backend.init_forward_metadata_out_graph(fb)
    backend.init_forward_metadata_in_graph(fb)


def test_replay_refills_the_captured_batch():
    runner, layer = fake_runner(), fake_layer(1)
    backend = TileLangAttnBackend(runner, ReferenceOps())
    first, second = _cpu_batch((3, 0, 5), (1, 33, 160)), _cpu_batch((2, 4, 1), (160, 2, 57))
    _captured(backend, first)
    q = torch.randn(BS, HEADS * DIM)
    _replayed(backend, second)
    # the captured batch object
    replayed = backend.forward_decode(q, None, None, layer, first, save_kv_cache=False)
    eager = TileLangAttnBackend(runner, ReferenceOps())
    eager.init_forward_metadata(second)
    assert torch.equal(
        replayed, eager.forward_decode(q, None, None, layer, second, save_kv_cache=False)
    )
    assert backend.graph_seq_lens[BS:].tolist() == [backend.get_cuda_graph_seq_len_fill_value()] * (
        MAX_BS - BS
    )


def test_an_eager_extend_after_a_capture_prepares_its_own_batch():
    runner, layer = fake_runner(), fake_layer(1)
    backend = TileLangAttnBackend(runner, ReferenceOps())
    _captured(backend, _cpu_batch((3, 0, 5), (1, 33, 160)))
    fb = forward_batch(runner, EXTEND_BATCHES[1])
    q = torch.randn(fb.extend_seq_lens.sum().item(), HEADS * DIM)
    eager = TileLangAttnBackend(runner, ReferenceOps())
    eager.init_forward_metadata(fb)
    want = eager.forward_extend(q, None, None, layer, fb, save_kv_cache=False)
    assert torch.equal(backend.forward_extend(q, None, None, layer, fb, save_kv_cache=False), want)


def _with_host_lens(fb):
    fb.seq_lens_cpu = fb.seq_lens.cpu()  # SGLang's host copy, where it keeps one
    return fb


class DeviceWork(TorchDispatchMode):
    """Every op, views aside, that reads or writes a tensor on the meta device: the tensors a GPU
    holds, in the test below."""

    def __init__(self):
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        leaves = tree_leaves((args, kwargs))
        if not func.is_view and any(isinstance(t, torch.Tensor) and t.is_meta for t in leaves):
            self.ops.append(str(func))
        return func(*args, **kwargs)


def test_a_replays_host_prep_does_no_device_work():
    # what a GPU holds (the batch's indices, the table, the static buffers) on the meta device;
    # out_graph may use SGLang's host copy of the lengths only: a check, copy or read back of the
    # others belongs in the graph (init_forward_metadata_in_graph)
    runner = fake_runner()
    backend = TileLangAttnBackend(runner, ReferenceOps())
    _captured(backend, _cpu_batch((3, 0, 5), (1, 33, 160)))
    runner.req_to_token_pool.req_to_token = runner.req_to_token_pool.req_to_token.to("meta")
    for name in ("graph_req_pool_indices", "graph_seq_lens"):
        setattr(backend, name, getattr(backend, name).to("meta"))
    fb = _with_host_lens(_cpu_batch((2, 4, 1), (160, 2, 57)))
    fb.req_pool_indices, fb.seq_lens = fb.req_pool_indices.to("meta"), fb.seq_lens.to("meta")
    with DeviceWork() as work:
        backend.init_forward_metadata_out_graph(fb)
    assert work.ops == []
    with DeviceWork() as work:  # the recorder sees the graph's half: the check above can fail
        backend.init_forward_metadata_in_graph(fb)
    assert "aten._assert_async.msg" in work.ops and "aten.copy_.default" in work.ops


def test_replay_checks_the_new_batch_on_the_host_where_sglang_keeps_its_lengths():
    backend = TileLangAttnBackend(fake_runner(), ReferenceOps())
    _captured(backend, _cpu_batch((3, 0, 5), (1, 33, 160)))
    with pytest.raises(ValueError, match="columns"):
        backend.init_forward_metadata_out_graph(
            _with_host_lens(_cpu_batch((3, 0, 5), (1, 33, 10_000)))
        )
    with pytest.raises(ValueError, match="seq_len >= 1"):
        backend.init_forward_metadata_out_graph(_with_host_lens(_cpu_batch((3, 0, 5), (1, 0, 7))))


@pytest.mark.parametrize(
    "reqs, lens, what",
    [((3, 0, 5), (1, 33, 10_000), "seq_len outside"), ((3, 99, 5), (1, 33, 7), "req_pool_index")],
)
def test_replay_checks_what_only_the_device_holds_on_the_device(reqs, lens, what):
    # in the graph, torch._assert_async: on a GPU a device-side assertion (no host wait); on the
    # CPU it raises at once
    backend = TileLangAttnBackend(fake_runner(), ReferenceOps())
    _captured(backend, _cpu_batch((3, 0, 5), (1, 33, 160)))
    with pytest.raises(RuntimeError, match=what):
        _replayed(backend, _cpu_batch(reqs, lens))


def test_graph_capture_of_other_modes_is_refused():
    backend = TileLangAttnBackend(fake_runner(), ReferenceOps())
    backend.init_cuda_graph_state(MAX_BS, MAX_BS)
    with pytest.raises(
        UnsupportedByTileLangBackend, match="captures plain decode batches only, not TARGET_VERIFY"
    ):
        backend.init_forward_metadata_out_graph(
            _cpu_batch((3,), (5,), mode=SimpleNamespace(name="TARGET_VERIFY")), in_capture=True
        )
