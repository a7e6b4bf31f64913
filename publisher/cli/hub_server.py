"""`publisher hub-server`: run the Hub-compatible server in the foreground, for
a local dry run of a release (`HF_ENDPOINT=http://127.0.0.1:PORT publisher push ...`).
The server is publisher/hub_server/; this module parses and renders."""

from __future__ import annotations

from pathlib import Path

import click

from publisher.hub_server.server import HubServer
from publisher.hub_server.stage import open_server, serve_until_interrupted
from publisher.options import HubServerOptions


@click.command("hub-server")
@click.option("--port", type=int, default=8080, show_default=True, help="Port on 127.0.0.1 (0 = any free port).")
@click.option("--data-dir", type=click.Path(path_type=Path, file_okay=False), required=True,
              help="Where repositories are stored (kept between runs).")
@click.option("--token", "tokens", multiple=True, metavar="TOKEN",
              help="A token with write access (repeatable). Default: one is generated and printed.")
@click.option("--read-token", "read_tokens", multiple=True, metavar="TOKEN", help="A read-only token (repeatable).")
@click.option("--trusted-org", "trusted", multiple=True, metavar="ORG",
              help="Orgs whose kernels load without trust_remote_code (repeatable; default: every org).")
def command(port: int, data_dir: Path, tokens, read_tokens, trusted) -> None:
    """Serve the Hub API (repos, LFS, commits, resolve) on 127.0.0.1."""
    options = HubServerOptions.from_args(data_dir=data_dir, port=port, tokens=tokens, read_tokens=read_tokens,
                                         trusted_orgs=trusted)
    server = open_server(options)
    render_banner(server, options)
    serve_until_interrupted(server)


def render_banner(server: HubServer, options: HubServerOptions) -> None:
    """How to point huggingface_hub and kernels at this server (stderr: stdout stays free)."""
    click.echo(f"Hub-compatible server on {server.url} (data: {options.data_dir})", err=True)
    click.echo(f"  export HF_ENDPOINT={server.url} HF_HUB_DISABLE_XET=1", err=True)
    if options.generated_token:
        # A throwaway credential for this local server only, printed so the user can use it.
        click.echo(f"  export HF_TOKEN={options.tokens[0]}   # write token of this local server", err=True)
    click.echo("  (do not set HF_HUB_DISABLE_TELEMETRY: kernels 0.17.2 then sends an invalid User-Agent)", err=True)
