"""rmsnorm against a float64 reference; the kernel is loaded the way users load it."""

import os
import subprocess
import sys

import kernels
import pytest
import torch
import torch.nn as nn

# The CUDA variant where torch sees a GPU, the CPU variant otherwise (kernels alone would pick the
# CUDA variant for a CUDA build of torch, GPU or not).
rmsnorm = kernels.get_kernel("your-hf-org/rmsnorm", version=1, backend=None if torch.cuda.is_available() else "cpu")

DTYPES = [torch.bfloat16, torch.float16, torch.float32]
# Output tolerance: one rounding to the dtype plus float32 accumulation.
RTOL = {torch.bfloat16: 2**-8, torch.float16: 2**-10, torch.float32: 1e-5}
# Hidden sizes: register-resident sizes, sizes that are not a multiple of the
# 16-byte vector (8 or 4 elements), odd sizes, and rows too long for registers.
HIDDEN = [1, 7, 64, 100, 1000, 1023, 2048, 3000, 3072, 4096, 5120, 8190, 16392, 20001]
LEADING = [(1,), (5,), (3, 17)]


def reference(x: torch.Tensor, weight, eps: float) -> torch.Tensor:
    x64 = x.double()
    y = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps)
    return y * weight.double() if weight is not None else y


def assert_matches(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype) -> None:
    assert out.dtype == dtype and out.shape == ref.shape
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.double(), ref, rtol=RTOL[dtype], atol=RTOL[dtype] * 1e-2)


def random_inputs(shape, dtype, device, with_weight, seed):
    g = torch.Generator().manual_seed(seed)
    # A per-row scale checks that the norm really is per row.
    scale = torch.rand(shape[:-1] + (1,), generator=g) * 4 + 0.1
    x = (torch.randn(shape, generator=g) * scale).to(dtype).to(device)
    w = (torch.randn(shape[-1], generator=g) * 0.5 + 1).to(dtype).to(device) if with_weight else None
    return x, w


@pytest.mark.kernels_ci
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("with_weight", [True, False], ids=["weight", "no_weight"])
@pytest.mark.parametrize("hidden", HIDDEN)
def test_rms_norm_matches_fp64(device, dtype, with_weight, hidden):
    for i, leading in enumerate(LEADING):
        x, w = random_inputs(leading + (hidden,), dtype, device, with_weight, seed=hidden * 10 + i)
        out = rmsnorm.rms_norm(x, w, 1e-6)
        assert_matches(out, reference(x, w, 1e-6), dtype)


@pytest.mark.kernels_ci
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("hidden", [8, 1000, 1001, 4096, 16392])
def test_fused_add_rms_norm(device, dtype, hidden):
    x, w = random_inputs((37, hidden), dtype, device, True, seed=hidden)
    r, _ = random_inputs((37, hidden), dtype, device, False, seed=hidden + 1)
    out, new_residual = rmsnorm.fused_add_rms_norm(x, r, w, 1e-5)
    # The sum is rounded to the dtype exactly as torch rounds `x + r`.
    torch.testing.assert_close(new_residual, x + r, rtol=0, atol=0)
    assert_matches(out, reference(new_residual, w, 1e-5), dtype)
    # Inputs are left alone (the op is functional).
    x2, _ = random_inputs((37, hidden), dtype, device, True, seed=hidden)
    torch.testing.assert_close(x, x2, rtol=0, atol=0)


@pytest.mark.kernels_ci
def test_misaligned_and_strided_inputs(device):
    base = torch.randn(4, 2 * 4096 + 1, device=device, dtype=torch.bfloat16)
    x = base[:, 1 : 4096 + 1]  # rows start off the 16-byte grid and are strided
    w = torch.randn(4097, device=device, dtype=torch.bfloat16)[1:]
    out = rmsnorm.rms_norm(x, w, 1e-6)
    assert_matches(out, reference(x, w, 1e-6), torch.bfloat16)
    xt = torch.randn(256, 48, device=device, dtype=torch.float16).t()
    assert_matches(rmsnorm.rms_norm(xt, None, 1e-6), reference(xt, None, 1e-6), torch.float16)


@pytest.mark.kernels_ci
def test_empty_and_errors(device):
    empty = torch.empty(0, 128, device=device, dtype=torch.bfloat16)
    assert rmsnorm.rms_norm(empty, None, 1e-6).shape == (0, 128)
    x = torch.randn(4, 128, device=device, dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="weight must have shape"):
        rmsnorm.rms_norm(x, torch.ones(64, device=device, dtype=torch.bfloat16), 1e-6)
    with pytest.raises(RuntimeError, match="weight dtype"):
        rmsnorm.rms_norm(x, torch.ones(128, device=device, dtype=torch.float32), 1e-6)
    with pytest.raises(RuntimeError, match="dtype must be"):
        rmsnorm.rms_norm(x.double(), None, 1e-6)


class LlamaRMSNorm(nn.Module):
    """transformers' LlamaRMSNorm, the module the layer replaces."""

    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


@pytest.mark.kernels_ci
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_layer_kernelizes_transformers_module(device, dtype):
    hub_norm = kernels.use_kernel_forward_from_hub("RMSNorm")(type("HubRMSNorm", (LlamaRMSNorm,), {}))
    model = nn.Sequential(nn.Identity(), hub_norm(3072, eps=1e-5)).to(device=device, dtype=dtype)
    with torch.no_grad():
        model[1].weight.normal_(1.0, 0.3)
    x = torch.randn(2, 9, 3072, device=device, dtype=dtype)
    expected = model(x)

    # kernels.LayerRepository would resolve `version` on the Hub even under
    # LOCAL_KERNELS, so hand kernelize the layer of the kernel loaded above.
    class LoadedLayer:
        layer_name = "RMSNorm"

        def load(self):
            return rmsnorm.layers.RMSNorm

    mapping = {"RMSNorm": {device: LoadedLayer()}}
    with kernels.use_kernel_mapping(mapping, inherit_mapping=False):
        model = kernels.kernelize(model, mode=kernels.Mode.INFERENCE, device=device, use_fallback=False)
    out = model(x)
    # transformers rounds twice (normalized value, then times weight); the kernel once.
    torch.testing.assert_close(out, expected, rtol=2 * RTOL[dtype], atol=2 * RTOL[dtype])
    assert_matches(out, reference(x, model[1].weight, 1e-5), dtype)


