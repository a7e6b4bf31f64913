"""`publisher hub-server` as calls: open the server the options describe, then
serve it in the foreground until interrupted."""

from __future__ import annotations

from publisher.hub_server.server import HubServer, ServerConfig
from publisher.options import HubServerOptions


def open_server(options: HubServerOptions) -> HubServer:
    """Bound to 127.0.0.1:port, not serving yet (server.url is known)."""
    config = ServerConfig(tokens={**{t: "read" for t in options.read_tokens}, **{t: "write" for t in options.tokens}},
                          trusted_orgs=frozenset(options.trusted_orgs) if options.trusted_orgs else None)
    return HubServer(options.data_dir, config, port=options.port)


def serve_until_interrupted(server: HubServer) -> None:
    """Ctrl-C is the way to stop it: a normal end, not an error."""
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()
