"""The test stage: run each built variant's tests in its own environment, on
the hardware it targets where this machine has it, and record the result
beside the build (build/.publisher/test-report.json) for the push stage."""
