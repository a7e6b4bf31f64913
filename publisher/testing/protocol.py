"""The names of what publisher hands a variant's test process (run_variant.py
sets them; plugin.py, default_test.py and device.py read or print them in the
variant's own environment, where publisher cannot be imported, so they spell
them out: tests/test_options.py checks that they spell only these)."""

from __future__ import annotations

EVENTS = "PUBLISHER_TEST_EVENTS"  # file the plugin appends one JSON line per test event to
BACKEND = "PUBLISHER_TEST_BACKEND"  # the variant's backend (cpu, cuda, ...)
KERNEL_DIR = "PUBLISHER_TEST_KERNEL_DIR"  # folder holding <variant> (only the variant under test)
VARIANT_DIR = "PUBLISHER_TEST_VARIANT_DIR"  # that variant folder (for metadata.json)
LOAD_ONLY = "PUBLISHER_TEST_LOAD_ONLY"  # "1": import and check op registration, call nothing
DEVICE_OUT = "PUBLISHER_TEST_DEVICE_OUT"  # file the plugin records the device the tests ran on in
DEVICE_LINE = "PUBLISHER_DEVICE"  # prefix of device.py's one-line answer to the probe
HIDDEN = "PUBLISHER_TEST_HIDDEN_ACCELERATORS"  # JSON list: accelerators hidden from the tests (a cpu variant)
SMOKE_OUT = "PUBLISHER_TEST_SMOKE_OUT"  # file the smoke test appends its calls and their outcomes to
SMOKE_SKIP = "PUBLISHER_TEST_SMOKE_SKIP"  # JSON list of smoke targets not to call (one did not return)
SMOKE_CALL_TIMEOUT = "PUBLISHER_TEST_SMOKE_CALL_TIMEOUT"  # seconds one smoke call may take
SMOKE_INPUTS = "PUBLISHER_TEST_SMOKE_INPUTS"  # file: op -> the arguments the package's own code gives it (JSON)
SMOKE_HUNG_EXIT = 86  # the smoke test's exit code after a call that did not return (recorded first)

# What adopt's generated tests (tests/test_<name>_ops.py, the project's own file once written, run without
# publisher) tell the verdict through pytest itself: a skip reason and a recorded property.
NEEDS_INPUTS = "needs inputs"  # the start of the skip reason of an op that refused the inputs the test gave it
CHECKED = "publisher_checked"  # record_property name: what a passing generated test checked of an op
CHECKED_RAN = "ran"  # the op ran on its inputs and returned what its schema says
CHECKED_REFERENCE = "reference"  # ... and its result matched the project's Python reference
CHECKED_ORIGINAL = "original"  # a call recorded from the original extension gave what the original gave
REPLAYED = "publisher_replayed"  # record_property: "<op> <program>" of a replayed call that passed
CHECKED_ORIGINAL_OPS = "original-ops"  # (a verdict's count, not a property) distinct ops so checked
RECORDED_DIR = "recorded"  # under tests/: what adopt --record kept (JSON files)
ORIGINAL_FAILURES = "original_failures"  # their key: {test node id: failed|crashed} with the original extension
CHECKED_REGISTRATION = "registration"  # the op is registered with the schema adopt derived
CHECKED_NEEDS_INPUTS = "needs-inputs"  # (a verdict's count, not a property) ops that refused their inputs
NOT_REGISTERED = "not registered"  # the start of the skip reason of an op with no kernel for its inputs' device
CHECKED_NOT_REGISTERED = "not-registered"  # (a verdict's count, not a property) ops so skipped
# torch's dispatcher, called with tensors of a backend the op has no kernel for (the backend is group 1)
NO_KERNEL_FOR_BACKEND = r"Could not run '[^']+' with arguments from the '(\w+)' backend"
# torch's dispatcher refusing how an op is called (its schema), before any kernel runs: the port's schema does not
# take a call the original took (replay_tests.py); the call, not the computation
SCHEMA_MISMATCH = (r"is missing value for argument|expected at most \d+ argument|Expected a value of type|"
                   r"Unknown keyword argument|failed to match any schema")
# An error after which the device cannot run anything: the call broke it, whatever its inputs
# (default_test.py spells the same pattern: it runs where publisher cannot be imported)
FATAL_DEVICE_ERROR = (r"illegal memory access|misaligned address|illegal instruction|unspecified launch failure|"
                      r"an illegal|hardware stack error|Xid")

NAMES = (EVENTS, BACKEND, KERNEL_DIR, VARIANT_DIR, LOAD_ONLY, DEVICE_OUT, DEVICE_LINE, HIDDEN, SMOKE_OUT, SMOKE_SKIP,
         SMOKE_CALL_TIMEOUT, SMOKE_INPUTS)
