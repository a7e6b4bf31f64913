"""Toolchains: the isolated environment (torch, and nvcc for CUDA) each
variant is compiled and tested with. spec: what a variant needs; provision:
create and cache it; probe: read what an interpreter holds."""
