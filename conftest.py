"""Collection rules for the package's doctests (``testpaths`` includes ``lazyarray/``): modules whose
optional dependency is missing are not collected (their test files skip with ``pytest.importorskip``)."""
import importlib.util

collect_ignore = []
if importlib.util.find_spec("onnx") is None or importlib.util.find_spec("onnxruntime") is None:
    # lazyarray.onnx.backend subclasses onnx's Backend at import; the export doctests run onnxruntime
    collect_ignore += ["lazyarray/onnx/backend.py", "lazyarray/onnx/export.py", "lazyarray/onnx/__init__.py"]
