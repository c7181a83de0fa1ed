"""A traced 3-layer MLP shared by the graph tests."""
import numpy as np

import lazyarray as la


def mlp_params(seed=0, sizes=(8, 16, 12, 5)):
    rng = np.random.default_rng(seed)
    params = {}
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        params[f"w{i}"] = la.array(rng.standard_normal((b, a)).astype(np.float32) * 0.3)
        params[f"b{i}"] = la.array(rng.standard_normal(b).astype(np.float32) * 0.1)
    return params


def mlp(x, p):
    h = la.relu(la.nn.dense(x, p["w0"], p["b0"]))
    h = la.relu(la.nn.dense(h, p["w1"], p["b1"]))
    return la.nn.softmax(la.nn.dense(h, p["w2"], p["b2"]))


def traced_mlp(batch=4, seed=0):
    """(symbol, data, params, eager output) of the MLP traced with data as the only input."""
    p = mlp_params(seed)
    x = la.array(np.random.default_rng(seed + 1).standard_normal((batch, 8)).astype(np.float32))
    eager = mlp(x, p).asnumpy()
    with la.deferred():
        y = mlp(x, p)
    return la.get_symbol(y, inputs={"data": x}), x, p, eager, y
