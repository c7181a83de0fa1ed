"""``DataLoader``: batches of a dataset, read in the main thread or by worker threads or processes.

One worker loop serves both kinds of worker: it takes ``(key, indices)`` tasks from a queue, reads
the samples, batchifies them and puts the result (or the failure: sample index, exception) on a
result queue. The main thread keeps up to ``prefetch`` tasks in flight and yields batches in
sampler order, so the batches do not depend on the number or kind of workers. Workers are started
at the first ``iter`` and kept for later epochs; ``close()`` (or leaving a ``with`` block, or the
loader's garbage collection, or interpreter exit) stops them. A worker's error stops them too and
is raised in the main thread as ``DataLoaderError``.

Worker processes are started with the ``spawn`` method on every platform (no forked copies of
threads or locks): the dataset and ``batchify_fn`` are pickled once per worker, so they must be
defined at module level (no lambdas) — use thread workers (the default) otherwise.

>>> import numpy as np
>>> import lazyarray as la
>>> ds = la.data.ArrayDataset(np.arange(10, dtype=np.float32), np.arange(10) % 2)
>>> loader = la.data.DataLoader(ds, batch_size=4, shuffle=True, seed=0)
>>> len(loader), [x.shape for x, y in loader]
(3, [(4,), (4,), (2,)])
"""
from __future__ import annotations

import itertools
import multiprocessing
import pickle
import queue
import threading
import time
import traceback
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..device import Device
from ..errors import DataLoaderError, ParamError, ParamValueError
from ..ndarray import NDArray
from .batchify import as_batch_array, default_batchify
from .sampler import BatchSampler, RandomSampler, SequentialSampler, check_count, check_last_batch
from .seeding import sample_seed

_POLL_S = 0.2  # how often a waiting main thread checks that worker processes are alive


class _SampleFailed(Exception):
    """Inside a worker: reading sample ``index`` (None: batchifying) raised ``original``."""

    def __init__(self, index, original: BaseException):
        super().__init__(index, original)
        self.index, self.original = index, original


def fetch_batch(dataset, batchify_fn: Callable | None, indices: list[int], seed_key: tuple | None):
    """One batch: ``batchify_fn([dataset[i] for i in indices])`` (with the default batchify, the
    dataset's ``gather`` when it has one). Raises ``_SampleFailed`` naming the sample that failed."""
    if batchify_fn is None and hasattr(dataset, "gather"):
        try:
            fast = dataset.gather(indices)
        except Exception:  # read again sample by sample below, to name the index that fails
            fast = None
        if fast is not None:
            return tuple(map(as_batch_array, fast)) if isinstance(fast, tuple) else as_batch_array(fast)
    samples = []
    for pos, i in enumerate(indices):
        try:
            with sample_seed(None if seed_key is None else (*seed_key, pos)):
                samples.append(dataset[i])
        except Exception as exc:
            raise _SampleFailed(i, exc) from exc
    try:
        return (batchify_fn or default_batchify)(samples)
    except Exception as exc:
        raise _SampleFailed(None, exc) from exc


def _sendable(exc: BaseException, in_process: bool) -> BaseException | None:
    """``exc`` itself for a thread; for a process, ``exc`` if it survives pickling, else None."""
    if not in_process:
        return exc
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return None


def worker_loop(dataset, batchify_fn, tasks, results, worker_id: int, in_process: bool) -> None:
    """The loop of one worker thread or process: read tasks until a None task."""
    while True:
        task = tasks.get()
        if task is None:
            return
        key, indices, seed_key = task
        try:
            out = ("ok", fetch_batch(dataset, batchify_fn, indices, seed_key))
        except _SampleFailed as failed:
            exc = failed.original
            text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            out = ("error", failed.index, f"{type(exc).__name__}: {exc}", text, _sendable(exc, in_process))
        except Exception as exc:
            out = ("error", None, f"{type(exc).__name__}: {exc}", traceback.format_exc(), None)
        if in_process:
            # pickled here, not in the queue's feeder thread, which would print a pickling error and drop it
            try:
                out = pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as exc:
                out = pickle.dumps(("error", None, f"the batch cannot be sent back: {type(exc).__name__}: {exc}",
                                    None, None))
        results.put((key, worker_id, out))


