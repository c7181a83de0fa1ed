"""Training step of an LSTM language model (``la.blocks.models.lstm_lm``): imperative vs hybridized.

One step = forward, softmax cross-entropy, backward, Adam update. The imperative step runs the
time loop in Python (``la.foreach`` eagerly: every op of every step goes through the dispatcher and
the autograd tape); the hybridized step is one compiled graph whose loops are ``foreach`` nodes (a
body program planned once, run per time step; backward a reverse ``foreach``).

Target (issue #14): hybridized >= 1.3x faster than imperative.

    python benchmarks/lstm_step.py [--quick]
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import best_of, table

import lazyarray as la
from lazyarray import blocks as B

CONFIGS = [  # vocab, units, layers, batch, seq
    (30, 32, 2, 4, 12),
    (1000, 128, 2, 16, 35),
    (1000, 256, 2, 32, 35),
]


def make_step(hybrid: bool, vocab, units, layers, batch, seq):
    la.random.seed(0)
    net = B.models.lstm_lm(vocab, units=units, num_layers=layers)
    net.initialize()
    if hybrid:
        net.hybridize()
    trainer = B.Trainer(net.collect_params(), "adam", {"learning_rate": 1e-3})
    loss_fn = B.SoftmaxCrossEntropyLoss()
    rng = np.random.default_rng(0)
    x, y = la.array(rng.integers(0, vocab, (batch, seq))), la.array(rng.integers(0, vocab, (batch, seq)))

    def step():
        with la.autograd.record():
            loss = loss_fn(net(x), y).mean()
        loss.backward()
        trainer.step(1)
        return loss.item()

    step()  # trace, compile, allocate
    return step


def main(quick: bool = False) -> None:
    rows = []
    for cfg in CONFIGS[:1] if quick else CONFIGS:
        imp, hyb = make_step(False, *cfg), make_step(True, *cfg)
        repeat = 3 if quick else 5
        t_imp = best_of(imp, repeat=repeat, number=2)
        t_hyb = best_of(hyb, repeat=repeat, number=2)
        rows.append(["x".join(map(str, cfg)), t_imp * 1e3, t_hyb * 1e3, t_imp / t_hyb])
    print(table(["vocab x units x layers x batch x seq", "imperative ms", "hybridized ms", "speed-up"], rows))


if __name__ == "__main__":
    main("--quick" in sys.argv)
