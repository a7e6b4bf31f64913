"""`publisher hub-server`: run the Hub-compatible server in the foreground, for
a local dry run of a release (`HF_ENDPOINT=http://127.0.0.1:PORT publisher push ...`)."""

from __future__ import annotations

import secrets
import string
from pathlib import Path

import click

from publisher.hub_server.server import HubServer, ServerConfig


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
    generated = not tokens
    if generated:
        tokens = ("hf_" + "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(34)),)
    config = ServerConfig(tokens={**{t: "read" for t in read_tokens}, **{t: "write" for t in tokens}},
                          trusted_orgs=frozenset(trusted) if trusted else None)
    server = HubServer(data_dir, config, port=port)
    click.echo(f"Hub-compatible server on {server.url} (data: {data_dir})", err=True)
    click.echo(f"  export HF_ENDPOINT={server.url} HF_HUB_DISABLE_XET=1", err=True)
    if generated:
        # A throwaway credential for this local server only, printed so the user can use it.
        click.echo(f"  export HF_TOKEN={tokens[0]}   # write token of this local server", err=True)
    click.echo("  (do not set HF_HUB_DISABLE_TELEMETRY: kernels 0.17.2 then sends an invalid User-Agent)", err=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()
