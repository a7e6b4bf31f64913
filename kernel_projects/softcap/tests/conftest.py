import pytest
import torch


def pytest_configure(config):
    config.addinivalue_line("markers", "kernels_ci: CI subset of this kernel's tests")


@pytest.fixture
def device() -> str:
    # The harness loads the CUDA variant where torch sees a GPU, the CPU variant otherwise.
    return "cuda" if torch.cuda.is_available() else "cpu"