class _Workers:
    """A set of worker threads or processes with their task and result queues."""

    def __init__(self, num: int, processes: bool, dataset, batchify_fn):
        self.processes = processes
        self.generation = itertools.count()
        if processes:
            ctx = multiprocessing.get_context("spawn")
            self.tasks, self.results = ctx.Queue(), ctx.Queue()
            make = ctx.Process
        else:
            self.tasks, self.results = queue.Queue(), queue.Queue()
            make = threading.Thread
        self.workers = [make(target=worker_loop, args=(dataset, batchify_fn, self.tasks, self.results, w, processes),
                             name=f"lazyarray-data-worker-{w}", daemon=True) for w in range(num)]
        try:
            for w in self.workers:
                w.start()
        except Exception as exc:
            self.close()
            kind = "processes" if processes else "threads"
            raise DataLoaderError(
                f"DataLoader: could not start {num} worker {kind}: {type(exc).__name__}: {exc}. Worker processes "
                "receive the dataset and batchify_fn by pickling (spawn): define their functions at module level "
                "(no lambdas or local functions), or pass thread_pool=True", original=exc) from exc

    def dead_worker(self) -> str | None:
        if not self.processes:
            return None
        for k, w in enumerate(self.workers):
            if w.exitcode is not None:
                return f"worker process {k} (pid {w.pid}) exited with code {w.exitcode}"
        return None

    def close(self) -> None:
        """Stop every worker: a None task each, then join (processes still alive after 5 s are
        terminated; threads are daemons, so one stuck in a dataset read cannot hang the exit)."""
        started = [w for w in self.workers if w.ident is not None]
        for _ in started:
            self.tasks.put(None)
        deadline = time.monotonic() + 5.0
        for w in started:
            while w.is_alive() and time.monotonic() < deadline:
                self._drain()  # a process blocks on exit until what it put is read
                w.join(0.05)
            if self.processes and w.is_alive():
                w.terminate()
                w.join(1.0)
        self._drain()
        if self.processes:
            for q in (self.tasks, self.results):
                q.cancel_join_thread()
                q.close()
            for w in started:
                w.close()
        self.workers = []

    def _drain(self) -> None:
        try:
            while True:
                self.results.get_nowait()
        except (queue.Empty, OSError, ValueError):
            return


