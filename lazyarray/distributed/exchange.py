"""The peer channel of ``DataParallel``: a step that is one message per worker, the reduce among the workers.

A step is no Dask task. The client sends each worker holding a replica one message (Dask's comm, a
handler ``la_dp_step`` on the worker, straight from the client: no scheduler, no task, no scattered
key): the step tag, the worker's batch pieces (NumPy) and their seeds, and the graphs of piece sizes
the worker has not seen. The worker runs the whole step in a thread (so its event loop stays free
to receive) and replies with the batch's loss sum:

1. forward and backward of its pieces, the gradients packed into buckets, each cut into one shard
   per worker (``replica.local``);
2. **reduce-scatter**: it sends shard ``i`` of every bucket to worker ``i`` (``la_dp_put``, a
   direct worker-to-worker message, one-way: ``send``, the phase's puts in one hand-off to the event loop) and sums its own shard over the workers in worker order
   once the others' have arrived (``Mailbox.take``);
3. **all-gather**: it sends its summed shard to every other worker and takes theirs;
4. it applies the optimizer to its replica (``replica.apply_reduced``).

Each worker sends ``2 (N - 1) / N`` of the gradient bytes (the ring all-reduce bound) in two rounds.
Every sum is taken on one worker in worker order and copied to the others: the replicas stay
equal bit for bit. A dask-array batch runs the same ``run_step`` as one Dask task per worker
(``step_task``), so that Dask brings the chunks to it.

Why Dask's comm and not a Dask ``Queue`` / ``Variable`` / Pub/Sub or actors: those go through the
scheduler (a round trip and scheduler work per message), while a worker's ``rpc`` to a peer is one
message on a kept connection, and a handler added to ``Worker.handlers`` receives it on the event
loop with no task. The handlers are added by ``serve`` when a replica is installed (every worker
that takes part in a step holds a replica, so it has them).

Bounded: every wait for a peer has the step's deadline (the client's remaining ``timeout``); a send
that fails (the peer died: connection refused or closed) ends the wait at once, naming the peer;
the client that gives up on a step (its timeout, a lost worker) sends ``la_dp_abort`` to the
others, which end their wait at once. A step's messages carry its tag ``(step, attempt)``: a step
tried again after a failure never reads the messages or the abort of the failed attempt.
"""
from __future__ import annotations

import threading
import time

from ..errors import DistributedError
from .bounded import dask_modules

STEP, PUT, ABORT = "la_dp_step", "la_dp_put", "la_dp_abort"  # the worker handlers' names


class Mailbox:
    """The messages a replica received from its peers, by step tag and phase (``"rs"``, ``"ag"``), and
    the tags given up on (aborted by the client, or a send that failed), with the reason."""

    def __init__(self):
        self._cond = threading.Condition()
        self._items: dict = {}  # (tag, phase) -> {sender index: list of arrays}
        self._ended: dict = {}  # tag -> why the attempt ended
        self._latest: tuple = (-1, -1)  # the latest attempt begun here: an older one still waiting ends
        self.sent_bytes = 0  # array bytes this replica sent to its peers (benchmarks/distributed.py reads it)

    def put(self, tag: tuple, phase: str, sender: int, arrays: list) -> None:
        with self._cond:
            self._items.setdefault((tag, phase), {})[sender] = arrays
            self._cond.notify_all()

    def begin(self, tag: tuple) -> None:
        """The attempt ``tag`` begins here: the older attempts that wait (a step the client gave up on, whose
        message was late, as from a worker that was stopped) end now."""
        with self._cond:
            self._latest = max(self._latest, tag)
            self._cond.notify_all()

    def end(self, tag: tuple, why: str) -> None:
        """Give up on the attempt ``tag``: a wait for it (now or later) raises ``DistributedError(why)``."""
        with self._cond:
            self._ended.setdefault(tag, why)
            self._cond.notify_all()

    def take(self, tag: tuple, phase: str, senders: dict, deadline: float | None, caller: str) -> dict:
        """The arrays of ``phase`` from every sender of ``senders`` (index -> worker address, for
        messages), waiting until ``deadline`` (``time.monotonic()``; None: no bound)."""
        with self._cond:
            while True:
                got = self._items.get((tag, phase), {})
                if all(s in got for s in senders):
                    return {s: got[s] for s in senders}
                if tag in self._ended:
                    raise DistributedError(self._ended[tag])
                if tag < self._latest:
                    raise DistributedError(f"{caller}: step {tag[0]} (attempt {tag[1]}) was given up for a later "
                                           f"attempt (step {self._latest[0]}, attempt {self._latest[1]})")
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    missing = [f"replica {s} on {senders[s]}" for s in senders if s not in got]
                    raise DistributedError(
                        f"{caller}: heard nothing from {', '.join(missing)} within the step's timeout (step "
                        f"{tag[0]}, {'reduce-scatter' if phase == 'rs' else 'all-gather'}): that worker stopped "
                        "answering or died; call step again (it re-syncs the replicas)")
                self._cond.wait(left)

    def finish(self, step: int) -> None:
        """Forget the messages and ends of the attempts of steps up to ``step``."""
        with self._cond:
            self._items = {k: v for k, v in self._items.items() if k[0][0] > step}
            self._ended = {k: v for k, v in self._ended.items() if k[0] > step}


