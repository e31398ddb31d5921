"""The `roboz-helper` command: serve, check-policy, install-units.

Every error line on stderr starts `roboz-helper: error:` (one line per error: a policy with
three wrong paths gets three); `--debug` adds the traceback of the real cause.
Exit codes, the same for every command (see _EXIT_CODES_HELP):
0 success, 1 the command could not do its job (socket in use, sandbox unavailable, a file that
would be overwritten, a write that failed), 2 bad arguments or an invalid policy (its syntax,
its values, or paths this host does not provide), 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from roboz_helper import install_units
from roboz_helper.egress.config import allowlist_of
from roboz_helper.file_policy import rules_text
from roboz_helper.host_paths import PolicyPathsError, load_usable_policy
from roboz_helper.log_format import configure_logging
from roboz_helper.policy import Policy, PolicyError, load_policy

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
# `roboz scripts serve` runs this command as its child and names itself here, so that one
# command's errors carry one program name.
_PROG = os.environ.get("ROBOZ_HELPER_PROG") or "roboz-helper"
_PREFIX = f"{_PROG}: error:"
_EXIT_CODES_HELP = (
    "exit codes: 0 success; 1 the command could not do its job; 2 bad arguments or an invalid "
    "policy; 130 interrupted. Errors start with 'roboz-helper: error:'; --debug shows their cause."
)


class CliError(Exception):
    """A failure to report in one line; its __cause__ is what --debug shows."""

    def __init__(self, message: str, code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.code = code


class _Parser(argparse.ArgumentParser):
    """argparse with the one error prefix (its own would be `roboz-helper serve: error:`)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        print(f"{_PREFIX} {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def _add_debug(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument(
        "--debug",
        action="store_true",
        default=default,
        help="on an error, also print the traceback of its real cause",
    )


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("roboz-helper")
    except metadata.PackageNotFoundError:
        return "unknown"


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="roboz-helper",
        description="SafeScripts helper: runs authorized clients' scripts and commands "
        "in a fresh sandbox per run.",
        epilog=_EXIT_CODES_HELP,
    )
    _add_debug(parser, False)
    parser.add_argument(
        "--version",
        action="version",
        version=f"roboz-helper {_version()}",
        help="print the version and exit",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, summary: str, description: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(
            name, help=summary, description=description, epilog=_EXIT_CODES_HELP
        )
        # SUPPRESS: `roboz-helper --debug serve` and `roboz-helper serve --debug` both work.
        _add_debug(sub, argparse.SUPPRESS)
        return sub

    serve = command(
        "serve",
        "serve clients on a Unix socket",
        "Serve clients on a Unix socket (or the socket systemd passes on fd 3) until SIGTERM "
        "or SIGINT. SIGHUP re-reads the policy: new connections use it, runs in flight keep "
        "theirs, and a policy that fails its checks leaves the old one in force.",
    )
    serve.add_argument("--policy", required=True, metavar="FILE", help="policy TOML file")
    serve.add_argument(
        "--socket", metavar="PATH", help="socket path (overrides the policy's server.socket)"
    )
    serve.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log verbosity (default INFO: one line per run)",
    )
    serve.set_defaults(handler=_serve)

    check = command(
        "check-policy",
        "validate a policy file and the paths it names",
        "Decode and validate a policy file, then check its paths on this host as the helper "
        "does at start-up and before every run: scripts_dir an existing directory that only "
        "root (or the helper's own user) can change, workdir an existing directory, workdir "
        "and bind paths free of symlinks, commands existing executable files. Prints 'ok' or "
        "every problem, one per line, each naming its field.",
    )
    check.add_argument("file", metavar="FILE", help="policy TOML file")
    check.add_argument(
        "--skip-paths",
        action="store_true",
        help="check the file only, not this host's paths, users and groups (for a policy meant "
        "for another host)",
    )
    check.set_defaults(handler=_check_policy)

    install = command(
        "install-units",
        "install the systemd units for this installation",
        "Write roboz-helper.service (its ExecStart names the roboz-helper of the running "
        "environment) and roboz-helper.socket to /etc/systemd/system, the sysusers and "
        "tmpfiles snippets to /etc/sysusers.d and /etc/tmpfiles.d, and the strict example "
        "policy to --policy unless a policy is there already, printing every file. Files that "
        "differ are replaced only with --force; an existing policy never is. Without --prefix "
        "it then creates the users and directories (systemd-sysusers, systemd-tmpfiles) and "
        "reloads systemd: `systemctl enable --now roboz-helper.socket` is all that is left.",
    )
    install.add_argument(
        "--prefix",
        metavar="DIR",
        help="write below DIR instead of / (to stage files for a package or an image; "
        "nothing is applied to this host)",
    )
    install.add_argument(
        "--policy",
        metavar="FILE",
        default=install_units.DEFAULT_POLICY,
        help="the policy file the service serves (default %(default)s); the example policy "
        "is written there only if no file exists",
    )
    install.add_argument(
        "--force", action="store_true", help="replace units and snippets that differ"
    )
    install.set_defaults(handler=_install_units)
    return parser


