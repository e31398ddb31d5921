"""Network egress for runs whose policy has an allowlist (``network = {allow = [...]}``).

A run with an allowlist keeps a network namespace of its own with only ``lo`` in it. The
helper makes a listening socket on 127.0.0.1:3128 *inside* that namespace (endpoint.py) and
serves it from its own event loop, outside the sandbox: that proxy (proxy.py) speaks HTTP
CONNECT, plain HTTP and SOCKS5, checks each destination against the allowlist
(allowlist.py), resolves names itself (resolver.py), refuses special-purpose addresses the
policy does not name (addresses.py), checks the TLS server name on port 443 (handshakes.py),
copies the bytes (relay.py) and reports what it refused (report.py).

Modules are imported one by one (the policy needs allowlist.py only, not asyncio).
"""
