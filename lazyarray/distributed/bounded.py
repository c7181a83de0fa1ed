"""Bounded calls to a Dask cluster: every wait ends within ``timeout``, and Dask's failures become
``la.DistributedError`` naming what was lost and the fix.

One ``BoundedCall`` serves one ``la.distributed.run`` call or one ``DataParallel.step``: it holds
the deadline and what each future it scattered holds (an input's piece, a parameter's replicas),
so a lost future is named by what it was. Where Dask would wait or fail namelessly:

* **no workers**: ``Client.scatter`` waits ``distributed.comm.timeouts.connect`` twice over (about
  a minute) and raises a bare ``TimeoutError``; here the wait for a first worker has the call's
  deadline and the error says to start workers;
* **a worker that stops answering** (stopped, swapping): a scatter to it or a task on it waits
  for Dask's worker TTL (5 minutes), and ``Client.scatter``'s own ``timeout`` bounds only the wait
  for workers; here scatter and gather run on the client's event loop under
  ``client.sync(..., callback_timeout=...)`` and the compute under ``distributed.wait(timeout=)``;
* **a worker that dies holding the only copy of scattered data**: Dask cancels what reads it
  (``FutureCancelledError: ... already forgotten``); here the error names the input and piece
  and says that scattered NumPy pieces must be scattered again (dask-array inputs are
  recomputed by Dask itself);
* **the scheduler lost**: the client cancels every future (``scheduler-connection-lost``); here
  the error names the scheduler's address and says to reconnect.

``DEFAULT_TIMEOUT`` (300 s) applies when ``timeout=None``; ``math.inf`` waits without a bound.
Dask itself is imported only when a function here is called (``dask_modules``).
"""
from __future__ import annotations

import math
import time
import warnings
from concurrent.futures import CancelledError

from ..errors import DistributedError, ParamValueError

DEFAULT_TIMEOUT = 300.0  # seconds: la.distributed.run(timeout=None) and DataParallel(timeout=None)
_POLL = 0.1  # seconds between questions to the scheduler while it has no workers
_ASK_TIMEOUT = 2.0  # seconds given to the scheduler to say which tasks are running, for a message
_WATCH = 1.0  # seconds between questions to the scheduler about watched workers while waiting


def dask_modules():
    """``(dask, dask.array, dask.distributed)``, imported on first use (``import lazyarray`` never
    imports Dask); ``ImportError`` with the fix when the distributed extra is not installed."""
    try:
        import dask
        import dask.array
        import dask.distributed
    except ImportError as exc:
        raise ImportError(f"la.distributed needs Dask ({exc}); install it with pip install "
                          "'lazyarray[distributed]' (or pip install 'dask[distributed]')") from None
    return dask, dask.array, dask.distributed


def check_timeout(timeout, caller: str) -> float:
    """``timeout`` in seconds (``None``: ``DEFAULT_TIMEOUT``); a positive number, ``math.inf`` for none."""
    if timeout is None:
        return DEFAULT_TIMEOUT
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ParamValueError(f"{caller}: timeout must be a positive number of seconds (math.inf: wait without "
                              f"a bound; None: the default {DEFAULT_TIMEOUT:g} s), got {timeout!r}")
    return float(timeout)


