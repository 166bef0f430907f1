"""``python3 -m halcyon``: the ``halcyon`` command's interface, in Python.

The Swift ``halcyon`` binary is the command users get; this module offers the same
subcommands, arguments and exit status where Python is installed but the binary is
not, and lets the shell library be tested against either::

    python3 -m halcyon [--socket P] get KEY            raw bytes to stdout
    python3 -m halcyon set KEY [VALUE|-] [--ttl 10m | --expires-at T]
    python3 -m halcyon rm|exists|describe [--json] KEY
    python3 -m halcyon touch KEY TTL
    python3 -m halcyon stats|info|ping|clear|trim
    python3 -m halcyon call METHOD [JSON]

Exit status: 0 success or hit, 1 miss, 2 error (one line on stderr naming
``data.reason``). Values given on the command line or stdin are stored as bytes.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
from typing import Any, List, Optional

from . import errors
from ._wire import Expire
from .client import Client

_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_TTL = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")


def parse_ttl(text: str) -> Expire:
    """``90``, ``90s``, ``10m``, ``2h``, ``7d``, ``1w`` -> seconds; ``never`` passes through."""
    if text == "never":
        return "never"
    match = _TTL.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"bad duration {text!r} (use 90, 90s, 10m, 2h, 7d or never)")
    return float(match.group(1)) * _UNITS[match.group(2)]


def _when(ts: Optional[float]) -> str:
    if ts is None:
        return "never"
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="halcyon", description="Talk to the Halcyon cache daemon.")
    p.add_argument("--socket", help="socket path (default: $HALCYON_SOCKET, then the daemon's default)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for a reply (default 10)")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("get", help="write the value to stdout").add_argument("key")
    s = sub.add_parser("set", help="store a value (argument, or stdin for '-')")
    s.add_argument("key")
    s.add_argument("value", nargs="?", default="-")
    group = s.add_mutually_exclusive_group()
    group.add_argument("--ttl", type=parse_ttl)
    group.add_argument("--expires-at", type=float, metavar="UNIX_SECONDS")
    sub.add_parser("rm", help="remove a key").add_argument("key")
    sub.add_parser("exists", help="exit 0 when cached").add_argument("key")
    d = sub.add_parser("describe", help="size, expiry, last access")
    d.add_argument("--json", action="store_true", help="print the raw result")
    d.add_argument("key")
    t = sub.add_parser("touch", help="new expiration from now")
    t.add_argument("key")
    t.add_argument("ttl", type=parse_ttl)
    for name in ("stats", "info", "ping", "clear", "trim"):
        sub.add_parser(name)
    c = sub.add_parser("call", help="call any method with a JSON params object")
    c.add_argument("method")
    c.add_argument("params", nargs="?")
    return p


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, sort_keys=True) + "\n")


def run(argv: Optional[List[str]] = None) -> int:
    """Run one command; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        with Client(args.socket, timeout=args.timeout) as c:
            cmd = args.command
            if cmd == "get":
                # base64 gives the stored bytes exactly, whatever the entry's encoding.
                entry = c.get_entry(args.key, encoding="base64")
                if entry is None:
                    return 1
                sys.stdout.buffer.write(entry.value)
                sys.stdout.buffer.flush()
                return 0
            if cmd == "set":
                raw = sys.stdin.buffer.read() if args.value == "-" else args.value.encode("utf-8", "surrogateescape")
                expire: Expire = args.ttl
                if args.expires_at is not None:
                    expire = {"date": args.expires_at}
                return 0 if c.set(args.key, raw, expire) else 1
            if cmd == "rm":
                return 0 if c.delete(args.key) else 1
            if cmd == "exists":
                return 0 if c.exists(args.key) else 1
            if cmd == "describe":
                result = c.call("cache.describe", {"key": args.key})
                if args.json:
                    _print_json(result)
                elif result.get("found"):
                    print(f"tier:        {result.get('cacheType')}")
                    print(f"size:        {result.get('size')} bytes")
                    print(f"encoding:    {result.get('encoding')}")
                    print(f"expires:     {_when(result.get('expiresAt'))}")
                    if "memoryExpiresAt" in result:
                        print(f"in memory:   until {_when(result.get('memoryExpiresAt'))}")
                    print(f"last access: {_when(result.get('lastAccessAt'))}")
                return 0 if result.get("found") else 1
            if cmd == "touch":
                return 0 if c.touch(args.key, args.ttl) else 1
            if cmd == "ping":
                c.ping()
                print("pong")
                return 0
            if cmd in ("stats", "info", "trim"):
                _print_json({"stats": c.stats, "info": c.info, "trim": c.trim}[cmd]())
                return 0
            if cmd == "clear":
                print(c.clear())
                return 0
            if cmd == "call":
                params = json.loads(args.params) if args.params else None
                _print_json(c.call(args.method, params))
                return 0
    except errors.HalcyonError as exc:
        sys.stderr.write(f"halcyon: {exc.reason or 'error'}: {exc.message}\n")
        return 2
    except (ValueError, TypeError) as exc:
        sys.stderr.write(f"halcyon: invalidArgument: {exc}\n")
        return 2
    return 2


def main() -> None:
    """Console entry point."""
    try:
        sys.exit(run())
    except BrokenPipeError:
        sys.exit(2)


if __name__ == "__main__":
    main()
