"""Collection rules for the package's doctests (``testpaths`` includes ``lazyarray/``)."""
import importlib.util

# lazyarray.onnx.backend subclasses onnx's Backend at import: without the onnx extra it cannot be collected.
collect_ignore = [] if importlib.util.find_spec("onnx") else ["lazyarray/onnx/backend.py"]
