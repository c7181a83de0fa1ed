"""Paths and loaders of the MXNet 1.9.1 fixtures (tests/data/mxnet, made by make_fixtures.py)."""
import glob
import os

import numpy as np

DATA = os.path.join(os.path.dirname(__file__), os.pardir, "data", "mxnet")
OPS = os.path.join(DATA, "ops")
MODELS = os.path.join(DATA, "models")
MODEL_NAMES = ("resnet18_v1", "mobilenet0.25", "mlp", "text_cnn")


def op_cases() -> list[str]:
    return sorted(os.path.basename(f)[:-len("-symbol.json")] for f in glob.glob(os.path.join(OPS, "*-symbol.json")))


def op_files(case: str) -> tuple[str, str]:
    prefix = os.path.join(OPS, case)
    return prefix + "-symbol.json", prefix + "-0000.params"


def op_io(case: str) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The inputs (name -> array) MXNet ran the case on, and its output."""
    prefix = os.path.join(OPS, case)
    ins = {os.path.basename(p)[len(case) + 4:-4]: np.load(p, allow_pickle=False)
           for p in glob.glob(glob.escape(prefix) + "-in-*.npy")}
    return ins, np.load(prefix + "-out.npy", allow_pickle=False)


def model_files(name: str) -> tuple[str, str]:
    prefix = os.path.join(MODELS, name)
    return prefix + "-symbol.json", prefix + "-0000.params"


def model_io(name: str) -> tuple[np.ndarray, np.ndarray]:
    prefix = os.path.join(MODELS, name)
    return np.load(prefix + "-input.npy", allow_pickle=False), np.load(prefix + "-output.npy", allow_pickle=False)
