"""Reading a kernel project: build.toml (every edition) and the folder layout."""
