"""Exports are atomic as a set: a kill at any moment leaves the old model, the new one, or a named
error; stale temporaries are removed by the next write; files get the umask's mode."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as nn
from lazyarray.fileio import remove_stale_temporaries, write_atomic


def _net(seed, units=4):
    la.random.seed(seed)
    net = nn.HybridSequential()
    net.add(nn.Dense(units, in_units=3))
    net.initialize()
    net.hybridize()
    net(la.ones((1, 3)))
    return net


def test_a_new_parameter_file_beside_an_old_symbol_file_is_refused(tmp_path):
    prefix = str(tmp_path / "m")
    old = _net(1)
    sym_file, param_file = old.export(prefix)
    old_symbol = open(sym_file, "rb").read()
    _net(2, units=5).export(prefix)  # the new pair, another graph
    with open(sym_file, "wb") as f:  # what a kill between the two renames leaves: new params, old graph
        f.write(old_symbol)
    with pytest.raises(la.GraphFormatError, match="exported with a different graph"):
        nn.SymbolBlock.imports(sym_file, ["data"], param_file)


def test_new_parameters_beside_the_same_graph_are_the_complete_new_model(tmp_path):
    prefix = str(tmp_path / "m")
    sym_file, param_file = _net(1).export(prefix)
    old_symbol = open(sym_file, "rb").read()
    new = _net(2)
    new.export(prefix)
    with open(sym_file, "wb") as f:
        f.write(old_symbol)
    x = la.ones((1, 3))
    np.testing.assert_allclose(nn.SymbolBlock.imports(sym_file, ["data"], param_file)(x).asnumpy(),
                               new(x).asnumpy(), rtol=1e-6)


def test_the_pair_an_export_wrote_loads(tmp_path):
    net = _net(3)
    sym_file, param_file = net.export(str(tmp_path / "m"))
    back = nn.SymbolBlock.imports(sym_file, ["data"], param_file)
    x = la.ones((2, 3))
    np.testing.assert_allclose(back(x).asnumpy(), net(x).asnumpy())


def test_exported_files_get_the_mode_of_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        sym_file, param_file = _net(4).export(str(tmp_path / "m"))
    finally:
        os.umask(old)
    for path in (sym_file, param_file):
        assert os.stat(path).st_mode & 0o777 == 0o640


def test_the_next_write_removes_stale_temporaries_of_dead_writers(tmp_path):
    target = tmp_path / "f.json"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".f.json.tmp-{dead.stdout.strip()}-abc123"
    stale.write_bytes(b"x" * 100)
    mine = tmp_path / f".f.json.tmp-{os.getpid()}-live"  # a live writer's temporary is left alone
    mine.write_bytes(b"y")
    other = tmp_path / ".other.json.tmp-1-zzz"  # another file's temporary is not ours to remove
    other.write_bytes(b"z")
    write_atomic(str(target), b"{}")
    assert not stale.exists() and mine.exists() and other.exists()
    assert target.read_bytes() == b"{}"
    assert remove_stale_temporaries(str(target)) == []


_KILLED_EXPORT = textwrap.dedent("""
    import sys
    import lazyarray as la
    from lazyarray import blocks as nn
    la.random.seed(int(sys.argv[2]))
    net = nn.HybridSequential()
    net.add(nn.Dense(256, in_units=256), nn.Dense(256, in_units=256))
    net.initialize(); net.hybridize(); net(la.ones((1, 256)))
    print("ready", flush=True)
    while True:
        net.export(sys.argv[1])
""")


def _new_net():
    la.random.seed(8)
    net = nn.HybridSequential()
    net.add(nn.Dense(256, in_units=256), nn.Dense(256, in_units=256))
    net.initialize()
    return net


@pytest.mark.parametrize("delay", [0.0, 0.01, 0.03, 0.07, 0.15])
def test_kill_during_export_leaves_old_new_or_a_named_error(tmp_path, delay):
    prefix = str(tmp_path / "m")
    old = _net(7)
    old.export(prefix)  # an old, complete model
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_EXPORT, prefix, "8"], stdout=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"ready"
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    try:
        back = nn.SymbolBlock.imports(prefix + "-symbol.json", ["data"], prefix + "-0000.params")
    except la.GraphFormatError as exc:
        assert "exported with a different graph" in str(exc)  # new parameters beside the old graph
    else:
        got = {n: p.data().asnumpy() for n, p in back.collect_params().items()}
        refs = [old.collect_params(), _new_net().collect_params()]
        ref = next(r for r in refs if sorted(v.shape for v in got.values())
                   == sorted(p.data().shape for p in r.values()))
        assert sorted(np.round(v.sum(), 3) for v in got.values()) == \
            sorted(np.round(p.data().asnumpy().sum(), 3) for p in ref.values())
    _net(9).export(prefix)  # the next export cleans up what the killed one left
    assert [p for p in os.listdir(tmp_path) if ".tmp-" in p] == []


def test_parameter_files_of_other_epochs_load_with_the_same_graph(tmp_path):
    prefix = str(tmp_path / "m")
    net = _net(5)
    _, first = net.export(prefix, epoch=0)
    for p in net.collect_params().values():
        p.set_data(p.data() * 2)
    sym_file, tenth = net.export(prefix, epoch=10)
    x = la.ones((1, 3))
    a = nn.SymbolBlock.imports(sym_file, ["data"], first)(x).asnumpy()
    b = nn.SymbolBlock.imports(sym_file, ["data"], tenth)(x).asnumpy()
    np.testing.assert_allclose(b, 2 * a, rtol=1e-6)
