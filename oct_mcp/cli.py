"""The command line: serve stdio (the default), `doctor`, `call TOOL --json ARGS`, `checkpoints`, `audit`."""

from __future__ import annotations

import argparse
import json
import os
import shutil
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

with collector_paused():  # the tool catalog's models, as the package's own (collector.py)
    from oct_mcp.backends.apparmor import RESTRICT_SYSCTL, apparmor_profile_command, blocked_by_apparmor
    from oct_mcp.diagnostics import DEBUG_LEVELS, configure_diagnostics, debug_level_from_env, get_logger
    from oct_mcp.errors import ConfigError, ToolUnavailableError
    from oct_mcp.execution.checkpoints import CheckpointStore
    from oct_mcp.exit_codes import EXIT_BROAD_ROOT, EXIT_FAILED, EXIT_OK, EXIT_USAGE
    from oct_mcp.pins_command import PINS_ACTIONS, pins_parser, run_pins
    from oct_mcp.rules import STDIO_CLIENT
    from oct_mcp.stopping import until_stopped
    from oct_mcp.telemetry import telemetry_status
    from oct_mcp.tools._project.programs import find_program
    from oct_mcp.tools.python import how_it_runs
    from oct_mcp.tools.screen_helper import helper_status
    from oct_mcp.workspace import KEY_HOLDERS, broad_root_problem, resolve_root

if TYPE_CHECKING:
    from oct_mcp.app import App
    from oct_mcp.spec import ToolSpec

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

    home = _home()
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

    try:
        with collector_paused(freeze=command == "serve"):
            # Imported after diagnostics are set up: loading the config logs through them.
            from oct_mcp.app import build_app

            app = build_app(
                project_root,
                profile=args.profile,
                config_path=args.config,
                serve_metrics_endpoint=command == "serve",
                development=args.development,
                telemetry=command == "serve",
            )
    except NotADirectoryError as exc:
        print(f"oct-mcp: {exc}; pass --project-root with the path of your project", file=sys.stderr)
        return EXIT_USAGE
    except ConfigError as exc:
        print(f"oct-mcp: configuration error: {exc.message}", file=sys.stderr)
        return EXIT_FAILED if command == "policy" and exc.rule == "rule_examples" else EXIT_USAGE
    try:
        return _run_command(app, command, args)
    finally:
        # Signs the audit chain's head, when a signing key is set, before the files close.
        app.close()


def _run_command(app: App, command: str, args: argparse.Namespace) -> int:
    if command == "policy":
        return _policy(app, args)
    if command == "doctor":
        print_doctor(app, sys.stdout)
        return EXIT_OK
    if command == "call":
        return _call(app, args.tool, args.arguments, args.output)
    if command == "checkpoints":
        return _checkpoints(app, args)
    if command == "tools":
        return _tools(app, args.tool, sys.stdout)
    # The layers build what their first call would (the redactor's detectors) off the event loop,
    # while the host says hello and lists the tools.
    threading.Thread(target=app.chain.warm_up, name="oct-warm-up", daemon=True).start()
    if args.transport == "http":
        return _serve_http(app, args.host, args.port)
    from oct_mcp.server import serve_stdio

    _log.info("serving", transport="stdio", root=str(app.workspace.root), profile=app.profile.name)
    if sys.stderr.isatty():
        # A person who started it by hand sees it waiting, not hanging; a host's stderr is no terminal.
        print(
            f"oct-mcp {__version__}: serving {app.workspace.root} (profile {app.profile.name}) over stdio, "
            "for an MCP client on stdin and stdout; Ctrl-C stops it",
            file=sys.stderr,
        )
    anyio.run(serve_stdio, app)
    return EXIT_OK


def _policy(app: App, args: argparse.Namespace) -> int:
    from oct_mcp.policy_command import policy_check, policy_test

    if args.action == "test":
        return policy_test(app, sys.stdout)
    if args.tool is None:
        print("oct-mcp policy check: name the tool: oct-mcp policy check TOOL --json ARGS", file=sys.stderr)
        return EXIT_USAGE
    return policy_check(app, args.tool, args.arguments, sys.stdout, client=args.client)


def _home() -> Path | None:
    try:
        return Path.home()
    except (RuntimeError, KeyError):  # no HOME and no passwd entry: the other rules still hold
        return None


def _broad_root_refusal(project_root: str, *, given: bool) -> str | None:
    """The message that refuses a root too broad to serve, or None when the root may be served."""
    try:
        root = resolve_root(project_root)
    except NotADirectoryError:
        return None  # build_app says so, with its own message
    problem = broad_root_problem(root, _home())
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


def _checkpoint_status(app: App) -> str:
    """Where this project's checkpoints are kept, how many, and the room their contents take."""
    config = app.loaded.config
    store = CheckpointStore.for_config(config, app.workspace.root)
    if store is None:
        return "off (checkpoint_max_count is 0): changes cannot be undone"
    usage = store.usage()
    return (
        f"{usage.folder}: {usage.checkpoints} of at most {config.checkpoint_max_count}, "
        f"{usage.blob_bytes / 1_048_576:.1f} MiB of at most {config.checkpoint_max_size_mb:g} MiB"
    )


