"""softcap against a float64 reference; the kernel is loaded the way users load it."""

import kernels
import pytest
import torch
import torch.nn as nn

softcap = kernels.get_kernel("your-hf-org/softcap", version=1)

RTOL = {torch.bfloat16: 2**-8, torch.float16: 2**-10, torch.float32: 1e-5}


def reference(x, cap):
    return torch.tanh(x.double() / cap) * cap


@pytest.mark.kernels_ci
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("shape", [(1,), (7, 33), (4, 1000, 3)])
@pytest.mark.parametrize("cap", [1.0, 30.0, 50.0])
def test_matches_fp64(device, dtype, shape, cap):
    x = (torch.randn(shape, device=device) * cap * 2).to(dtype)
    out = softcap.softcap(x, cap)
    assert out.dtype == dtype and out.shape == x.shape
    torch.testing.assert_close(out.double(), reference(x, cap), rtol=RTOL[dtype], atol=cap * RTOL[dtype] * 1e-2)
    assert out.abs().max() <= cap


@pytest.mark.kernels_ci
def test_saturates_without_nan(device):
    x = torch.tensor([-1e30, -1e4, 0.0, 1e4, 1e30], device=device)
    torch.testing.assert_close(softcap.softcap(x, 30.0), torch.tensor([-30.0, -30.0, 0.0, 30.0, 30.0], device=device))


@pytest.mark.kernels_ci
def test_rejects_non_positive_cap(device):
    with pytest.raises(ValueError, match="cap must be positive"):
        softcap.softcap(torch.ones(3, device=device), 0.0)


@pytest.mark.kernels_ci
def test_backward(device):
    x = torch.randn(64, device=device, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: softcap.softcap(t, 3.0), (x,))


@pytest.mark.kernels_ci
def test_layer_and_compile(device):
    layer = softcap.layers.SoftCap()
    layer.cap = 20.0
    x = torch.randn(8, 128, device=device) * 50
    torch.testing.assert_close(layer(x).double(), reference(x, 20.0), rtol=1e-5, atol=1e-5)
    compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(x), layer(x))


@pytest.mark.kernels_ci
def test_kernelize_replaces_forward(device):
    class LogitCap(nn.Module):
        def __init__(self):
            super().__init__()
            self.cap = 15.0

        def forward(self, x):
            return x.clamp(-self.cap, self.cap)  # deliberately different: shows the swap happened

    hub_cls = kernels.use_kernel_forward_from_hub("SoftCap")(type("HubLogitCap", (LogitCap,), {}))

    class LoadedLayer:  # kernels.LayerRepository would resolve the version on the Hub
        layer_name = "SoftCap"

        def load(self):
            return softcap.layers.SoftCap

    model = nn.Sequential(hub_cls())
    with kernels.use_kernel_mapping({"SoftCap": {device: LoadedLayer()}}, inherit_mapping=False):
        model = kernels.kernelize(model, mode=kernels.Mode.INFERENCE, device=device, use_fallback=False)
    x = torch.randn(5, 9, device=device) * 40
    torch.testing.assert_close(model(x).double(), reference(x, 15.0), rtol=1e-5, atol=1e-5)