def _load(path: str, check_paths: bool = True) -> Policy:
    """The policy, or a CliError with one line per problem, each naming its field."""
    try:
        if check_paths:
            return load_usable_policy(path)
        return load_policy(path, look_up_names=False)
    except PolicyPathsError as exc:
        raise CliError("\n".join(f"{path}: {p}" for p in exc.problems), EXIT_USAGE) from exc
    except PolicyError as exc:
        raise CliError(f"{path}: {exc}{_other_kind_hint(path)}", EXIT_USAGE) from exc


# Top-level keys of the guarded tools' permission policy (`roboz mcp check-policy`), which no
# helper policy has: a file with them was given to the wrong checker.
_PERMISSION_POLICY_KEYS = {"base", "default", "precedence", "allow", "deny", "ask"}


def _other_kind_hint(path: str) -> str:
    import tomllib

    try:
        with open(path, "rb") as fh:
            keys = set(tomllib.load(fh))
    except (OSError, ValueError, RecursionError):  # the hint must never mask the error
        return ""
    if keys & _PERMISSION_POLICY_KEYS and not keys & {"server", "profiles", "clients"}:
        return (
            " (this is a permission policy for the guarded file tools, not a helper policy: "
            "check it with roboz mcp check-policy)"
        )
    return ""


def _check_policy(args: argparse.Namespace) -> int:
    policy = _load(args.file, check_paths=not args.skip_paths)
    checked = (
        "file only checked; this host's paths, users and groups not looked up"
        if args.skip_paths
        else "file and paths checked"
    )
    print(
        f"{args.file}: ok ({len(policy.profiles)} profiles, "
        f"{len(policy.clients)} client rules; {checked})"
    )
    for line in _network_lines(policy):
        print(line)
    # The operator's half of the composed file view; each run is narrowed further by the
    # file policy its client sends (a path is reachable only where both allow it).
    for name, profile in policy.profiles.items():
        if profile.file_policy is None:
            continue
        print(f"profiles.{name}.file_policy: {profile.file_policy} (every run; the client's "
              "policy narrows it further, never widens it)")  # fmt: skip
        if profile.file_rules is not None:
            print("  " + rules_text(profile.file_rules).replace("\n", "\n  "))
    return EXIT_OK


def _network_lines(policy: Policy) -> list[str]:
    """Each client rule's network, when some profile has an allowlist: the hosts its runs
    may reach (a run may ask for fewer)."""
    lines: list[str] = []
    if all(isinstance(p.network, str) for p in policy.profiles.values()):
        return lines
    for i, rule in enumerate(policy.clients):
        who = next(f"{s} {getattr(rule, s)}" for s in ("uid", "gid", "user", "group")
                   if getattr(rule, s) is not None)  # fmt: skip
        network = policy.profiles[rule.profile].network
        head = f"clients[{i}] ({who}) -> profiles.{rule.profile}: network"
        if isinstance(network, str):
            lines.append(f"{head} {network}")
            continue
        limits = f"at most {network.max_connections} connections at once"
        if network.max_bytes is not None:
            limits += f", {network.max_bytes} bytes per run"
        lines.append(f"{head} through the helper's proxy, to these only ({limits}; a run "
                     "may ask for a subset):")  # fmt: skip
        lines += [f"  {entry.explain()}" for entry in allowlist_of(network).entries]
    servers = ", ".join(policy.egress.nameservers) or "the host's resolver (getaddrinfo)"
    lines.append(f"egress: the proxy resolves names with {servers}")
    return lines


