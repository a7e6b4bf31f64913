"""How the test process starts: `python -S -c BOOT <variant folder> <overlay or ''> <pytest args>`.

kernel-builder's test shell puts the variant folder on PYTHONPATH, and real projects' conftest.py look
for the build there (as an entry of the variable). But the variant folder is the package itself: on
the path, its modules would be top-level ones, and a kernel's typing.py, types.py or `kernels`
subpackage would stand in for the standard library's or the client's. So the variable keeps it while
the interpreter's path never holds it: started without `site` (-S, nothing imported through the path
yet), BOOT takes the folder out of sys.path, then runs site as Python would have (.pth files, the
interpreter's packages), adds publisher's overlay of declared test dependencies behind those, and
runs pytest, which then finds plugins where the interpreter has them and in the overlay."""

from __future__ import annotations

BOOT = ("import os, sys; variant = sys.argv.pop(1); overlay = sys.argv.pop(1); "
        "sys.path[:] = [p for p in sys.path if os.path.realpath(p or '.') != os.path.realpath(variant)]; "
        "import site; site.main(); overlay and site.addsitedir(overlay); "
        "import runpy; runpy.run_module('pytest', run_name='__main__', alter_sys=True)")


def pytest_command(python: str, variant_dir: str, overlay: str | None) -> list[str]:
    """The command that runs pytest (arguments follow) with the variant folder off the path."""
    return [python, "-S", "-c", BOOT, variant_dir, overlay or ""]
