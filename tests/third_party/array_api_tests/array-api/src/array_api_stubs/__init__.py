# Vendored (trimmed): only the 2024.12 revision is shipped, so only it is imported.
from . import _2024_12  # noqa: F401