def print_doctor(app: App, out: TextIO) -> None:
    """Print what this server would run with, and where each setting came from."""
    loaded = app.loaded
    config = loaded.config
    write = out.write
    write(f"oct-mcp {__version__} (Python {sys.version.split()[0]}, {sys.platform})\n")
    broad = broad_root_problem(app.workspace.root, _home())
    caveat = "" if broad is None else f" ({broad}: served only with --allow-broad-root)"
    write(f"project root: {app.workspace.root}{caveat}\n")
    write(f"config file: {loaded.path} ({loaded.file_status})\n")
    write(f"policy source: {loaded.policy_status}\n")
    write(f"repo config: {loaded.repo_status}\n")
    for line in loaded.ignore_status:
        write(f"ignore file {line}\n")
    write("\n")
    write("configuration (value, source):\n")
    for name, source in loaded.sources.items():
        value = f"{len(config.rules)} rule(s), below" if name == "rules" else repr(getattr(config, name))
        write(f"  {name:<28} {value:<40} {source}\n")
    write(f"\nprofile: {app.profile.name} ({app.profile.origin}) {app.profile.description}\n")
    write("chain, outermost first: " + " > ".join(app.chain.layer_names) + "\n")
    write("layers a profile may name (where each came from):\n")
    for name in app.registry:
        used = ", in this chain" if name in app.chain.layer_names else ""
        write(f"  {name:<16} {app.registry.origin(name)}{used}\n")
    from oct_mcp.policy_command import print_rules

    print_rules(app, out)
    write(f"audit: {audit_status(app)}\n")
    write(f"checkpoints: {_checkpoint_status(app)}\n")
    write(f"opentelemetry: {telemetry_status().reason}\n\n")
    write("sandbox backends:\n")
    for name, status in sandbox_backend_status(config.sandbox_backend):
        write(f"  {name:<14} {status}\n")
    advice = bubblewrap_advice()
    if advice is not None:
        write(advice)
    write(f"run limits: {run_limits_status(config.memory_limit_mb)}\n")
    write(f"secret files: {secret_files_status(app)}\n")
    write(f"search: {helper_status(app.workspace.root)}\n")
    write("landlock guarantees:\n")
    for name, status in landlock_guarantee_status():
        write(f"  {name:<16} {status}\n")
    if config.allow_unconfined_project_code:
        write(
            "WARNING: allow_unconfined_project_code is on: where the backend confines nothing (native), "
            "command tools run project code with this user's full rights\n"
        )
    write("\ntools:\n")
    for spec in app.catalog.values():
        shown = "listed" if app.chain.is_visible(spec) else "hidden by the profile"
        write(f"  {spec.name:<18} {spec.risk.value:<8} {_availability(app, spec)}, {shown}\n")


def audit_status(app: App) -> str:
    """Where the audit log goes and whether records reach it."""
    path = app.loaded.config.audit_log_path
    if "audit" not in app.chain.layer_names:
        return f"off: the profile has no audit layer ({path} unused)"
    if app.audit is None:
        return f"{path}: status unknown (this app has no audit sink)"
    writer = app.audit.writer
    status = f"{path}: {writer.status()}"
    if writer.signer is not None:
        status += (
            f"; checkpoints signed by key {writer.signer.key_id} every {writer.checkpoint_every} records "
            f"or {writer.checkpoint_seconds:g} s"
        )
    if writer.forwarder is not None:
        status += f"; each record also sent to syslog over {writer.forwarder.address.scheme}"
    return status


def run_limits_status(memory_limit_mb: int) -> str:
    """Which caps hold over one command run here: a cgroup per run, RLIMIT_NPROC, or per process only."""
    from oct_mcp.execution.cgroups import delegated_cgroup
    from oct_mcp.middleware.sandbox import RUN_PROCESSES

    memory = f"{memory_limit_mb} MiB" if memory_limit_mb else "no memory limit"
    parent = delegated_cgroup()
    if parent is not None:
        return f"a cgroup per run under {parent}: {memory} and {RUN_PROCESSES} processes for the whole run"
    if os.geteuid() != 0:
        return (
            f"per process ({memory} each, RLIMIT_DATA); RLIMIT_NPROC lets a run add {RUN_PROCESSES} "
            "processes to the user's count (no delegated cgroup v2 here)"
        )
    return (
        f"per process only ({memory} each, RLIMIT_DATA); no process cap: RLIMIT_NPROC does not bind root "
        "and there is no delegated cgroup v2 here (the timeout and the tree kill bound a run)"
    )


def _availability(app: App, spec: ToolSpec) -> str:
    if spec.name.startswith("oct_git_"):
        # The git tools run the server's own git, never the project's, under the sandbox.
        git = shutil.which("git")
        return f"runs {git} under the sandbox" if git else "unavailable: git is not on the server's PATH"
    if spec.program is None:
        return "available (runs in-process)"
    try:
        described = how_it_runs(app.workspace.root, spec.name)
        return described or f"runs {find_program(app.workspace.root, spec.program)}"
    except ToolUnavailableError as exc:
        return f"unavailable: {exc.message}"


