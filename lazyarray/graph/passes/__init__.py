"""Graph passes: each one function in one file (Symbol -> Symbol, or an analysis)."""
