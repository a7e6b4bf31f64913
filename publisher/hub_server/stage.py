"""`publisher hub-server` as calls: open the server the options describe, then
serve it in the foreground until interrupted."""

from __future__ import annotations

from publisher.hub_server.server import HubServer, ServerConfig
from publisher.options import HubServerOptions


def open_server(options: HubServerOptions) -> HubServer:
    """Bound to 127.0.0.1:port, not serving yet (server.url is known)."""
    roles = {**{t: "read" for t in options.read_tokens}, **{t: "write-no-jobs" for t in options.tokens_without_jobs},
             **{t: "write" for t in options.tokens}}
    config = ServerConfig(tokens=roles,
                          trusted_orgs=frozenset(options.trusted_orgs),
                          jobs_executor=options.jobs_executor, jobs_dir=options.jobs_dir)
    return HubServer(options.data_dir, config, port=options.port)


def serve_until_interrupted(server: HubServer) -> int:
    """Ctrl-C is the way to stop it: a normal end, not an error. Jobs still
    running are stopped (nothing of theirs is left running); how many there were."""
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        stopped = server.stop_jobs()
        server.httpd.server_close()
    return stopped
