"""Doctests of modules whose optional dependency is missing are not collected (the test files
skip themselves with ``pytest.importorskip``)."""
import importlib.util

collect_ignore = []
if importlib.util.find_spec("onnx") is None or importlib.util.find_spec("onnxruntime") is None:
    collect_ignore += ["lazyarray/onnx/export.py", "lazyarray/onnx/__init__.py"]
