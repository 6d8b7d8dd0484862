"""Starting an SGLang engine on a leased rendezvous port (tilegate.harness.sglang.ports), and again
on a new lease, at most twice more, when another process took that port first.

How a collision shows in SGLang 0.5.23: the rank-0 scheduler's TCPStore fails to listen on
``nccl_port`` (``DistNetworkError ... EADDRINUSE``, raised inside ``Scheduler(...)``);
``run_scheduler_process`` (sglang/srt/managers/scheduler.py) logs that in the scheduler's own
process and sends its parent SIGQUIT, and the parent's launch-phase handler
(``_set_envs_and_config``, sglang/srt/entrypoints/engine.py) kills the parent's process tree, the
parent included: the caller of ``sglang.Engine`` never sees an exception, nor the error's text.
So each engine here starts with ``custom_sigquit_handler=on_child_quit``, which SGLang installs in
that handler's place. A SIGQUIT while a socket that none of the engine's processes holds listens on
its leased port (tilegate.harness.sglang.port_holders) is that collision: it is let through, the
scheduler exits, the engine start raises RuntimeError ("Rank 0 scheduler died during
initialization", ``_scheduler_died_error``), and the start is tried again on a new lease. Any other
SIGQUIT gets SGLang's own answer, and any other failure is raised as it came.

One engine start at a time per process: SGLang installs signal handlers from the main thread only.
"""

from __future__ import annotations

import gc
import logging
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from tilegate.harness.sglang import ports
from tilegate.harness.sglang.port_holders import foreign_listener, process_tree

MAX_RETRIES = 2  # further starts after a collision: three in all
# how long a start waits for a port when every one of the range is taken (a narrowed range)
PORT_WAIT_S = 300.0

EngineT = TypeVar("EngineT")


@dataclass
class _Watch:
    """The engine start under way in this process."""

    port: int
    listener: int | None = None  # the inode of the socket on ``port`` when a child quit


_watching: _Watch | None = None


def on_child_quit(signum, frame) -> None:
    """The engine process's SIGQUIT handler (SGLang's ``custom_sigquit_handler``; it is pickled
    into the scheduler with the server args, so it is a module-level function). SGLang's
    schedulers send it when they fail; the SGLang child's ``broken.stop`` sends it too."""
    watch = _watching
    if watch is not None and watch.listener is None:
        watch.listener = foreign_listener(watch.port)
        if watch.listener is not None:
            return  # a collision: the start raises once the scheduler is gone, and is retried
    sglang_answer()


def sglang_answer() -> None:
    """SGLang's own launch-phase answer to a child's SIGQUIT: a child failed, so the whole process
    tree ends, this process included."""
    from sglang.srt.utils import kill_process_tree

    logging.getLogger("sglang.srt.entrypoints.engine").error(
        "Received sigquit from a child process. It usually means the child failed."
    )
    kill_process_tree(os.getpid())


def _zmq_contexts() -> list:
    """The ZeroMQ contexts alive in this process (zmq is SGLang's: none before it is imported)."""
    zmq = sys.modules.get("zmq")
    if zmq is None:
        return []
    kinds, todo = set(), [zmq.Context]
    while todo:
        kind = todo.pop()
        kinds.add(kind)
        todo.extend(kind.__subclasses__())
    return [obj for obj in gc.get_objects() if type(obj) in kinds]


@dataclass
class _Before:
    """What this process held before an engine start, to tell what a failed start left."""

    children: set
    zmq_contexts: list  # held, so that no new context can take an old one's id

    @classmethod
    def now(cls) -> _Before:
        return cls(set(multiprocessing.active_children()), _zmq_contexts())

    def clear_failed_start(self) -> None:
        """Kill the processes a failed start left running (its detokenizer: the multiprocessing
        children started since, with their descendants) and close its ZeroMQ contexts without
        lingering: its tokenizer manager's sockets linger forever (LINGER -1), so collecting the
        context later blocked the next start in ``term()`` for minutes."""
        for child in set(multiprocessing.active_children()) - self.children:
            if child.pid is None:  # never started
                continue
            for pid in reversed(process_tree(child.pid)):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            child.join(timeout=30)
        old = {id(ctx) for ctx in self.zmq_contexts}
        for ctx in _zmq_contexts():
            if id(ctx) not in old:
                ctx.destroy(linger=0)


def _release_on_shutdown(engine: Any, lease: ports.EnginePortLease) -> None:
    """The lease ends with the engine: after its ``shutdown`` has reaped the scheduler that holds
    the port (or at this process's exit, which closes the lock)."""
    shutdown = engine.shutdown

    def shutdown_and_release() -> None:
        try:
            shutdown()
        finally:
            lease.release()

    engine.shutdown = shutdown_and_release


def start_engine(make_engine: Callable[..., EngineT], *, wait_s: float = PORT_WAIT_S) -> EngineT:
    """``make_engine(nccl_port=PORT, custom_sigquit_handler=on_child_quit)`` on a leased port,
    started again on a new one after a rendezvous-port collision (each retry said on stderr). The
    engine's ``shutdown`` releases the lease."""
    global _watching
    for attempt in range(MAX_RETRIES + 1):
        lease = ports.lease_engine_port(wait_s=wait_s)
        watch, before = _Watch(lease.port), _Before.now()
        _watching = watch
        try:
            engine = make_engine(nccl_port=lease.port, custom_sigquit_handler=on_child_quit)
        except Exception as exc:
            if watch.listener is None:
                lease.release()
                raise
            before.clear_failed_start()
            lease.release()
            reason = (
                f"engine start collided on rendezvous port {lease.port}: another process listens "
                f"there (socket inode {watch.listener}), and the start failed with "
                f"{type(exc).__name__}: {str(exc).rstrip('.')}"
            )
            if attempt == MAX_RETRIES:
                exc.add_note(f"tilegate: {reason} ({MAX_RETRIES + 1} starts, each collided)")
                raise
            print(
                f"tilegate: {reason}; starting it again on a new port "
                f"(retry {attempt + 1} of {MAX_RETRIES})",
                file=sys.stderr,
                flush=True,
            )
            continue
        except BaseException:
            lease.release()
            raise
        finally:
            _watching = None
        if watch.listener is not None:  # a child quit, yet the engine came up: SGLang's answer
            sglang_answer()
        _release_on_shutdown(engine, lease)
        return engine
    raise AssertionError("unreachable: the last attempt returns or raises")
