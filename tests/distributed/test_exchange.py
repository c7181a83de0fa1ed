"""The peer channel's mailbox (``distributed/exchange.py``) on its own: every wait ends with the arrays, at
its deadline naming the silent peers, when the attempt is ended (a failed send, the client's abort), or when
a later attempt begins; steps done are forgotten."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import lazyarray as la
from lazyarray.distributed.exchange import Mailbox


def test_take_returns_what_every_sender_put_whatever_the_order():
    box = Mailbox()
    box.put((3, 0), "rs", 2, [np.ones(2)])  # (a peer may send before this worker's step began)
    got = []
    waiter = threading.Thread(target=lambda: got.append(box.take((3, 0), "rs", {0: "a", 2: "c"}, None, "t")))
    waiter.start()
    box.put((3, 0), "ag", 0, [np.zeros(1)])  # (another phase: not what the waiter wants)
    box.put((3, 0), "rs", 0, [np.zeros(2)])
    waiter.join(timeout=60)
    assert not waiter.is_alive()
    assert sorted(got[0]) == [0, 2] and got[0][2][0].tolist() == [1.0, 1.0]


def test_a_silent_peer_is_named_at_the_deadline():
    box = Mailbox()
    box.put((1, 4), "rs", 0, [np.ones(1)])
    start = time.monotonic()
    with pytest.raises(la.DistributedError, match=r"heard nothing from replica 1 on tcp://b within the step's "
                                                  r"timeout \(step 1, reduce-scatter\)"):
        box.take((1, 4), "rs", {0: "tcp://a", 1: "tcp://b"}, time.monotonic() + 0.2, "DataParallel.step")
    assert time.monotonic() - start >= 0.2


def test_an_ended_attempt_and_a_later_attempt_end_the_wait_at_once():
    box = Mailbox()
    errors = []

    def wait(tag):
        try:
            box.take(tag, "ag", {1: "tcp://b"}, None, "DataParallel.step")
        except la.DistributedError as exc:
            errors.append(str(exc))

    first = threading.Thread(target=wait, args=((5, 1),))
    first.start()
    box.end((5, 1), "DataParallel.step: the client gave up on step 5")
    first.join(timeout=60)
    second = threading.Thread(target=wait, args=((5, 2),))
    second.start()
    box.begin((5, 3))  # (the next attempt of the step reached this worker)
    second.join(timeout=60)
    assert not first.is_alive() and not second.is_alive()
    assert errors[0] == "DataParallel.step: the client gave up on step 5"
    assert "step 5 (attempt 2) was given up for a later attempt (step 5, attempt 3)" in errors[1]
    with pytest.raises(la.DistributedError, match="gave up on step 5"):  # (an ended attempt stays ended)
        box.take((5, 1), "rs", {1: "b"}, None, "t")


def test_finish_forgets_the_steps_done_and_keeps_the_later_ones():
    box = Mailbox()
    for step in (1, 2, 3):
        box.put((step, 0), "rs", 1, [np.full(1, step)])
    box.end((2, 0), "gone")
    box.finish(2)
    assert box._items.keys() == {((3, 0), "rs")} and box._ended == {}
    assert box.take((3, 0), "rs", {1: "b"}, None, "t")[1][0].tolist() == [3]