class BoundedCall:
    """One call's dealings with ``client``, each ending by the deadline ``timeout`` seconds from now.

    ``caller`` starts every message (``"la.distributed.run"``); ``again`` says how to scatter
    lost NumPy pieces again (``"call la.distributed.run again"``). ``replans``: the caller plans
    the call again when a watched worker leaves with nothing scattered (``lost_pinned``), so a lost
    scattered piece is what names the error.
    """

    def __init__(self, client, timeout, caller: str, again: str, *, replans: bool = False):
        self.client, self.caller, self.again, self.replans = client, caller, again, replans
        self.timeout = check_timeout(timeout, caller)
        self._deadline = time.monotonic() + self.timeout
        self._scattered: list[tuple[object, str]] = []  # (future, what it holds)
        self.lost_pinned = False  # a watched worker left, and no scattered data with it

    def remaining(self) -> float | None:
        """Seconds left before the deadline (``None``: no bound)."""
        if math.isinf(self.timeout):
            return None
        return max(0.0, self._deadline - time.monotonic())

    # -- the steps of a call ---------------------------------------------------------------------------
    def workers(self) -> list[str]:
        """The addresses of the cluster's workers, waiting (until the deadline) for a first one."""
        start = time.monotonic()
        while True:
            found = self._sync(self.client.scheduler.ncores, "asking the scheduler for its workers")
            if found:
                return list(found)
            left = self.remaining()
            if left is not None and left < 2 * _POLL:  # (the next question needs time to be answered)
                raise DistributedError(
                    f"{self.caller}: the cluster at {self._address()} has no workers (waited "
                    f"{time.monotonic() - start:.3g} s, timeout={self.timeout:g}); start workers "
                    "(cluster.scale(n), or dask worker ADDRESS) or pass a client whose cluster has some")
            time.sleep(_POLL)

    def scatter(self, data, what, *, broadcast: bool = False, workers=None):
        """``client.scatter(data, broadcast=..., workers=..., hash=False)`` by the deadline. ``what``
        names the data for messages: a str, or (``data`` a list) one str per item."""
        client, left = self.client, self.remaining()

        async def send():
            return await client.scatter(data, broadcast=broadcast, workers=workers, hash=False, asynchronous=True,
                                        timeout=left if left is not None else 1e9)

        names = what if isinstance(what, list) else [what]
        out = self._sync(send, f"scattering {_listing(names)}")
        for f, name in zip(out if isinstance(out, list) else [out], names):
            self._scattered.append((f, f"{name} (" + ("broadcast: a replica on every worker" if broadcast else
                                                       "a NumPy piece scattered to one worker, its only copy") + ")"))
        return out

    def scatter_each(self, items: list, what: list[str], workers: list[str]) -> list:
        """Each of ``items`` scattered to its worker (``workers[i]``), all at once, by the deadline; one
        future per item (``what``: one name per item, for messages)."""
        client, left = self.client, self.remaining()

        async def send():
            import asyncio  # (here, with dask: asyncio imports ssl, which `import lazyarray` must not pay for)

            sent = [client.scatter([v], workers=[w], hash=False, asynchronous=True,
                                   timeout=left if left is not None else 1e9) for v, w in zip(items, workers)]
            return [f for fs in await asyncio.gather(*sent) for f in fs]

        out = self._sync(send, f"scattering {_listing(what)}")
        self._scattered += [(f, f"{name} (a NumPy piece scattered to one worker, its only copy)")
                            for f, name in zip(out, what)]
        return out

    def message_each(self, op: str, messages: dict, doing: str) -> list:
        """Each ``messages[w]`` (any picklable value) sent to worker ``w``'s handler ``op`` as ``payload``,
        straight from the client (no scheduler, no task), all at once; each worker's answer, or the
        exception its message raised (a closed connection: ``OSError``), in the order of ``messages``,
        by the deadline (``doing`` names the wait in the timeout's message). The first exception ends
        the wait: the messages still unanswered then give ``CancelledError``."""
        client, serialize = self.client, dask_modules()[2].protocol.to_serialize

        async def send():
            import asyncio  # (here, with dask: asyncio imports ssl, which `import lazyarray` must not pay for)

            sent = [asyncio.ensure_future(getattr(client.rpc(w), op)(payload=serialize(m)))
                    for w, m in messages.items()]
            try:
                await asyncio.wait(sent, return_when=asyncio.FIRST_EXCEPTION)
            finally:
                for t in sent:
                    t.cancel()  # (no-op for the finished ones)
            return [CancelledError(f"{op}: not answered") if not t.done() or t.cancelled() else
                    t.exception() or t.result() for t in sent]

        return self._sync(send, doing)

    def post_each(self, op: str, messages: dict, wait: float = _ASK_TIMEOUT) -> None:
        """Each ``messages[w]`` (a dict of keyword arguments) sent to worker ``w``'s handler ``op`` without
        waiting for it: best effort, each given up after ``wait`` seconds (a worker that is gone or frozen)."""
        client = self.client

        async def post(w, m):
            import asyncio

            try:
                await asyncio.wait_for(getattr(client.rpc(w), op)(**m), wait)
            except Exception:  # (best effort: the worker is gone, frozen, or has nothing to end)
                pass

        for w, m in messages.items():
            client.loop.add_callback(post, w, m)

    def run_on_workers(self, fn, arg, workers: list[str]) -> dict:
        """``client.run(fn, arg)`` on ``workers`` by the deadline: worker address -> its answer."""
        client = self.client
        return self._sync(lambda: client.run(fn, arg, workers=workers, asynchronous=True),
                          f"asking {len(workers)} worker(s) what they hold")

    def who_has(self, collection) -> dict:
        """Key -> the workers holding it, for the persisted pieces of ``collection`` (others: absent)."""
        client = self.client
        keys = [f.key for f in client.futures_of(collection)]
        if not keys:
            return {}
        found = self._sync(lambda: client.scheduler.who_has(keys=keys), "asking where the pieces are")
        return {(tuple(k) if isinstance(k, list) else k): ws for k, ws in found.items()}

    def scheduler_address(self) -> str:
        return self._address()

    def submit(self, fn, *args, key: str, worker: str | None, loose: bool = False, carries_data: bool = False):
        """``fn(*args)`` as the task ``key`` on ``worker``: pinned (never stolen: it reads state that
        lives there), or with ``loose`` preferred only (Dask may run it elsewhere, as when ``worker``
        is gone); ``worker=None``: anywhere. A future; futures among ``args`` (nested too) are its
        inputs. ``carries_data``: ``args`` hold arrays on purpose (the task carries them so that Dask
        can run it again), so Dask's warning about sending a large graph is not given."""
        where = {} if worker is None else {"workers": [worker], "allow_other_workers": loose}
        if not carries_data:
            return self.client.submit(fn, *args, key=key, pure=False, **where)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sending large graph", category=UserWarning)
            return self.client.submit(fn, *args, key=key, pure=False, **where)

    def gather(self, futures: list, watch: dict | None = None) -> list:
        """The values of ``futures`` by the deadline. ``watch``: worker address -> what it holds that
        nothing can recompute (a model replica): while waiting, a watched worker that leaves the
        cluster ends the wait at once with ``DistributedError`` naming it (its pinned tasks would
        otherwise wait for it until the deadline)."""
        dd = dask_modules()[2]

        def computing():
            return f"computing ({sum(not f.done() for f in futures)} of {len(futures)} results pending)"

        if watch:
            self._guarded(lambda: self._wait_watching(futures, watch), computing)
        else:
            self._guarded(lambda: dd.wait(futures, timeout=self.remaining()), computing)
        client = self.client

        async def fetch():
            return await client.gather(futures, asynchronous=True)

        def fetched():
            try:
                return client.sync(fetch, callback_timeout=self.remaining())
            except CancelledError as exc:  # (a wait that ended with cancelled futures: name a lost worker)
                if watch:
                    self._check_watched(watch, exc)
                raise

        return self._guarded(fetched, "gathering the results")

    def compute(self, outs: list, watch: dict | None = None) -> list:
        """The values of the Dask collections ``outs``, computed on the cluster by the deadline.

        ``watch`` (worker -> what is pinned to it): the graph's tasks carry worker pins (Dask
        annotations), so it is computed unoptimized (Dask's fusion drops annotations), and a
        watched worker that leaves ends the wait at once (``lost_pinned`` is then set)."""
        self._check_scheduler()
        if watch is None:
            return self.gather(self.client.compute(outs))
        return self.gather(self.client.compute(outs, optimize_graph=False), watch)

    def _wait_watching(self, futures: list, watch: dict) -> None:
        """``distributed.wait(futures)`` in slices of ``_WATCH`` seconds, asking between them whether the
        workers of ``watch`` are still there."""
        dd = dask_modules()[2]
        while True:
            left = self.remaining()
            try:
                dd.wait(futures, timeout=_WATCH if left is None else min(_WATCH, left))
                return
            except TimeoutError:
                if left is not None and left <= _WATCH:
                    raise
                self._check_watched(watch, None)
            except CancelledError as exc:  # (Dask cancels what read the lost worker's scattered data first)
                self._check_watched(watch, exc)
                raise

    def _check_watched(self, watch: dict, exc) -> None:
        present = self._sync(self.client.scheduler.ncores, "asking the scheduler for its workers")
        gone = [w for w in watch if w not in present]
        if gone:
            lost = [what for f, what in self._scattered if f.cancelled()]
            self.lost_pinned = not lost  # (nothing else lost: the caller may plan the call again)
            if lost and self.replans:  # (what cannot be made again names the error)
                raise DistributedError(self._lost(exc)) from exc
            raise DistributedError(
                f"{self.caller}: lost {_listing([f'{watch[w]} on worker {w}' for w in gone])}"
                + (f" (and {_listing(lost)})" if lost else "")
                + f": the worker left the cluster (died, killed, or retired) during the call; {self.again}") from exc

    # -- waiting and naming ----------------------------------------------------------------------------
    def _sync(self, fn, doing: str):
        """``fn()`` (a coroutine function, or one returning an awaitable) run on the client's loop
        by the deadline; Dask's failures become ``DistributedError``."""
        return self._guarded(lambda: self.client.sync(fn, callback_timeout=self.remaining()), doing)

    def _guarded(self, wait, doing):
        """``wait()`` with Dask's failures as ``DistributedError``; ``doing`` (a str, or a function
        that says it when the deadline passes) names the step."""
        dd = dask_modules()[2]
        self._check_scheduler()
        try:
            return wait()
        except TimeoutError:
            if not self._scheduler_answers():  # (a killed scheduler: the client may not have noticed yet)
                raise DistributedError(self._scheduler_lost()) from None
            raise DistributedError(self._late(doing if isinstance(doing, str) else doing(), self._running())) from None
        except CancelledError as exc:  # (Dask's FutureCancelledError / FuturesCancelledError)
            raise DistributedError(self._lost(exc)) from exc
        except dd.KilledWorker as exc:
            raise DistributedError(
                f"{self.caller}: task {exc.task!r} was running on a worker that died, {exc.allowed_failures + 1} "
                f"times (last on {exc.last_worker.address}), and Dask gave up on it: the task kills its worker "
                "(out of memory, a crash in native code) or workers keep dying; give the workers more memory "
                "or smaller pieces (more chunks)") from exc
        except OSError as exc:  # (CommClosedError, connection refused: the scheduler or a worker went away)
            if self.client.status != "running" or self._address() in str(exc):
                raise DistributedError(self._scheduler_lost()) from exc
            raise DistributedError(f"{self.caller}: a connection failed while {doing} ({exc}): a worker went away; "
                                   f"{self.again}") from exc

    def _check_scheduler(self) -> None:
        if self.client.status != "running":
            raise DistributedError(self._scheduler_lost())

    def _lost(self, exc) -> str:
        reasons = {getattr(exc, "reason", None)} | {g.reason for g in getattr(exc, "error_groups", ())}
        if "scheduler-connection-lost" in reasons or self.client.status != "running":
            return self._scheduler_lost()
        lost = [what for f, what in self._scattered if f.cancelled()]
        if not lost:
            return (f"{self.caller}: a result was cancelled by Dask ({exc}): a worker holding data it needed "
                    f"died or the future was released; {self.again}")
        return (f"{self.caller}: lost {_listing(lost)}: the worker(s) holding it died and Dask cannot recompute "
                f"scattered data. Scattered NumPy pieces must be scattered again: {self.again} (it scatters "
                "them anew); or pass the input as a dask.array: dask-array inputs are recomputed when a worker dies")

    def _scheduler_lost(self) -> str:
        return (f"{self.caller}: lost the scheduler at {self._address()} (the client is {self.client.status!r}): "
                "every future of this call, scattered pieces included, is gone; restart the scheduler (or the "
                f"cluster), connect a new Client to it, and {self.again}")

    def _late(self, doing: str, running: dict) -> str:
        busy = ", ".join(f"{w} ({n} task{'s' * (n != 1)})" for w, n in running.items() if n)
        return (f"{self.caller}: no result within timeout={self.timeout:g} s while {doing}"
                + (f"; still running on {busy}" if busy else "")
                + ". A worker that stopped answering (stopped, swapping, stuck in a task) or work longer than the "
                f"timeout: check the workers (client.processing()), or pass a larger timeout= (default "
                f"{DEFAULT_TIMEOUT:g} s; math.inf waits without a bound)")

    def _scheduler_answers(self) -> bool:
        """Whether a new connection to the scheduler opens within a short wait."""
        if self.client.status != "running":
            return False
        connect, address = dask_modules()[2].comm.connect, self._address()

        async def probe():
            comm = await connect(address, timeout=_ASK_TIMEOUT)
            await comm.close()

        try:
            self.client.sync(probe, callback_timeout=_ASK_TIMEOUT)
        except Exception:  # (refused, timed out: no scheduler there)
            return False
        return True

    def _running(self) -> dict:
        """Tasks running per worker, as the scheduler says within a short wait (for messages)."""
        try:
            running = self.client.sync(self.client.scheduler.processing, callback_timeout=_ASK_TIMEOUT)
        except Exception:  # (the message is written without it)
            return {}
        return {w: len(tasks) for w, tasks in running.items()}

    def _address(self) -> str:
        scheduler = getattr(self.client, "scheduler", None)
        return getattr(scheduler, "address", None) or "?"


def _listing(names: list[str]) -> str:
    shown = ", ".join(names[:6])
    return shown + (f" and {len(names) - 6} more" if len(names) > 6 else "")
