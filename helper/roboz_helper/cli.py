"""`roboz-helper serve | check-policy`: exit 0 on success, 1 on operational failure,
2 on bad arguments or an invalid policy (the seed's convention for every RoboZ command)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from roboz_helper.log_format import configure_logging
from roboz_helper.policy import PolicyError, load_policy

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="roboz-helper",
        description="SafeScripts helper: runs authorized clients' scripts and commands "
        "in a fresh sandbox per run.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser(
        "serve",
        help="serve clients on a Unix socket",
        description="Serve clients on a Unix "
        "socket (or the socket systemd passes on fd 3) until SIGTERM or SIGINT.",
    )
    serve.add_argument("--policy", required=True, metavar="FILE", help="policy TOML file")
    serve.add_argument("--socket", metavar="PATH", help="socket path (overrides [server] socket)")
    serve.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log verbosity (default INFO: one line per run)",
    )
    check = commands.add_parser(
        "check-policy",
        help="validate a policy file",
        description="Decode and validate a policy file; print 'ok' or the first error.",
    )
    check.add_argument("file", metavar="FILE", help="policy TOML file")
    return parser


def _check_policy(path: str) -> int:
    try:
        policy = load_policy(path)
    except PolicyError as exc:
        print(f"roboz-helper: {path}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"{path}: ok ({len(policy.profiles)} profiles, {len(policy.clients)} client rules)")
    return EXIT_OK


def _serve(args: argparse.Namespace) -> int:
    # Until the server installs its own handler, a SIGHUP (systemctl reload, a closed
    # terminal) must not kill a starting daemon. SIGPIPE: a peer or a log reader that went
    # away is an EPIPE to handle, never a reason to die (Python ignores it too; say so here).
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    try:
        policy = load_policy(args.policy)
    except PolicyError as exc:
        print(f"roboz-helper: {args.policy}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.socket is not None and not args.socket.startswith("/"):
        print(f"roboz-helper: --socket must be an absolute path: {args.socket}", file=sys.stderr)
        return EXIT_USAGE
    configure_logging(args.log_level)
    # Imported here so that check-policy works on a host without the sandbox's dependencies.
    from roboz_helper.listening import StartupError
    from roboz_helper.server import HelperServer

    try:
        asyncio.run(HelperServer(policy, args.socket, args.policy).serve())
    except StartupError as exc:
        print(f"roboz-helper: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except Exception as exc:
        # Anything else that stops start-up (the sandbox cannot set up its cgroup root, ...):
        # one line for the operator, the traceback only with --log-level DEBUG.
        logging.getLogger("roboz_helper").debug("start-up failed", exc_info=True)
        print(f"roboz-helper: cannot serve: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "check-policy":
        return _check_policy(args.file)
    return _serve(args)
