"""Resolves every `<name>.localhost` to 127.0.0.1 in this process, as RFC 6761 says and browsers
and systemd-resolved do (this machine's resolver does not): a sandbox's exposed URL is
`http://agent-server-<id>.localhost:<port>` when the service is on loopback. Imported for its
effect (directly, or by sitecustomize.py when this directory is on PYTHONPATH)."""

import socket

_getaddrinfo = socket.getaddrinfo


def _loopback_names(host, *args, **kwargs):
    if isinstance(host, str) and host.lower().rstrip(".").endswith(".localhost"):
        host = "127.0.0.1"
    return _getaddrinfo(host, *args, **kwargs)


socket.getaddrinfo = _loopback_names
