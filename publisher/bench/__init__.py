"""`publisher bench`: the project's benchmarks/benchmark*.py (the form `kernels benchmark` runs)
against each built variant, timed as a user's code runs them; results per device."""