def secret_files_status(app: App) -> str:
    """What a command run is shown of the project files a read shows masked, and which setting says so."""
    from oct_mcp.backends import SecretFileView
    from oct_mcp.backends.selection import select_backend
    from oct_mcp.middleware.sandbox import SandboxSettings

    if "sandbox" not in app.chain.layer_names:
        return "no sandbox layer in this profile: the host runs the tools"
    settings = SandboxSettings.model_validate(app.profile.settings.get("sandbox", {}))
    if settings.show_secrets_to_runs:
        return (
            "runs read the project files a read shows masked as they are (show_secrets_to_runs = true): "
            "code a tool runs can print their secrets in a form the redactor does not know"
        )
    try:
        backend = select_backend(app.loaded.config.sandbox_backend)[0]
    except ConfigError:
        return "unknown: no sandbox backend works here"
    if backend.secret_files is SecretFileView.MASKED:
        return (
            "runs read a masked, read-only copy of each project file a read shows masked "
            f"({backend.name}; show_secrets_to_runs = false)"
        )
    if backend.secret_files is SecretFileView.HIDDEN:
        return (
            "runs cannot read the project files a read shows masked: permission denied "
            f"({backend.name}; show_secrets_to_runs = false)"
        )
    return (
        f"runs read the project files a read shows masked as they are: the {backend.name} backend "
        "confines no reads"
    )


def landlock_guarantee_status() -> list[tuple[str, str]]:
    """This kernel's Landlock ABI, and each guarantee the landlock backend meets or misses, with why."""
    from oct_mcp.backends import GUARANTEES
    from oct_mcp.backends.landlock import landlock_support

    support = landlock_support()
    missing = support.missing()
    rows = [("ABI", str(support.abi) if support.problem is None else f"none: {support.problem}")]
    for guarantee in sorted(GUARANTEES):
        reason = missing.get(guarantee)
        rows.append((guarantee, "met" if reason is None else f"missed: {reason}"))
    rows.append(("loopback", loopback_status()))
    return rows


def loopback_status() -> str:
    """What a landlock run without network may do on loopback here, and why not more."""
    from oct_mcp.backends.landlock import landlock_support
    from oct_mcp.backends.loopback import loopback_support

    support = landlock_support()
    if support.problem is not None or not support.seccomp:
        return "refused: no seccomp filter here"
    problem = loopback_support()
    if problem is not None:
        return f"refused (TCP bind, listen, UDP, unix sockets, ptys, /dev/shm): {problem}"
    return (
        "supervised: a run without network serves and reaches its own TCP and UDP sockets on "
        "127.0.0.0/8 and ::1 and its own unix sockets under its scratch folder, nothing else "
        "(no wildcard, no other address, no socket of the host); every run gets its own ptys and "
        "/dev/shm segments and semaphores, never another's"
    )


def bubblewrap_advice(
    probe_error: str | None = None, executable: str | None = None, sysctl: Path = RESTRICT_SYSCTL
) -> str | None:
    """Where AppArmor blocks an installed bubblewrap: that it does, and the one-time commands that let
    it run; None where bubblewrap works, is absent or fails for another reason.

    Args:
        probe_error: What bubblewrap's probe reported; by default this machine's probe.
        executable: The bwrap it probed; by default the one the backend uses.
        sysctl: The kernel's user-namespace restriction file.
    """
    from oct_mcp.backends.bubblewrap import Bubblewrap
    from oct_mcp.backends.selection import probe_backends

    if probe_error is None:
        availability = dict(probe_backends())["bubblewrap"]
        if availability.usable:
            return None
        probe_error = availability.detail
    executable = executable or Bubblewrap().executable
    if executable is None or not blocked_by_apparmor(probe_error, sysctl):
        return None
    return (
        f"bubblewrap is installed but AppArmor blocks it: this kernel lets only programs whose AppArmor "
        f"profile allows it create user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1), and "
        f"{executable} has no such profile. To let it run, once, as root (Ubuntu's documented profile):\n"
        f"{apparmor_profile_command(executable)}"
        "then run `oct-mcp doctor` again: `auto` picks bubblewrap once its probe passes\n"
    )


def sandbox_backend_status(configured: str) -> list[tuple[str, str]]:
    """Each backend, probed for real, and which one `sandbox_backend` selects here."""
    from oct_mcp.backends.selection import probe_backends, select_backend

    try:
        chosen = select_backend(configured)[0].name
    except ConfigError:
        chosen = None
    rows = []
    for name, availability in probe_backends():
        mark = "selected" if name == chosen else ("usable" if availability.usable else "unusable")
        rows.append((name, f"{mark}: {availability.detail}"))
    if chosen is None:
        rows.append(
            ("(none)", f"sandbox_backend {configured!r} does not work here: the server will not start")
        )
    return rows