@pytest.mark.kernels_ci
def test_layer_with_float32_weight_follows_transformers(device):
    layer = rmsnorm.layers.RMSNorm()
    layer.weight = nn.Parameter(torch.randn(512, device=device))
    layer.variance_epsilon = 1e-6
    x = torch.randn(3, 512, device=device, dtype=torch.bfloat16)
    out = layer(x)
    assert out.dtype == torch.float32  # as transformers: fp32 weight times bf16 activations
    torch.testing.assert_close(out.double(), reference(x, layer.weight.detach(), 1e-6), rtol=2**-8, atol=1e-3)


@pytest.mark.kernels_ci
def test_torch_compile_fullgraph(device):
    def block(x, r, w):
        y, s = rmsnorm.fused_add_rms_norm(x, r, w, 1e-6)
        return rmsnorm.rms_norm(y * 2, w, 1e-6), s

    graphs = []

    def recording_backend(gm, example_inputs):
        graphs.append(gm)
        return torch._dynamo.backends.common.aot_autograd(fw_compiler=lambda g, _: g)(gm, example_inputs)

    x = torch.randn(16, 1024, device=device, dtype=torch.bfloat16)
    r = torch.randn_like(x)
    w = torch.randn(1024, device=device, dtype=torch.bfloat16)
    ref_out, ref_s = block(x, r, w)
    # Inductor's C++ compile takes half a minute on CPU; there the graph is run
    # through AOTAutograd (fake kernels, functionalization) without codegen.
    backends = [recording_backend] + (["inductor"] if device == "cuda" else [])
    for backend in backends:
        torch._dynamo.reset()
        out, s = torch.compile(block, backend=backend, fullgraph=True, dynamic=False)(x, r, w)
        torch.testing.assert_close(s, ref_s, rtol=0, atol=0)
        torch.testing.assert_close(out, ref_out, rtol=2**-8, atol=1e-2)
    targets = {str(node.target) for node in graphs[0].graph.nodes if node.op == "call_function"}
    # Targets read "<namespace>.<op>" or "<namespace>.<op>.<overload>".
    assert any(".fused_add_rms_norm" in t for t in targets) and any(".rms_norm" in t for t in targets), targets


def test_fake_kernels_match_real_ones(device):
    x = torch.randn(2, 3, 1000, device=device, dtype=torch.float16)
    w = torch.randn(1000, device=device, dtype=torch.float16)
    for op, args in (
        (rmsnorm.ops.rms_norm, (x, w, 1e-6)),
        (rmsnorm.ops.fused_add_rms_norm, (x, x, w, 1e-6)),
    ):
        torch.library.opcheck(op, args)


# The CPU variant picks its vectors at run time (AVX-512, AVX2, or portable code); torch's own cap,
# ATEN_CPU_CAPABILITY, makes it take each path, in a fresh process (the choice is made once).
CPU_CAPABILITY = torch.backends.cpu.get_cpu_capability()  # DEFAULT, AVX2, AVX512 (or another platform's)
CPU_PATH_CHECK = """
import torch, kernels
k = kernels.get_kernel("your-hf-org/rmsnorm", version=1, backend="cpu")
g = torch.Generator().manual_seed(0)
for dtype, tol in ((torch.bfloat16, 2**-8), (torch.float16, 2**-10), (torch.float32, 1e-5)):
    for hidden in (7, 64, 1000, 3000, 4096, 16392):
        x = (torch.randn(5, hidden, generator=g) * 3).to(dtype)
        r = torch.randn(5, hidden, generator=g).to(dtype)
        w = (torch.randn(hidden, generator=g) * 0.5 + 1).to(dtype)
        y, s = k.fused_add_rms_norm(x, r, w, 1e-6)
        assert torch.equal(s, x + r), (dtype, hidden)
        for out, src, weight in ((k.rms_norm(x, w, 1e-6), x, w), (k.rms_norm(x, None, 1e-6), x, None), (y, s, w)):
            x64 = src.double()
            ref = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + 1e-6)
            ref = ref * weight.double() if weight is not None else ref
            torch.testing.assert_close(out.double(), ref, rtol=tol, atol=tol * 1e-2)
"""


@pytest.mark.kernels_ci
@pytest.mark.parametrize("capability", ["default", "avx2", "avx512"])
def test_every_cpu_vector_path(device, capability):
    if device != "cpu":
        pytest.skip("checks the CPU variant's instruction-set paths")
    # torch trusts the variable: a path this CPU lacks would stop torch's own kernels (SIGILL)
    levels = ["DEFAULT", "AVX2", "AVX512"]
    supported = ["default", "avx2", "avx512"][: 1 + levels.index(CPU_CAPABILITY)] if CPU_CAPABILITY in levels else ["default"]
    if capability not in supported:
        pytest.skip(f"this CPU runs {CPU_CAPABILITY} code, not {capability}")
    env = {**os.environ, "ATEN_CPU_CAPABILITY": capability}
    result = subprocess.run([sys.executable, "-c", CPU_PATH_CHECK], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
