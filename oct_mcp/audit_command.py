"""`oct-mcp audit`: verify the chain (and its signed checkpoints), tail, keygen, export, verifier."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from oct_mcp.audit import audit_files, describe_record, read_tail, verify_chain
from oct_mcp.audit.export import NothingSignedError, build_bundle, write_bundle
from oct_mcp.audit.verify import lines_of
from oct_mcp.audit.verify_bundle import (
    check_signatures,
    load_public_key,
    unsigned_problem,
)
from oct_mcp.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE

__all__ = ["audit_parser", "run_audit"]

TAIL_DEFAULT: Final = 20


def audit_parser(debug_levels: list[int]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="oct-mcp audit",
        description="Check the audit log's hash chain and signed checkpoints, show its last records, "
        "make a signing key, or export a bundle another machine can check.",
    )
    actions = parser.add_subparsers(
        dest="action", required=True, metavar="{verify,tail,keygen,export,verifier}"
    )
    verify = actions.add_parser(
        "verify", help="check the chain across the rotated files; exit 0 when intact, 1 when broken"
    )
    verify.add_argument(
        "--key",
        dest="keys",
        action="append",
        type=Path,
        default=[],
        metavar="PUB",
        help="a public key (PEM) the checkpoints must be signed with; repeat it for a rotated key",
    )
    verify.add_argument(
        "--strict", action="store_true", help="with --key: records after the last checkpoint fail too"
    )
    tail = actions.add_parser("tail", help="show the last records, one line each")
    tail.add_argument("-n", dest="count", type=int, default=TAIL_DEFAULT, metavar="N", help="how many")
    export = actions.add_parser(
        "export", help="write the records up to the last checkpoint, with the public key, as one bundle"
    )
    export.add_argument("--key", dest="keys", action="append", type=Path, required=True, metavar="PUB")
    export.add_argument("-o", dest="output", type=Path, required=True, metavar="FILE", help="the bundle")
    export.add_argument(
        "--since",
        type=int,
        default=1,
        metavar="SEQ",
        help="the first record wanted (the bundle starts at the checkpoint before it)",
    )
    keygen = actions.add_parser("keygen", help="write a new Ed25519 key pair: PATH (0600) and PATH.pub")
    keygen.add_argument("key_path", type=Path, metavar="PATH")
    actions.add_parser("verifier", help="print the standalone bundle verifier (a single Python file)")
    for action in (verify, tail, export):
        action.add_argument(
            "paths",
            nargs="*" if action is not export else "?",
            type=Path,
            metavar="PATH",
            help="audit logs, one per replica (default: audit_log_path)",
        )
    for action in (verify, tail, export, keygen):
        action.add_argument(
            "--config", type=Path, metavar="FILE", help="config file (default: ~/.oct-mcp/config.json)"
        )
    for action in actions.choices.values():
        action.add_argument("--debug", type=int, choices=debug_levels, metavar="N", help="0 to 4")
    return parser


def run_audit(args: argparse.Namespace) -> int:
    if args.action == "verifier":
        sys.stdout.write((Path(__file__).parent / "audit" / "verify_bundle.py").read_text(encoding="utf-8"))
        return EXIT_OK
    if args.action == "keygen":
        return _keygen(args.key_path, args.config)
    paths = args.paths if isinstance(args.paths, list) else [args.paths] if args.paths else []
    if not paths:
        paths = [_audit_log_path(args.config)]
    if args.action == "export":
        return _export(paths[0], args.keys, args.output, args.since)
    # Each replica keeps its own chain: each file is checked on its own, and all must hold.
    worst = EXIT_OK
    for path in paths:
        prefix = f"{path}: " if len(paths) > 1 else ""
        if not audit_files(path):
            print(f"oct-mcp audit: no audit log at {path}", file=sys.stderr)
            worst = max(worst, EXIT_USAGE)
        elif args.action == "tail":
            for raw in read_tail(path, args.count):
                print(prefix + describe_record(raw))
        else:
            worst = max(worst, _verify(path, prefix, args.keys, strict=args.strict))
    return worst


def _audit_log_path(config_path: Path | None) -> Path:
    from oct_mcp.config import load_settings

    return Path(load_settings(config_path).config.audit_log_path).expanduser()


def _verify(path: Path, prefix: str, keys: list[Path], *, strict: bool) -> int:
    verification = verify_chain(path)
    for problem in verification.breaks:
        print(f"{prefix}broken: {problem}")
    files = len(verification.files)
    status = EXIT_OK
    if verification.breaks:
        print(
            f"{prefix}{len(verification.breaks)} break(s) in {verification.records} records, {files} file(s)"
        )
        status = EXIT_FAILED
    else:
        print(
            f"{prefix}intact: {verification.records} records in {files} file(s), from {verification.files[0]}"
        )
        if verification.first_seq is not None and verification.first_seq > 1:
            print(
                f"{prefix}the oldest record is number {verification.first_seq}: those before it were "
                "rotated away"
            )
    if not keys:
        return status
    try:
        publics = [load_public_key(key.read_bytes()) for key in keys]
    except (OSError, ValueError) as exc:
        print(f"oct-mcp audit: --key: {exc}", file=sys.stderr)
        return EXIT_USAGE
    report = check_signatures(_located_lines(path), publics)
    for finding in report.problems:
        print(f"{prefix}signature: {finding}")
    unsigned = unsigned_problem(report)
    if report.problems or (unsigned is not None and (strict or report.signed_through is None)):
        status = EXIT_FAILED
    if report.signed_through is not None:
        print(
            f"{prefix}signed: {report.checkpoints} checkpoint(s) vouch for every record up to seq "
            f"{report.signed_through}"
        )
    if unsigned is not None:
        print(f"{prefix}{unsigned}")
    return status


def _located_lines(path: Path) -> Iterator[tuple[str, bytes]]:
    for file in audit_files(path):
        for number, line in enumerate(lines_of(file.read_bytes()), start=1):
            yield f"{file.name}:{number}", line


def _export(path: Path, keys: list[Path], output: Path, since: int) -> int:
    """Write the records from the checkpoint before `since` to the last checkpoint, verified first."""
    if not audit_files(path):
        print(f"oct-mcp audit: no audit log at {path}", file=sys.stderr)
        return EXIT_USAGE
    try:
        publics = [load_public_key(key.read_bytes()) for key in keys]
        pem = keys[0].read_text(encoding="ascii")
    except (OSError, ValueError) as exc:
        print(f"oct-mcp audit: --key: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        bundle = build_bundle(path, publics, since=since)
        write_bundle(output, bundle, pem)
    except NothingSignedError:
        print(
            "oct-mcp audit: nothing to export: a checkpoint in this log does not verify with that key, "
            "or none is there (check it with `oct-mcp audit verify --key PUB`)",
            file=sys.stderr,
        )
        return EXIT_FAILED
    except OSError as exc:
        print(f"oct-mcp audit: cannot write {output}: {exc.strerror}", file=sys.stderr)
        return EXIT_USAGE
    count = len(bundle.lines)
    print(
        f"wrote {output}: records {bundle.first_seq} to {bundle.last_seq} ({count}), signed by its last one"
    )
    if bundle.left_out:
        print(f"left out: {bundle.left_out} record(s) after the last checkpoint, not yet signed")
    print(
        "check it anywhere: oct-mcp audit verifier > verify_bundle.py; python verify_bundle.py " + str(output)
    )
    return EXIT_OK


def _keygen(key_path: Path, config_path: Path | None) -> int:
    from oct_mcp.audit.checkpoint import generate_key_pair

    audit_folder = _audit_log_path(config_path).parent
    if key_path.expanduser().resolve().is_relative_to(audit_folder.resolve()):
        print(
            f"oct-mcp audit keygen: {key_path} is inside the audit log's folder {audit_folder}: keep the "
            "key where whoever can rewrite the log cannot read it",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        public = generate_key_pair(key_path.expanduser())
    except (FileExistsError, OSError) as exc:
        print(f"oct-mcp audit keygen: {exc}; a key is never overwritten", file=sys.stderr)
        return EXIT_USAGE
    print(f"wrote {key_path} (private, 0600) and {public} (public: give it to whoever checks the log)")
    print(f'set in the config: "audit_signing_key": "{key_path.expanduser().resolve()}"')
    return EXIT_OK
