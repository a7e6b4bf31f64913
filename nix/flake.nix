# Template flake for a kernel project: copy it next to build.toml, run
# `nix flake lock` once (needs GitHub), and commit flake.nix and flake.lock.
# `publisher build . --backend nix` then drives it; see nix/README.md.
{
  description = "Kernel built with kernel-builder";

  inputs = {
    kernel-builder.url = "github:huggingface/kernels";
  };

  outputs =
    { self, kernel-builder, ... }:
    kernel-builder.lib.genKernelFlakeOutputs {
      inherit self;
      path = ./.;
    };
}
