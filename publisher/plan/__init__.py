"""The plan stage (`publisher matrix`): matrix.yaml x build.toml -> the
variants a kernel needs (planner), the matrix data (matrix), variant names
(variants), GPU architectures per toolkit (capabilities), CPU-specific flags
(arch_flags) and the GitHub runner that builds each variant (github_runners)."""
