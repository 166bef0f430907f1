#!/usr/bin/env python3
"""Prints halcyond's `cache.stats` reply (one JSON line), or one number of it.

usage: halcyon_stat.py SOCKET [PATH]   PATH: dotted, e.g. journal.unwrittenEntries
Exits 1 when the daemon does not answer.
"""
import json
import socket
import sys


def main() -> int:
    if len(sys.argv) not in (2, 3):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(10)
        s.connect(sys.argv[1])
        s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"cache.stats"}\n')
        line = s.makefile().readline().strip()
    except OSError as error:
        print(f"halcyon_stat.py: {error}", file=sys.stderr)
        return 1
    if len(sys.argv) == 2:
        print(line)
        return 0
    value = json.loads(line)["result"]
    for part in sys.argv[2].split("."):
        value = value[part]
    print(value)
    return 0


if __name__ == "__main__":
    sys.exit(main())