class DataLoader:
    """Batches of ``dataset``, as Gluon's ``gluon.data.DataLoader`` (with PyTorch's ``seed``-style
    determinism and ``device`` placement).

    Args:
        dataset: anything with ``[i]`` and ``len`` (a ``la.data.Dataset``, a list, an array).
        batch_size (int): samples per batch (not with ``batch_sampler``).
        shuffle (bool): a new random order each epoch (``RandomSampler(len, seed)``); not with ``sampler``.
        sampler: an iterable of indices (default: sequential, or random with ``shuffle``).
        batch_sampler: an iterable of index lists; replaces ``batch_size``, ``shuffle``, ``sampler``
            and ``last_batch``.
        last_batch (str): ``"keep"``, ``"discard"`` or ``"rollover"`` the short last batch.
        batchify_fn: list of samples -> batch (default: ``la.data.batchify.default_batchify``).
        num_workers (int): 0 reads in the calling thread; more start workers at the first ``iter``.
        thread_pool (bool): workers are threads (default) or, with False, spawned processes.
        prefetch (int): batches in flight with workers (default ``2 * num_workers``).
        device: a ``la.Device`` the batches are moved to (default: where batchify made them, cpu(0)).
        timeout (float): seconds to wait for one batch from the workers before ``DataLoaderError``.
        seed (int): the shuffle order and the random transforms' draws (per sample, so any number or
            kind of workers gives the same batches); None: fresh entropy.

    A failure in ``dataset[i]`` or the batchify function raises ``la.data.DataLoaderError`` naming the
    sample index and the original exception (its ``__cause__`` where it could be sent back).
    """

    def __init__(self, dataset, batch_size: int | None = None, shuffle: bool = False, sampler=None,
                 batch_sampler=None, last_batch: str = "keep", batchify_fn: Callable | None = None,
                 num_workers: int = 0, thread_pool: bool = True, prefetch: int | None = None,
                 device: Device | None = None, timeout: float = 120, seed: int | None = None):
        if not hasattr(dataset, "__getitem__") or not hasattr(dataset, "__len__"):
            raise ParamError(f"DataLoader: dataset must support [i] and len(), got {type(dataset).__name__}; "
                             "wrap arrays in la.data.ArrayDataset(...)")
        n = len(dataset)
        if n == 0 and batch_sampler is None:
            raise ParamValueError("DataLoader: the dataset is empty (len 0), so every epoch would yield no batch; "
                                  "check how it was built (a filter that keeps nothing, an empty file list)")
        if batch_sampler is None:
            if batch_size is None:
                raise ParamError("DataLoader: batch_size is missing; pass batch_size=... or a batch_sampler")
            batch_size = check_count(batch_size, "DataLoader", "batch_size")
            check_last_batch(last_batch, "DataLoader")
            if sampler is None:
                sampler = RandomSampler(n, seed) if shuffle else SequentialSampler(n)
            elif shuffle:
                raise ParamError("DataLoader: shuffle=True and a sampler were both given; the sampler decides the "
                                 "order: drop shuffle, or pass RandomSampler(len(dataset), seed) as the sampler")
            if last_batch == "discard" and batch_size > n:
                raise ParamValueError(f"DataLoader: batch_size={batch_size} is larger than the dataset ({n} samples) "
                                      "and last_batch='discard' drops the only, short batch; pass a smaller "
                                      "batch_size or last_batch='keep'")
            batch_sampler = BatchSampler(sampler, batch_size, last_batch)
        elif batch_size is not None or shuffle or sampler is not None or last_batch != "keep":
            raise ParamError("DataLoader: batch_sampler decides the batches, so batch_size, shuffle, sampler and "
                             "last_batch must be left out; drop them or drop batch_sampler")
        if batchify_fn is not None and not callable(batchify_fn):
            raise ParamError(f"DataLoader: batchify_fn must be callable, got {type(batchify_fn).__name__}; pass a "
                             "function of a list of samples, e.g. la.data.batchify.Pad()")
        if device is not None and not isinstance(device, Device):
            raise ParamError(f"DataLoader: device must be a la.Device such as la.cpu(0), got {device!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ParamValueError(f"DataLoader: timeout={timeout!r} must be a positive number of seconds")
        self._dataset, self._batch_sampler, self._batchify_fn = dataset, batch_sampler, batchify_fn
        self._num_workers = check_count(num_workers, "DataLoader", "num_workers", minimum=0)
        self._processes = not thread_pool
        prefetch = 2 * self._num_workers if prefetch is None else check_count(prefetch, "DataLoader", "prefetch",
                                                                               minimum=0)
        self._prefetch = max(1, prefetch)
        self._device, self._timeout, self._seed = device, float(timeout), seed
        self._epoch = itertools.count()
        self._workers: _Workers | None = None
        self._finalizer: weakref.finalize | None = None

    def __len__(self) -> int:
        return len(self._batch_sampler)

    def __iter__(self) -> Iterator[Any]:  # NDArray, or tuples / dicts of them: batchify_fn decides
        epoch = next(self._epoch)
        if self._num_workers == 0:
            return self._iter_here(epoch)
        return self._iter_workers(epoch)

    def __enter__(self) -> DataLoader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop the worker threads or processes (they start again at the next ``iter``)."""
        if self._finalizer is not None:
            self._finalizer()  # runs _Workers.close once
        self._workers = self._finalizer = None

    def _seed_key(self, epoch: int, batch_no: int) -> tuple | None:
        return None if self._seed is None else (self._seed, epoch, batch_no)

    def _iter_here(self, epoch: int) -> Iterator:
        for batch_no, indices in enumerate(self._batch_sampler):
            try:
                batch = fetch_batch(self._dataset, self._batchify_fn, indices, self._seed_key(epoch, batch_no))
            except _SampleFailed as failed:
                exc = failed.original
                raise self._error(batch_no, failed.index, f"{type(exc).__name__}: {exc}", None, exc) from exc
            yield self._place(batch)

    def _start_workers(self) -> _Workers:
        if self._workers is None:
            self._workers = _Workers(self._num_workers, self._processes, self._dataset, self._batchify_fn)
            self._finalizer = weakref.finalize(self, self._workers.close)
        return self._workers

    def _iter_workers(self, epoch: int) -> Iterator:
        workers = self._start_workers()
        generation = next(workers.generation)  # results of an abandoned earlier iteration are dropped
        batches = enumerate(self._batch_sampler)
        ready: dict[int, tuple] = {}
        sent = yielded = 0

        def send() -> bool:
            nonlocal sent
            item = next(batches, None)
            if item is None:
                return False
            batch_no, indices = item
            workers.tasks.put(((generation, batch_no), list(indices), self._seed_key(epoch, batch_no)))
            sent += 1
            return True

        more = True
        while more and sent < self._prefetch:
            more = send()
        while yielded < sent:
            waited = 0.0
            while yielded not in ready:
                try:
                    (gen, batch_no), worker_id, out = workers.results.get(timeout=_POLL_S)
                except queue.Empty:
                    waited += _POLL_S
                    dead = workers.dead_worker()
                    if dead is not None or waited >= self._timeout:
                        self.close()
                        why = dead or f"no batch came within timeout={self._timeout:g} s"
                        raise DataLoaderError(f"DataLoader: batch {yielded}: {why}; a worker may be stuck or killed "
                                              "in dataset[i] or batchify_fn (raise timeout=... for slow reads, or "
                                              "run with num_workers=0 to see the failure directly)", batch=yielded) from None
                    continue
                if gen == generation:
                    ready[batch_no] = pickle.loads(out) if workers.processes else out
            out = ready.pop(yielded)
            if out[0] == "error":
                _, index, what, text, exc = out
                self.close()
                raise self._error(yielded, index, what, text, exc) from exc
            yielded += 1
            if more:
                more = send()
            yield self._place(out[1])

    def _error(self, batch_no: int, index, what: str, text: str | None, exc) -> DataLoaderError:
        where = f"reading sample {index}" if index is not None else "batchifying the samples"
        message = f"DataLoader: batch {batch_no}: {where} raised {what}"
        if text:
            message += "\n\nIn the worker:\n" + text.rstrip()
        return DataLoaderError(message, index=index, batch=batch_no, original=exc)

    def _place(self, batch):
        device = self._device
        if device is None:
            return batch
        if isinstance(batch, NDArray):
            return batch if batch.device == device else batch.to(device)
        if isinstance(batch, tuple | list):
            return type(batch)(self._place(b) for b in batch)
        if isinstance(batch, Mapping):
            return {k: self._place(v) for k, v in batch.items()}
        return batch
