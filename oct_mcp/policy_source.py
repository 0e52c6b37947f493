"""Fetch the policy named by `policy_source`: a local JSON file or an https URL, bounded in size and time."""

from __future__ import annotations

import json
import os
import ssl
import stat
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from oct_mcp.errors import ConfigError
from oct_mcp.workspace import read_at_most

__all__ = ["MAX_POLICY_BYTES", "POLICY_TIMEOUT_SECONDS", "PolicySourceError", "fetch_policy", "parse_policy"]

MAX_POLICY_BYTES: Final = 1_048_576
POLICY_TIMEOUT_SECONDS: Final = 10.0


class PolicySourceError(ConfigError):
    """The policy could not be had; the caller falls back to the built-in defaults."""

    code = "policy_source"


class _HttpsOnlyRedirects(urllib.request.HTTPRedirectHandler):
    """Follow a redirect only to another https URL: a downgrade would let anyone on the path rewrite it."""

    def redirect_request(
        self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> urllib.request.Request | None:
        if urlsplit(newurl).scheme != "https":
            fp.close()
            raise PolicySourceError("the policy URL redirects to a URL that is not https")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def fetch_policy(source: str, *, network_allowed: bool) -> dict[str, Any]:
    """Read and parse the policy document.

    Args:
        source: A local path, or an `https://` URL.
        network_allowed: False in a profile that forbids the network (`airgapped`).

    Returns:
        The policy: a JSON object of config fields.

    Raises:
        PolicySourceError: What was wrong, in words for the diagnostics log and `doctor`.
    """
    scheme = urlsplit(source).scheme.lower()
    if scheme == "https":
        if not network_allowed:
            raise PolicySourceError("this profile forbids the network, so an https policy_source is refused")
        data = _fetch_https(source)
    elif "://" in source:
        raise PolicySourceError("policy_source must be a local path or an https:// URL")
    else:
        data = _read_local(Path(os.path.expanduser(source)))
    return parse_policy(data)


def parse_policy(data: bytes) -> dict[str, Any]:
    """Parse a policy or config document: a JSON object of config fields.

    Raises:
        PolicySourceError: It is not valid JSON, or not an object.
    """
    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise PolicySourceError("the policy is not valid JSON") from exc
    if not isinstance(document, dict):
        raise PolicySourceError("the policy must be a JSON object of config fields")
    return document


def _read_local(path: Path) -> bytes:
    # O_NONBLOCK and a regular file only: a FIFO or a device (`/dev/stdin`) would block the
    # start-up for ever, or read the server's own protocol stream.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise PolicySourceError(f"the policy file cannot be read ({type(exc).__name__})") from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise PolicySourceError("the policy file is not a regular file")
        os.set_blocking(fd, True)
        data = read_at_most(fd, MAX_POLICY_BYTES, os.fstat(fd).st_size)
    except OSError as exc:
        raise PolicySourceError(f"the policy file cannot be read ({type(exc).__name__})") from exc
    finally:
        os.close(fd)
    if len(data) > MAX_POLICY_BYTES:
        raise PolicySourceError(f"the policy is larger than {MAX_POLICY_BYTES} bytes")
    return data


def _fetch_https(url: str) -> bytes:
    opener = urllib.request.build_opener(
        urllib.request.HTTPSHandler(context=ssl.create_default_context()), _HttpsOnlyRedirects()
    )
    request = urllib.request.Request(url, headers={"Accept": "application/json"})  # noqa: S310 - https only
    # The socket timeout bounds each read; the deadline bounds them all (a server could drip bytes).
    deadline = time.monotonic() + POLICY_TIMEOUT_SECONDS
    chunks: list[bytes] = []
    received = 0
    try:
        with opener.open(request, timeout=POLICY_TIMEOUT_SECONDS) as response:
            while received <= MAX_POLICY_BYTES:
                if time.monotonic() > deadline:
                    raise PolicySourceError(
                        f"the policy took longer than {POLICY_TIMEOUT_SECONDS:g} s to fetch"
                    )
                chunk = response.read(65_536)
                if not chunk:
                    break
                chunks.append(chunk)
                received += len(chunk)
    except PolicySourceError:
        raise
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or type(exc).__name__
        raise PolicySourceError(f"the policy URL cannot be fetched ({reason})") from exc
    data = b"".join(chunks)
    if len(data) > MAX_POLICY_BYTES:
        raise PolicySourceError(f"the policy is larger than {MAX_POLICY_BYTES} bytes")
    return data
