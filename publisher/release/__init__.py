"""The release stage: check, build, test and push a kernel project in one run."""
