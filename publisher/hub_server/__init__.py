"""A Hub-compatible server (storage, HTTP API, fault injection) for tests and local dry runs."""
