"""`publisher hub-server`: run the Hub-compatible server in the foreground, for
a local dry run of a release (`HF_ENDPOINT=http://127.0.0.1:PORT publisher push ...`)
and of jobs (`hf jobs run ...`, HfApi.run_job). The server is publisher/hub_server/;
this module parses and renders."""

from __future__ import annotations

import signal
from pathlib import Path

import click

from publisher.hub_server.jobs.executor import DEFAULT_EXECUTOR, EXECUTORS, unmet_requirement
from publisher.hub_server.server import HubServer
from publisher.hub_server.stage import open_server, serve_until_interrupted
from publisher.options import HubServerOptions


@click.command("hub-server")
@click.option("--port", type=int, default=8080, show_default=True, help="Port on 127.0.0.1 (0 = any free port).")
@click.option("--data-dir", type=click.Path(path_type=Path, file_okay=False), required=True,
              help="Where repositories and jobs are stored (kept between runs).")
@click.option("--token", "tokens", multiple=True, metavar="TOKEN",
              help="A token with write access (repeatable); it may run jobs. Default: one is generated and printed.")
@click.option("--read-token", "read_tokens", multiple=True, metavar="TOKEN", help="A read-only token (repeatable).")
@click.option("--token-without-jobs", "tokens_without_jobs", multiple=True, metavar="TOKEN",
              help="A token with write access to repositories but without the job.write permission (repeatable): "
                   "the Jobs API refuses it as the Hub does.")
@click.option("--trusted-org", "trusted", multiple=True, metavar="ORG",
              help="An org the server marks a trusted kernel publisher: its kernels load without trust_remote_code "
                   "(repeatable; default: none, as the Hub marks few).")
@click.option("--jobs-executor", type=click.Choice(sorted(EXECUTORS)), default=DEFAULT_EXECUTOR, show_default=True,
              help="Where jobs run: docker (a container of the job's image on the local engine) or process "
                   "(the command as a plain process on this machine, its GPUs visible; for a machine without Docker).")
@click.option("--jobs-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Where job folders live (logs, volume copies, working folders). Default: DATA_DIR/jobs.")
def command(port: int, data_dir: Path, tokens, read_tokens, tokens_without_jobs, trusted, jobs_executor: str,
            jobs_dir: Path | None) -> None:
    """Serve the Hub API (repos, LFS, commits, resolve) and the Jobs API on 127.0.0.1."""
    options = HubServerOptions.from_args(data_dir=data_dir.absolute(), port=port, tokens=tokens, read_tokens=read_tokens,
                                         trusted_orgs=trusted, tokens_without_jobs=tokens_without_jobs,
                                         jobs_executor=jobs_executor, jobs_dir=jobs_dir.absolute() if jobs_dir else None)
    server = open_server(options)
    render_banner(server, options)
    signal.signal(signal.SIGTERM, _interrupt)  # `kill` stops the jobs too, as Ctrl-C does
    stopped = serve_until_interrupted(server)
    if stopped:
        click.echo(f"stopped {stopped} running job(s)", err=True)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def render_banner(server: HubServer, options: HubServerOptions) -> None:
    """How to point huggingface_hub, kernels and `hf jobs` at this server (stderr: stdout stays free)."""
    click.echo(f"Hub-compatible server on {server.url} (data: {options.data_dir})", err=True)
    click.echo(f"  export HF_ENDPOINT={server.url} HF_HUB_DISABLE_XET=1", err=True)
    if options.generated_token:
        # A throwaway credential for this local server only, printed so the user can use it.
        click.echo(f"  export HF_TOKEN={options.tokens[0]}   # write token of this local server", err=True)
    click.echo("  (do not set HF_HUB_DISABLE_TELEMETRY: kernels 0.17.2 then sends an invalid User-Agent)", err=True)
    jobs_dir = options.jobs_dir or options.data_dir / "jobs"
    click.echo(f"  Jobs API: jobs run with the {options.jobs_executor} executor (folders: {jobs_dir});", err=True)
    click.echo(f"  with the exports above, `hf jobs run IMAGE COMMAND...` or HfApi(endpoint='{server.url}').run_job(...)",
               err=True)
    trusted = ", ".join(sorted(server.state.config.trusted_orgs)) or "none (--trusted-org ORG names one)"
    click.echo(f"  Trusted kernel publishers: {trusted}; kernels of any other org, and of the user account "
               f"{server.state.config.user} (no org overview, as on the Hub), load only with trust_remote_code", err=True)
    unmet = unmet_requirement(options.jobs_executor)
    if unmet:
        click.echo(f"warning: {unmet}", err=True)
