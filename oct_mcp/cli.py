"""The command line: serve stdio (the default), `doctor`, `call TOOL --json ARGS`, `checkpoints`, `audit`."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TextIO

import anyio

from oct_mcp import __version__
from oct_mcp.collector import collector_paused
from oct_mcp.interrupts import pass_interrupts_to_children

with collector_paused():  # the tool catalog's models, as the package's own (collector.py)
    from oct_mcp.diagnostics import DEBUG_LEVELS, configure_diagnostics, debug_level_from_env, get_logger
    from oct_mcp.errors import ConfigError
    from oct_mcp.exit_codes import EXIT_BROAD_ROOT, EXIT_FAILED, EXIT_OK, EXIT_USAGE
    from oct_mcp.pins_command import PINS_ACTIONS, pins_parser, run_pins
    from oct_mcp.stopping import until_stopped
    from oct_mcp.workspace import KEY_HOLDERS, broad_root_problem, resolve_root, user_home

if TYPE_CHECKING:
    from oct_mcp.app import App
    from oct_mcp.transports.binding import Endpoint

__all__ = ["main"]

COMMANDS: Final = (
    "serve", "doctor", "call", "tools", "checkpoints", "audit", "token", "install", "uninstall", "policy"
)  # fmt: skip
TAIL_DEFAULT: Final = 20

_log = get_logger(__name__)


def _common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--project-root",
        metavar="PATH",
        help="the project the server works on (default: the current directory, unless it is too broad)",
    )
    parser.add_argument(
        "--allow-broad-root",
        action="store_true",
        help="serve a root that is /, the home folder, a folder above it, or one holding "
        + ", ".join(KEY_HOLDERS)
        + " (refused otherwise: the tools would reach the user's keys and settings)",
    )
    parser.add_argument(
        "--profile",
        metavar="NAME",
        help="security profile: default, read-only, strict, airgapped, or your own",
    )
    parser.add_argument(
        "--config", type=Path, metavar="FILE", help="config file (default: ~/.oct-mcp/config.json)"
    )
    parser.add_argument(
        "--debug",
        type=int,
        choices=list(DEBUG_LEVELS),
        metavar="N",
        help="diagnostics on stderr: 0 off, 1 errors (default), 2 lifecycle, 3 debug, 4 deep trace; "
        "or set OCT_MCP_DEBUG",
    )
    parser.add_argument(
        "--development",
        action="store_true",
        help="development mode: tool output is not redacted, unless the profile or redaction_always_on "
        "says otherwise; or set OCT_MCP_DEVELOPMENT=1",
    )


def _parser(command: str) -> argparse.ArgumentParser:
    descriptions = {
        "serve": (
            "Serve MCP over stdio for one project. "
            "Commands: serve (default), doctor, call, tools, checkpoints, audit, token, install, uninstall, "
            "policy."
        ),
        "doctor": "Print the effective configuration, the chain, the sandbox backends and the tools.",
        "call": "Run one tool call through the same chain as the server and print its outcome.",
        "tools": (
            "List the tools this profile offers, or show one tool's arguments; `tools pending|diff|accept "
            "--pins FILE` review an embedded server's changed tools."
        ),
        "policy": (
            "What the rules decide, running nothing: `policy check TOOL --json ARGS` prints the decision "
            "for a call, the rule and its tier; `policy test` runs every rule's examples."
        ),
        "checkpoints": (
            "The changes oct-mcp made to this project, and their undo, through the same chain as the "
            "server (its audit log, its masks; an undo shows its diff and asks you first)."
        ),
    }
    if command == "audit":
        from oct_mcp.audit_command import audit_parser

        return audit_parser(list(DEBUG_LEVELS))
    if command == "token":
        from oct_mcp.token_command import token_parser

        return token_parser(list(DEBUG_LEVELS))
    if command in ("install", "uninstall"):
        return _install_parser(command)
    prog = "oct-mcp" if command == "serve" else f"oct-mcp {command}"
    parser = argparse.ArgumentParser(prog=prog, description=descriptions[command])
    if command == "serve":
        parser.add_argument("--version", action="version", version=f"oct-mcp {__version__}")
        parser.add_argument(
            "--transport", choices=("stdio", "http"), default="stdio", help="stdio (default) or http"
        )
        parser.add_argument(
            "--host", default="127.0.0.1", help="http: the address to bind (default: 127.0.0.1, loopback)"
        )
        parser.add_argument("--port", type=int, default=8765, help="http: the port (default: 8765; 0: any)")
    if command == "checkpoints":
        _checkpoint_actions(parser)
    else:
        _common_options(parser)
    if command == "policy":
        from oct_mcp.rules import STDIO_CLIENT

        parser.add_argument("action", choices=("check", "test"), help="check one call, or test every example")
        parser.add_argument("tool", nargs="?", help="check: the tool's name")
        parser.add_argument("--json", dest="arguments", default="{}", metavar="ARGS", help="check: arguments")
        parser.add_argument(
            "--client",
            default=STDIO_CLIENT,
            metavar="ID",
            help="check: the calling client's id (http:NAME for a bearer token; default: stdio)",
        )
    if command == "tools":
        parser.add_argument("tool", nargs="?", help="a tool's name: show its description and arguments")
    if command == "call":
        parser.add_argument("tool", help="tool name, as tools/list shows it")
        parser.add_argument(
            "--json", dest="arguments", default="{}", metavar="ARGS", help="arguments as JSON"
        )
        parser.add_argument(
            "--output",
            choices=("text", "json"),
            default="text",
            help="text: what the model reads (default); json: the structured result, for scripts",
        )
    return parser


def _checkpoint_actions(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="{list,show,undo}")
    listing = actions.add_parser("list", help="the newest checkpoints, each with its files")
    listing.add_argument("-n", dest="limit", type=int, default=TAIL_DEFAULT, metavar="N", help="how many")
    show = actions.add_parser(
        "show", help="one checkpoint: every file it changed, and what undoing it would do"
    )
    undo = actions.add_parser("undo", help="put back what a checkpoint changed, after showing the diff")
    for action in (show, undo):
        action.add_argument("id", help="the checkpoint's id, as list shows it")
    undo.add_argument(
        "--yes",
        action="store_true",
        help="undo without asking (where the profile accepts confirm=true); at a terminal you are asked",
    )
    for action in (listing, show, undo):
        _common_options(action)
    undo.add_argument("--and-later", action="store_true", help="also undo every checkpoint after it")
    undo.add_argument(
        "--overwrite", action="store_true", help="put files back even where they changed since (losing that)"
    )


def _checkpoints(app: App, args: argparse.Namespace) -> int:
    """`checkpoints list|show|undo`: oct_checkpoints and oct_undo, called as `call` calls them."""
    if args.action == "list":
        return _call_tool(app, "oct_checkpoints", {"limit": args.limit})
    if args.action == "show":
        shown = _call_tool(app, "oct_checkpoints", {"id": args.id})
        if shown != EXIT_OK:
            return shown
        # A dry run changes nothing, and the person who typed the command asked for it.
        return _call_tool(app, "oct_undo", {"id": args.id, "dry_run": True, "confirm": True})
    undo = {"id": args.id, "and_later": args.and_later, "overwrite": args.overwrite, "dry_run": False}
    if args.yes:
        undo["confirm"] = True
    return _call_tool(app, "oct_undo", undo)


def _install_parser(command: str) -> argparse.ArgumentParser:
    from oct_mcp.install import DEFAULT_NAME, HOSTS

    adds = command == "install"
    parser = argparse.ArgumentParser(
        prog=f"oct-mcp {command}",
        description=(
            "Add this server to a host's MCP config for one project, and turn the host's own shell, "
            "file and edit tools off there where the host has a setting for it; a backup of each file "
            "comes first. `oct-mcp uninstall HOST` removes exactly that."
            if adds
            else "Remove what `oct-mcp install HOST` added: the server's entry and the host tools it "
            "turned off, nothing else; a backup of each file comes first."
        ),
    )
    parser.add_argument("host", choices=HOSTS, help="the MCP host")
    parser.add_argument(
        "--project-root", default=".", metavar="PATH", help="the project (default: the current directory)"
    )
    parser.add_argument(
        "--name",
        default=DEFAULT_NAME,
        help=f"the server's name in the host's config (default: {DEFAULT_NAME})",
    )
    if adds:
        parser.add_argument("--profile", metavar="NAME", help="the security profile the server runs with")
        parser.add_argument(
            "--keep-host-tools",
            action="store_true",
            help="leave the host's own shell, file and edit tools on",
        )
    parser.add_argument("--print", action="store_true", help="show the changes as diffs, write nothing")
    parser.add_argument("--debug", type=int, choices=list(DEBUG_LEVELS), metavar="N", help="0 to 4")
    return parser


def _install(command: str, args: argparse.Namespace) -> int:
    """`install HOST` / `uninstall HOST`: plan the host's config changes, then show or write them."""
    from oct_mcp.errors import OctError
    from oct_mcp.install import DEFAULT_NAME, apply_plan, plan_install, plan_uninstall, render_plan

    home = user_home()
    if home is None:
        print(f"oct-mcp {command}: [project_root] no home folder (HOME is unset); set HOME", file=sys.stderr)
        return EXIT_USAGE
    try:
        if command == "install":
            plan = plan_install(
                args.host,
                args.project_root,
                home=home,
                profile=args.profile,
                name=args.name,
                keep_host_tools=args.keep_host_tools,
            )
        else:
            plan = plan_uninstall(args.host, args.project_root, home=home, name=args.name)
        shown = render_plan(plan)
        if args.print:
            sys.stdout.write(shown or f"oct-mcp {command}: nothing to change for {args.host}\n")
            return EXIT_OK
        backups = apply_plan(plan)
    except OctError as exc:
        print(f"oct-mcp {command}: [{exc.code}] {exc.message}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(
            f"oct-mcp {command}: [host_config] cannot write ({exc}); nothing more was changed",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if not shown:
        print(f"oct-mcp {command}: {args.host} already as asked; nothing changed")
        return EXIT_OK
    sys.stdout.write(shown)
    for backup in backups:
        print(f"backup: {backup}")
    for note in plan.notes:
        print(f"note: {note}")
    if command == "install":
        named = "" if args.name == DEFAULT_NAME else f" --name {args.name}"
        print(
            f"undo: oct-mcp uninstall {args.host} --project-root {Path(args.project_root).resolve()}{named}"
        )
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    pass_interrupts_to_children()
    args_list = list(sys.argv[1:] if argv is None else argv)
    command = args_list.pop(0) if args_list and args_list[0] in COMMANDS else "serve"
    if command == "tools" and args_list and args_list[0] in PINS_ACTIONS:
        # An embedded server's pins, not this server's tools: no project, no chain.
        pins_args = pins_parser(list(DEBUG_LEVELS)).parse_args(args_list)
        configure_diagnostics(pins_args.debug if pins_args.debug is not None else debug_level_from_env())
        return run_pins(pins_args)
    args = _parser(command).parse_args(args_list)
    configure_diagnostics(args.debug if args.debug is not None else debug_level_from_env())
    if command == "audit":
        from oct_mcp.audit_command import run_audit

        return run_audit(args)
    if command == "token":
        from oct_mcp.token_command import run_token

        return run_token(args)
    if command in ("install", "uninstall"):
        return _install(command, args)

    project_root = "." if args.project_root is None else args.project_root
    if command in ("serve", "call", "checkpoints") and not args.allow_broad_root:
        refusal = _broad_root_refusal(project_root, given=args.project_root is not None)
        if refusal is not None:
            print(refusal, file=sys.stderr)
            return EXIT_BROAD_ROOT

    if command == "serve" and args.transport != "http":
        return _serve_stdio(project_root, args)
    app = _build_app(command, project_root, args)
    if isinstance(app, int):
        return app
    try:
        return _run_command(app, command, args)
    finally:
        # Signs the audit chain's head, when a signing key is set, before the files close.
        app.close()


def _build_app(command: str, project_root: str, args: argparse.Namespace) -> App | int:
    """The app for `command`, or the exit code once the reason it cannot be built is printed."""
    try:
        with collector_paused(freeze=command == "serve"):
            # Imported after diagnostics are set up: loading the config logs through them.
            from oct_mcp.app import build_app

            return build_app(
                project_root,
                profile=args.profile,
                config_path=args.config,
                serve_metrics_endpoint=command == "serve",
                development=args.development,
                telemetry=command == "serve",
            )
    except NotADirectoryError as exc:
        return _no_project(exc)
    except ConfigError as exc:
        print(f"oct-mcp: configuration error: {exc.message}", file=sys.stderr)
        return EXIT_FAILED if command == "policy" and exc.rule == "rule_examples" else EXIT_USAGE


def _no_project(problem: NotADirectoryError) -> int:
    print(f"oct-mcp: {problem}; pass --project-root with the path of your project", file=sys.stderr)
    return EXIT_USAGE


def _serve_stdio(project_root: str, args: argparse.Namespace) -> int:
    """Serve over stdio, building the app on a worker thread while the SDK answers `initialize`.

    A configuration error is said on stderr once the build meets it, and the server ends with
    code 2 (a host shows its stderr); a project root that is not there is said before serving.
    """
    from oct_mcp.transports.stdio import serve_stdio

    try:
        resolve_root(project_root)
    except NotADirectoryError as exc:
        return _no_project(exc)

    built: list[App] = []
    failed: list[int] = []

    def build() -> Endpoint | None:
        app = _build_app("serve", project_root, args)
        if isinstance(app, int):
            failed.append(app)
            return None
        built.append(app)
        _warm_up_beside(app)
        _log.info("serving", transport="stdio", root=str(app.workspace.root), profile=app.profile.name)
        if sys.stderr.isatty():
            # A person who started it by hand sees it waiting, not hanging; a host's stderr is no terminal.
            print(
                f"oct-mcp {__version__}: serving {app.workspace.root} (profile {app.profile.name}) over "
                "stdio, for an MCP client on stdin and stdout; Ctrl-C stops it",
                file=sys.stderr,
            )
        from oct_mcp.transports.endpoint import AppEndpoint

        return AppEndpoint(app, transport="stdio")

    try:
        anyio.run(serve_stdio, build)
    finally:
        for app in built:
            # Signs the audit chain's head, when a signing key is set, before the files close.
            app.close()
    return failed[0] if failed else EXIT_OK


def _run_command(app: App, command: str, args: argparse.Namespace) -> int:
    if command == "policy":
        return _policy(app, args)
    if command == "doctor":
        from oct_mcp.doctor import print_doctor

        print_doctor(app, sys.stdout)
        return EXIT_OK
    if command == "call":
        return _call(app, args.tool, args.arguments, args.output)
    if command == "checkpoints":
        return _checkpoints(app, args)
    if command == "tools":
        return _tools(app, args.tool, sys.stdout)
    _warm_up_beside(app)
    return _serve_http(app, args.host, args.port)


def _warm_up_beside(app: App) -> None:
    """The layers build what their first call would (the redactor's detectors) on a thread of their
    own, off the event loop, while the first clients say hello and list the tools."""
    threading.Thread(target=app.chain.warm_up, name="oct-warm-up", daemon=True).start()


def _policy(app: App, args: argparse.Namespace) -> int:
    from oct_mcp.policy_command import policy_check, policy_test

    if args.action == "test":
        return policy_test(app, sys.stdout)
    if args.tool is None:
        print("oct-mcp policy check: name the tool: oct-mcp policy check TOOL --json ARGS", file=sys.stderr)
        return EXIT_USAGE
    return policy_check(app, args.tool, args.arguments, sys.stdout, client=args.client)


def _broad_root_refusal(project_root: str, *, given: bool) -> str | None:
    """The message that refuses a root too broad to serve, or None when the root may be served."""
    try:
        root = resolve_root(project_root)
    except NotADirectoryError:
        return None  # build_app says so, with its own message
    problem = broad_root_problem(root, user_home())
    if problem is None:
        return None
    where = "" if given else " (no --project-root was given, so it is the current directory)"
    return (
        f"oct-mcp: refusing to serve: {problem}{where}; its tools would reach the user's keys and "
        "settings. Pass --project-root with the path of your project, or --allow-broad-root to "
        "serve it anyway."
    )


def _serve_http(app: App, host: str, port: int) -> int:
    from oct_mcp.transports.http import serve_http

    try:
        anyio.run(serve_http, app, host, port)
    except ConfigError as exc:
        print(f"oct-mcp: configuration error: {exc.message}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"oct-mcp: cannot serve on {host}:{port}: {exc.strerror}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        app.close()
    return EXIT_OK


def _call(app: App, tool: str, raw_arguments: str, output: str) -> int:
    try:
        arguments = json.loads(raw_arguments)
    except ValueError as exc:
        print(f"oct-mcp call: --json is not valid JSON: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not isinstance(arguments, dict):
        print("oct-mcp call: --json must be a JSON object of arguments", file=sys.stderr)
        return EXIT_USAGE
    return _call_tool(app, tool, arguments, output)


def _call_tool(app: App, tool: str, arguments: dict[str, object], output: str = "text") -> int:
    """One call through the chain: its text (or with `output="json"` its structured content) on
    stdout, failures on stderr."""
    from oct_mcp.app import CallFailure, run_call
    from oct_mcp.consent import Consent
    from oct_mcp.types import ClientInfo, ConsentRequest

    # At a terminal, the person running the command is the human who can consent.
    interactive = sys.stdin.isatty()
    client = ClientInfo(client_id="cli", transport="cli", can_elicit=interactive)
    outcome = anyio.run(until_stopped, partial(run_call, app, tool, arguments, client))
    if isinstance(outcome, ConsentRequest) and interactive:
        print(outcome.message, file=sys.stderr)
        approved = input("Allow this call? [y/N] ").strip().lower() in ("y", "yes")
        consent = Consent(tool=outcome.tool, digest=outcome.digest, approved=approved)
        outcome = anyio.run(until_stopped, partial(run_call, app, tool, arguments, client, consent=consent))
    if isinstance(outcome, signal.Signals):
        # The call was cancelled: the command it ran, and everything that command started, are gone.
        print(
            f"[interrupted] oct-mcp call stopped on {outcome.name}; the tool's run was ended",
            file=sys.stderr,
        )
        return 128 + outcome.value
    if isinstance(outcome, CallFailure):
        print(f"[{outcome.code}] {outcome.message}", file=sys.stderr)
        return EXIT_FAILED
    if isinstance(outcome, ConsentRequest):
        print(outcome.message, file=sys.stderr)
        return EXIT_FAILED
    if output == "json" and outcome.structured is not None:
        print(json.dumps(dict(outcome.structured), indent=2))
    else:
        # A tool without structured content (or a tool error) has only its text, whichever is asked.
        sys.stdout.write(
            outcome.text if outcome.text.endswith("\n") or not outcome.text else outcome.text + "\n"
        )
    return EXIT_FAILED if outcome.is_error else EXIT_OK


def _tools(app: App, name: str | None, out: TextIO) -> int:
    """`tools`: every tool the profile offers, a line each; `tools NAME`: its description and arguments."""
    visible = {spec.name: spec for spec in app.visible_tools()}
    if name is None:
        width = max(map(len, visible), default=0)
        for listed in visible.values():
            out.write(f"{listed.name:<{width}}  {listed.risk.value:<7}  {listed.title}\n")
        out.write(f"\n{len(visible)} tools in profile {app.profile.name}; oct-mcp tools NAME shows one\n")
        return EXIT_OK
    spec = visible.get(name)
    if spec is None:
        print(
            f"oct-mcp tools: no tool {name!r} in profile {app.profile.name}; oct-mcp tools lists them",
            file=sys.stderr,
        )
        return EXIT_USAGE
    out.write(f"{spec.name} ({spec.risk.value}): {spec.title}\n\n{spec.description}\n\narguments:\n")
    schema = spec.params.model_json_schema()
    required = set(schema.get("required", ()))
    for argument, field in schema.get("properties", {}).items():
        kind = _schema_type(field)
        default = "required" if argument in required else f"default {json.dumps(field.get('default'))}"
        described = f": {field['description']}" if field.get("description") else ""
        out.write(f"  {argument} ({kind}, {default}){described}\n")
    example = dict.fromkeys(sorted(required), "...")
    out.write(f"\ntry: oct-mcp call {spec.name} --json '{json.dumps(example)}'\n")
    return EXIT_OK


def _schema_type(field: dict[str, Any]) -> str:
    """A JSON schema's type in a word or two: `string`, `integer`, `array of string`, `string or null`."""
    if "anyOf" in field:
        return " or ".join(_schema_type(option) for option in field["anyOf"])
    if "enum" in field:
        return "one of " + ", ".join(json.dumps(value) for value in field["enum"])
    if "const" in field:
        return json.dumps(field["const"])
    if "$ref" in field:
        return f"object ({str(field['$ref']).rsplit('/', 1)[-1]})"
    kind = str(field.get("type", "value"))
    if kind == "array" and isinstance(field.get("items"), dict):
        return f"array of {_schema_type(field['items'])}"
    return kind
