"""Work sent elsewhere: `--on PLACE:TARGETS` runs the test (or benchmark) stage
on machines this one is not — Hugging Face Jobs today (resources/places.yaml
names the places, one module each)."""
