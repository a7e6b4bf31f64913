"""`publisher adopt PATH`: turn a torch.utils.cpp_extension project (setup.py,
load()/load_inline(), or a kernel-builder-ish layout with a pybind11 binding)
into a kernel-builder project. The stage is publisher/adopt/stage.py; this
module parses and renders."""

from __future__ import annotations

from pathlib import Path

import click

from publisher.adopt.discover import SetupNotRun
from publisher.adopt.record import Recording
from publisher.adopt.stage import BACKUP_DIR, AdoptResult, run_adopt
from publisher.cli.common import echo_json, json_flag
from publisher.errors import EXIT_FAILED, EXIT_OK, UsageError
from publisher.findings import has_errors, render_human
from publisher.hub_names import repo_id_problem
from publisher.options import AdoptOptions


@click.command("adopt")
@click.argument("path", type=click.Path(path_type=Path), default=".")
@click.option("--dry-run", is_flag=True, help="Print the plan and the diffs; write nothing.")
@click.option("--force", is_flag=True, help="Change existing files too (their originals are copied to "
              f"{BACKUP_DIR}/<time>/ first).")
@click.option("--name", metavar="NAME", help="The kernel's name (default: from the package, e.g. qwen3_kernels -> "
              "qwen3-kernels).")
@click.option("--license", "license_", metavar="ID", help="License (default: build.toml, the LICENSE file, pyproject).")
@click.option("--version", "version", type=click.IntRange(min=0), metavar="N",
              help="Kernel version, the Hub branch v<N> (default: build.toml's, else 1).")
@click.option("--repo", "repo_id", metavar="ORG/NAME", help="Hub repository: [general.hub] repo-id, and the repo the "
              "written tests load.")
@click.option("--record", is_flag=True, help="Build the original extension its own way here and run the project's "
              "tests, scripts and README code with every call into it recorded; the tests adopt writes replay those "
              "calls on the kernel and compare (run it where the original runs: a CUDA extension needs a GPU).")
@click.option("--record-timeout", type=click.FloatRange(min=1), default=600.0, show_default=True, metavar="SECONDS",
              help="How long one program of the project may run while recorded.")
@json_flag
def command(path: Path, dry_run: bool, force: bool, name: str | None, license_: str | None, version: int | None,
            repo_id: str | None, record: bool, record_timeout: float, as_json: bool) -> int:
    """Port the torch extension in PATH to a kernel-builder project, keeping its sources and Python API."""
    if repo_id is not None and repo_id_problem(repo_id):
        raise UsageError(f"--repo {repo_id!r}: {repo_id_problem(repo_id)}", "give it as ORG/NAME, e.g. your-org/my-kernel")
    options = AdoptOptions(path=path, dry_run=dry_run, force=force, name=name, license=license_, version=version,
                           repo_id=repo_id, record=record, record_timeout=record_timeout)
    try:
        result = run_adopt(options)
    except SetupNotRun as err:
        if as_json:
            echo_json({"error": err.message, "findings": [f.to_json() for f in err.findings], "complete": False,
                       "written": []})
        else:
            click.echo(f"{err.message}: nothing written\n")
            click.echo(render_human(list(err.findings)))
        return EXIT_FAILED
    if as_json:
        echo_json(to_json(result))
    else:
        render(result)
    return exit_code(result)


def exit_code(result: AdoptResult) -> int:
    """0: the port is complete and written (or would be, for a dry run); 1: something needs hands, or was refused."""
    return EXIT_FAILED if has_errors(result.findings) else EXIT_OK


def to_json(result: AdoptResult) -> dict:
    plan = result.plan
    d = plan.discovery
    return {
        "ok": not has_errors(result.findings),
        "path": str(result.options.path),
        "route": d.route,
        "read": d.how,
        "extensions": [{"module": e.module, "backend": e.backend, "sources": list(e.sources), "origin": e.origin,
                        "line": e.line} for e in d.extensions],
        "name": plan.name,
        "python_name": plan.python_name,
        "backends": list(plan.backends),
        "ops": [{"name": op.name, "schema": op.schema() if op.known or op.written else None, "function": op.function,
                 "file": op.file, "line": op.line, "shim": op.needs_shim, "registered_by": op.registered_by}
                for op in plan.ops],
        "files": [{"path": c.path, "action": c.action, "yours": c.author, "needs_force": c.needs_force,
                   "what": c.what, **({"diff": c.diff()} if result.options.dry_run and c.action != "unchanged" else {})}
                  for c in plan.changes],
        "notes": list(plan.notes),
        "findings": [f.to_json() for f in result.findings],
        "written": list(result.written),
        "backup": result.backup,
        "dry_run": result.options.dry_run,
        "complete": result.complete,
        **({"recording": result.recording.to_json()} if result.recording is not None else {}),
    }


def render(result: AdoptResult) -> None:
    plan, options = result.plan, result.options
    d = plan.discovery
    read = {"static": "read statically", "executed": "run with recorders", "read": "read"}[d.how]
    exts = ", ".join(f"{e.module} ({e.backend})" for e in d.extensions)
    click.echo(f"{options.path}: {d.route} ({read}): {exts} -> kernel {plan.name} ({', '.join(plan.backends)})")
    for note in plan.notes:
        click.echo(f"  {note}")
    if plan.ops:
        click.echo(f"\nops ({len(plan.ops)}):")
        for op in plan.ops:
            shown = op.schema() if op.known or op.written else f"{op.name}: schema inferred by torch from {op.function}"
            click.echo(f"  {shown}" + ("   [shim]" if op.needs_shim else "") + f"   {op.file}:{op.line}")
    if result.recording is not None:
        render_recording(result.recording)
    click.echo("\nfiles:")
    width = max((len(c.path) for c in plan.changes), default=0)
    for change in plan.changes:
        mark = (" (your file: --force)" if change.author else " (changed since adopt wrote it? --force)") \
            if change.needs_force and not options.force else ""
        click.echo(f"  {change.action:<9} {change.path:<{width}}  {change.what}{mark}")
    if options.dry_run:
        for change in plan.pending:
            click.echo("")
            click.echo(change.diff(), nl=False)
    if result.findings:
        click.echo("")
        click.echo(render_human(list(result.findings)))
    click.echo("")
    if result.written:
        click.echo(f"wrote {len(result.written)} file(s)" + (f"; the originals of the changed ones are in {result.backup}"
                                                              if result.backup else ""))
    elif options.dry_run:
        click.echo("dry run: nothing written")
    elif not plan.pending:
        click.echo("nothing to do: every file is as adopt would write it")
    else:
        click.echo("nothing written")
    if not has_errors(result.findings) and not options.dry_run:
        click.echo(f"next: publisher check {options.path} && publisher build {options.path} --local && "
                   f"publisher test {options.path}")
    elif has_errors(plan.findings):
        click.echo("the errors above need hands: the port leaves each such part out whole (see the fix of each)")


def render_recording(recording: Recording) -> None:
    click.echo(f"\nrecorded (--record): the original built by {recording.built or '-'}")
    for program, outcome in recording.ran:
        click.echo(f"  {program}: {outcome}")
    if recording.calls:
        shaky = f"; nondeterministic: {', '.join(recording.nondeterministic)}" if recording.nondeterministic else ""
        click.echo(f"  kept {len(recording.calls)} of {recording.seen} call(s), of {len(recording.ops)} op(s), on "
                   f"{recording.device}{shaky}")
    else:
        click.echo(f"  nothing recorded: {recording.why_not}")
    for why, count in recording.left_out:
        click.echo(f"  left out: {count} call(s), {why}")
