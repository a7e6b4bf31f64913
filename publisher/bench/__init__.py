"""`publisher bench`: the project's benchmarks/benchmark*.py, in the form
`kernels benchmark` runs them, against each built variant this machine can
run, with results per device in build/.publisher/bench/."""
