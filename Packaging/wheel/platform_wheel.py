"""Turns the pure wheel of ``halcyon-cache`` into a platform wheel carrying the binaries.

    python3 platform_wheel.py PURE.whl --binaries DIR --platform TAG --out FOLDER
        [--extra-doc FILE ...]

The pure wheel (what ``pip wheel Clients/python`` builds) keeps its package and metadata
unchanged; this adds ``halcyond`` and ``halcyon`` to the wheel's ``.data/scripts``
folder, which pip installs as executables into the environment's ``bin`` beside the
console scripts. They stay the native programs themselves, not Python launchers that
``exec`` them: a launcher would add an interpreter start to every ``halcyon get`` in a
shell loop and would sit between the daemon and the signals and systemd notifications
meant for it. The wheel is marked not pure and tagged ``py3-none-TAG``: any Python 3,
one platform. Prints the new wheel's path.

Standard library only; a wheel is a zip whose RECORD lists every file's SHA-256.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import re
import sys
import zipfile
from pathlib import Path
from typing import List, Tuple

BINARIES = ("halcyond", "halcyon")
# Wheel file names: {distribution}-{version}(-{build})?-{python}-{abi}-{platform}.whl
WHEEL_NAME = re.compile(r"^(?P<dist>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")
# Zip timestamps: fixed, so the same inputs give the same wheel byte for byte.
EPOCH = (1980, 1, 1, 0, 0, 0)


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def platform_wheel(pure: Path, binaries: Path, platform: str, out: Path, extra_docs: List[Path]) -> Path:
    match = WHEEL_NAME.match(pure.name)
    if match is None:
        raise SystemExit(f"platform_wheel: {pure.name} is not a wheel file name")
    dist, version = match.group("dist"), match.group("version")
    dist_info = f"{dist}-{version}.dist-info"
    data_scripts = f"{dist}-{version}.data/scripts"
    tag = f"py3-none-{platform}"

    files: List[Tuple[str, bytes, int]] = []  # (name in the wheel, bytes, Unix mode)
    with zipfile.ZipFile(pure) as source:
        for info in source.infolist():
            if info.is_dir() or info.filename == f"{dist_info}/RECORD":
                continue
            data = source.read(info)
            if info.filename == f"{dist_info}/WHEEL":
                data = rewrite_wheel_metadata(data.decode(), tag).encode()
            files.append((info.filename, data, 0o644))
    for binary in BINARIES:
        path = binaries / binary
        if not os.access(path, os.X_OK):
            raise SystemExit(f"platform_wheel: {path} is missing or not executable")
        files.append((f"{data_scripts}/{binary}", path.read_bytes(), 0o755))
    for doc in extra_docs:
        files.append((f"{dist_info}/{doc.name}", doc.read_bytes(), 0o644))

    record_name = f"{dist_info}/RECORD"
    record = "\n".join([record_line(name, data) for name, data, _ in files] + [f"{record_name},,", ""])
    files.append((record_name, record.encode(), 0o644))

    out.mkdir(parents=True, exist_ok=True)
    target = out / f"{dist}-{version}-{tag}.whl"
    partial = target.with_suffix(".whl.partial")
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as wheel:
        for name, data, mode in files:
            info = zipfile.ZipInfo(name, date_time=EPOCH)
            info.external_attr = (0o100000 | mode) << 16  # a regular file with this mode
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, data)
    partial.replace(target)
    return target


def rewrite_wheel_metadata(text: str, tag: str) -> str:
    """The WHEEL file, not pure any more and with one tag: the platform's."""
    lines = [line for line in text.splitlines() if line and not line.startswith(("Tag:", "Root-Is-Purelib:"))]
    lines.insert(1, "Root-Is-Purelib: false")
    lines.append(f"Tag: {tag}")
    return "\n".join(lines) + "\n\n"


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pure", type=Path)
    parser.add_argument("--binaries", type=Path, required=True)
    parser.add_argument("--platform", required=True, help="e.g. linux_x86_64, manylinux_2_36_x86_64")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--extra-doc", type=Path, action="append", default=[])
    args = parser.parse_args(argv)
    if not re.fullmatch(r"[a-z0-9_]+", args.platform):
        raise SystemExit(f"platform_wheel: '{args.platform}' is not a platform tag")
    print(platform_wheel(args.pure, args.binaries, args.platform, args.out, args.extra_doc))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