def send(worker, targets: list, tag: tuple, phase: str, sender: int, mailbox: Mailbox, caller: str):
    """Send each ``(peer, rkey, arrays)`` of ``targets``: ``arrays`` to the replica ``rkey`` on worker
    ``peer``, from a thread of ``worker`` (without waiting), in one hand-off to the event loop for the
    phase (the puts then go out together); a failed send ends the attempt ``tag`` in ``mailbox``,
    naming the peer.

    One-way (``reply=False``): the peer answers nothing, so a put costs one message, not two. A peer
    that cannot file it (no replica there) fails its own step too: the client then ends the others'."""
    if not targets:  # (one worker: no peers)
        return
    asyncio, serialize = _asyncio(), dask_modules()[2].protocol.to_serialize

    def failed(peer: str, rkey: str, exc) -> None:
        mailbox.end(tag, f"{caller}: could not send the gradients of step {tag[0]} to replica {rkey!r} on "
                         f"{peer} ({type(exc).__name__}: {exc}): that worker died or closed the connection; call "
                         "step again (it re-syncs the replicas)")

    async def put(peer: str, rkey: str, arrays: list):
        await worker.rpc(peer).la_dp_put(key=rkey, tag=list(tag), phase=phase, sender=sender,
                                         arrays=serialize(arrays), reply=False)

    async def go():
        done = await asyncio.gather(*[put(*t) for t in targets], return_exceptions=True)
        for (peer, rkey, _), r in zip(targets, done):
            if isinstance(r, BaseException):
                failed(peer, rkey, r)

    def finished(fut):  # (the hand-off itself cancelled or failed, as when the worker's loop closes)
        exc = asyncio.CancelledError() if fut.cancelled() else fut.exception()
        if exc is not None:
            for peer, rkey, _ in targets:
                failed(peer, rkey, exc)

    mailbox.sent_bytes += sum(a.nbytes for _, _, arrays in targets for a in arrays)
    asyncio.run_coroutine_threadsafe(go(), worker.loop.asyncio_loop).add_done_callback(finished)


def serve(worker, replicas, run_step) -> None:
    """Add the handlers of the peer channel to ``worker`` (once): ``la_dp_step`` runs ``run_step`` in a
    thread, ``la_dp_put`` files a peer's arrays in the replica's mailbox, ``la_dp_abort`` ends the ``count`` steps of an attempt."""
    if STEP in worker.handlers:
        return
    asyncio = _asyncio()

    async def step(**msg):
        return await asyncio.to_thread(run_step, worker, **msg["payload"])

    def put(key: str, tag: list, phase: str, sender: int, arrays) -> None:
        replicas.get(key).mailbox.put(tuple(tag), phase, sender, arrays)

    def abort(key: str, tag: list, count: int, why: str) -> str:
        try:
            for k in range(count):
                replicas.get(key).mailbox.end((tag[0] + k, tag[1]), why)
        except DistributedError:  # (no replica here any more: nothing waits)
            pass
        return "OK"

    worker.handlers.update({STEP: step, PUT: put, ABORT: abort})


def _asyncio():
    import asyncio  # (here, with Dask: asyncio imports ssl, which `import lazyarray` must not pay for)

    return asyncio