def _install_units(args: argparse.Namespace) -> int:
    try:
        command = install_units.helper_command()
        files = install_units.plan(Path(args.prefix or "/"), args.policy, command)
        warning = install_units.untrusted_environment(command)
        if warning is not None:
            print(f"roboz-helper: warning: {warning}", file=sys.stderr)
        install_units.install(files, args.force, print)
        if args.prefix is None:
            install_units.apply(files, print)
    except install_units.InstallError as exc:
        raise CliError(str(exc)) from exc
    except OSError as exc:
        raise CliError(f"cannot install the units: {exc}") from exc
    if args.prefix is None:
        print("next:     systemctl enable --now roboz-helper.socket")
    else:
        print(
            f"staged below {args.prefix}; on the target host: systemd-sysusers, "
            "systemd-tmpfiles --create, systemctl enable --now roboz-helper.socket"
        )
    return EXIT_OK


def _serve(args: argparse.Namespace) -> int:
    # Until the server installs its own handler, a SIGHUP (systemctl reload, a closed
    # terminal) must not kill a starting daemon. SIGPIPE: a peer or a log reader that went
    # away is an EPIPE to handle, never a reason to die (Python ignores it too; say so here).
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    if args.socket is not None and not args.socket.startswith("/"):
        raise CliError(f"--socket must be an absolute path: {args.socket}", EXIT_USAGE)
    policy = _load(args.policy)
    configure_logging("DEBUG" if args.debug else args.log_level)
    _raise_open_files_limit()
    # Imported here: check-policy and install-units work without the daemon's dependencies.
    try:
        from roboz_helper.listening import StartupError
        from roboz_helper.server import HelperServer
    except ImportError as exc:
        raise CliError(
            f"serve needs the daemon's dependencies ({exc}); install 'roboz-helper[daemon]'"
        ) from exc

    server = HelperServer(policy, args.socket, args.policy)
    try:
        asyncio.run(server.serve())
    except StartupError as exc:
        raise CliError(str(exc)) from exc
    except Exception as exc:
        # Anything else that stops start-up (the sandbox cannot set up its cgroup root, ...).
        raise CliError(f"cannot serve: {exc}") from exc
    # SIGTERM is how a service manager stops a daemon: success. SIGINT is an interruption.
    return EXIT_INTERRUPTED if server.stopped_by == signal.SIGINT else EXIT_OK


# Descriptors the daemon may hold: each connection of a run through the egress proxy takes two
# (the run's side, the remote side), up to a profile's max_connections per run, besides the
# clients' connections and every run's pipes. 1024, the usual soft limit, is soon reached.
_OPEN_FILES = 1 << 16


def _raise_open_files_limit() -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = _OPEN_FILES if hard == resource.RLIM_INFINITY else min(hard, _OPEN_FILES)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def _report(error: BaseException, message: str, debug: bool) -> None:
    for line in message.splitlines() or [""]:
        print(f"{_PREFIX} {line}", file=sys.stderr)
    cause = error.__cause__ if isinstance(error, CliError) else error
    if debug and cause is not None:
        traceback.print_exception(cause, file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except CliError as exc:
        _report(exc, str(exc), args.debug)
        return exc.code
    except KeyboardInterrupt:
        print(f"{_PREFIX} interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        _report(exc, f"unexpected {type(exc).__name__}: {exc}", args.debug)
        return EXIT_FAILURE
