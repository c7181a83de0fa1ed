"""The graph IR: ``Node``/``Entry`` (node.py), ``Symbol`` (symbol.py), passes, serialization."""
