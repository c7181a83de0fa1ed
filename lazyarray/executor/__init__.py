"""The cached executor: compile a Symbol per input signature, plan memory, run flat programs."""
