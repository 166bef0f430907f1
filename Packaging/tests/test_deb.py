"""The Debian package and the bare binaries, installed for real into a minimal Debian root
made by debootstrap: no Swift, no -dev package, nothing but what the package declares."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ALLOWED_LIBRARIES, VERSION, DebianRoot, ldd_libraries, stop


@pytest.mark.parametrize("tool", ["halcyond", "halcyon"])
def test_binaries_link_only_libc_libstdcxx_libgcc(release_bin: Path, tool: str) -> None:
    libraries = ldd_libraries(release_bin / tool)
    assert libraries, "a fully static build would need the docs and this test changed"
    strays = [lib for lib in libraries if not any(lib.startswith(allowed) or f"/{allowed}" in lib
                                                  for allowed in ALLOWED_LIBRARIES)]
    assert strays == [], f"{tool} links {strays} dynamically"


def test_bare_binaries_serve_on_a_minimal_root_with_an_empty_environment(
        debian_root: DebianRoot, release_bin: Path) -> None:
    bare = debian_root.path / "opt/halcyon/bin"
    bare.mkdir(parents=True)
    for tool in ("halcyond", "halcyon"):
        shutil.copy2(release_bin / tool, bare / tool)
    assert debian_root.run("/opt/halcyon/bin/halcyond", "--version").stdout.strip() == VERSION
    socket = "/tmp/bare/h.sock"
    daemon = subprocess.Popen(debian_root.argv("/opt/halcyon/bin/halcyond", "--socket", socket,
                                               "--cache-dir", "/tmp/bare/cache"),
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        debian_root.wait_for_ping(socket, None, daemon, cli="/opt/halcyon/bin/halcyon")
        cli = ["/opt/halcyon/bin/halcyon", "--socket", socket]
        debian_root.run(*cli, "set", "greeting", "hello from a bare root")
        assert debian_root.run(*cli, "get", "greeting").stdout == "hello from a bare root"
        assert debian_root.run(*cli, "get", "absent", check=False).returncode == 1
    finally:
        assert stop(daemon) == 0, daemon.stdout.read().decode() if daemon.stdout else ""


def test_lintian_finds_no_error(deb: Path) -> None:
    done = subprocess.run(["lintian", "--fail-on", "error", "--no-tag-display-limit", str(deb)],
                          capture_output=True, text=True, timeout=600)
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not re.search(r"^E: ", done.stdout, re.MULTILINE), done.stdout


def test_package_declares_what_it_holds_and_needs(deb: Path) -> None:
    fields = subprocess.run(["dpkg-deb", "--field", str(deb)], capture_output=True, text=True,
                            check=True, timeout=60).stdout
    assert re.search(rf"^Version: {re.escape(VERSION)}$", fields, re.MULTILINE)
    depends = re.search(r"^Depends: (.*)$", fields, re.MULTILINE)
    assert depends is not None
    names = {part.strip().split()[0] for part in depends.group(1).split(",")}
    assert {"adduser", "libc6", "libstdc++6", "libgcc-s1"} <= names, depends.group(1)
    assert not any("jansson" in n or "jemalloc" in n or "swift" in n for n in names), depends.group(1)
    assert re.search(r"^Static-Built-Using: .*jansson.*jemalloc", fields, re.MULTILINE), fields
    listing = subprocess.run(["dpkg-deb", "--contents", str(deb)], capture_output=True, text=True,
                             check=True, timeout=60).stdout
    for path in ["./usr/bin/halcyond", "./usr/bin/halcyon",
                 "./usr/lib/systemd/system/halcyon.socket", "./usr/lib/systemd/system/halcyon.service",
                 "./usr/lib/systemd/user/halcyon.socket", "./usr/lib/systemd/user/halcyon.service",
                 "./usr/share/bash-completion/completions/halcyon",
                 "./usr/share/bash-completion/completions/halcyond",
                 "./usr/share/zsh/vendor-completions/_halcyon",
                 "./usr/share/fish/vendor_completions.d/halcyond.fish",
                 "./usr/share/doc/halcyon/copyright", "./usr/share/doc/halcyon/changelog.gz",
                 "./usr/share/doc/halcyon/OPERATIONS.md",
                 "./usr/share/man/man1/halcyon.1.gz", "./usr/share/man/man8/halcyond.8.gz",
                 "./usr/share/halcyon/grafana-dashboard.json"]:
        assert re.search(rf" {re.escape(path)}$", listing, re.MULTILINE), path
    assert "./var/cache/halcyon" not in listing, "the cache folder must not belong to the package"


def test_deb_installs_serves_then_remove_keeps_the_cache_and_purge_deletes_it(
        debian_root: DebianRoot, deb: Path) -> None:
    shutil.copy2(deb, debian_root.path / "tmp" / deb.name)
    debian_root.run("dpkg", "-i", f"/tmp/{deb.name}")
    assert debian_root.run("halcyond", "--version").stdout.strip() == VERSION
    assert debian_root.run("halcyon", "--version").stdout.strip() == VERSION

    # postinst: the daemon's user and group, its clients' group, its cache folder.
    assert debian_root.run("getent", "passwd", "halcyon").stdout.split(":")[6].strip() == "/usr/sbin/nologin"
    debian_root.run("getent", "group", "halcyon-users")
    cache = debian_root.path / "var/cache/halcyon"
    assert debian_root.run("stat", "-c", "%U:%G %a", "/var/cache/halcyon").stdout.strip() == "halcyon:halcyon 700"
    # The socket is enabled (socket activation); the service and the per-user units are not.
    wants = debian_root.path / "etc/systemd/system/sockets.target.wants"
    assert (wants / "halcyon.socket").is_symlink()
    # (bookworm's deb-systemd-helper names /lib, the same folder after the /usr merge)
    assert str((wants / "halcyon.socket").readlink()) in {"/usr/lib/systemd/system/halcyon.socket",
                                                          "/lib/systemd/system/halcyon.socket"}
    assert not (debian_root.path / "etc/systemd/system/multi-user.target.wants/halcyon.service").exists()
    assert not (debian_root.path / "etc/systemd/user/sockets.target.wants/halcyon.socket").exists()

    # The system unit's own command line, as user halcyon. systemd would make the socket
    # (as root, with SocketGroup=halcyon-users, which user halcyon cannot set); here the
    # daemon makes it open to all on the file system, so its own peer check, from the
    # rules file the unit names, is what admits a member and refuses anyone else, and
    # gives each member a namespace of their own.
    unit = (debian_root.path / "usr/lib/systemd/system/halcyon.service").read_text()
    exec_start = re.search(r"^ExecStart=(.*)$", unit, re.MULTILINE)
    assert exec_start is not None and exec_start.group(1).startswith("/usr/bin/halcyond ")
    assert "--access /etc/halcyon/access.conf" in exec_start.group(1)
    rules = [line.split() for line in (debian_root.path / "etc/halcyon/access.conf").read_text().splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    assert rules == [["group", "halcyon-users", "$user", "read,write"]]
    assert "/etc/halcyon/access.conf" in debian_root.run("dpkg-query", "-W", "-f=${Conffiles}", "halcyon").stdout
    debian_root.run("install", "-d", "-o", "halcyon", "-g", "halcyon", "-m", "0711", "/run/halcyon")
    debian_root.run("useradd", "--create-home", "--groups", "halcyon-users", "alice")
    debian_root.run("useradd", "--create-home", "--groups", "halcyon-users", "bob")
    debian_root.run("useradd", "--create-home", "mallory")
    socket = "/run/halcyon/halcyon.sock"
    daemon = subprocess.Popen(debian_root.argv(*exec_start.group(1).split(), "--socket", socket,
                                               "--socket-mode", "0666", user="halcyon"),
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        debian_root.wait_for_ping(socket, "alice", daemon)
        debian_root.run("halcyon", "--socket", socket, "set", "greeting", "hello from the deb", user="alice")
        assert debian_root.run("halcyon", "--socket", socket, "get", "greeting",
                               user="alice").stdout == "hello from the deb"
        assert debian_root.run("halcyon", "--socket", socket, "whoami", user="alice").stdout.startswith(
            "namespace  alice\n")
        # Bob, of the same group, has a namespace of his own: Alice's key is not there.
        missing = debian_root.run("halcyon", "--socket", socket, "get", "greeting", user="bob", check=False)
        assert missing.returncode == 1 and missing.stdout == "", missing.stderr
        refused = debian_root.run("halcyon", "--socket", socket, "get", "greeting", user="mallory", check=False)
        assert refused.returncode == 2 and refused.stdout == "", refused.stderr
    finally:
        log = b""
        status = stop(daemon)
        if daemon.stdout:
            log = daemon.stdout.read()
        assert status == 0, log.decode()
    kept = sorted(p.name for p in cache.iterdir())
    assert kept, "the daemon wrote nothing into /var/cache/halcyon"

    debian_root.run("dpkg", "-r", "halcyon")
    assert not (debian_root.path / "usr/bin/halcyond").exists()
    assert sorted(p.name for p in cache.iterdir()) == kept, "removal must keep the cache folder"
    debian_root.run("getent", "passwd", "halcyon")

    debian_root.run("dpkg", "-P", "halcyon")
    assert not cache.exists(), "purge must delete the cache folder"
    assert not (wants / "halcyon.socket").is_symlink()
    assert not (debian_root.path / "etc/systemd/system/halcyon.socket").is_symlink(), "purge leaves no mask"
    status = debian_root.run("dpkg-query", "-W", "-f=${db:Status-Status}", "halcyon", check=False)
    assert status.returncode != 0 or status.stdout.strip() == "not-installed"


def test_man_pages_and_the_dashboard_are_there_after_install(debian_root: DebianRoot, deb: Path) -> None:
    shutil.copy2(deb, debian_root.path / "tmp" / deb.name)
    debian_root.run("dpkg", "-i", f"/tmp/{deb.name}")
    # man as a user would run it (man-db, from the root's own packages), its pager off.
    page = debian_root.run("env", "MANWIDTH=80", "man", "-P", "cat", "halcyon").stdout
    # (mdoc's name dash is "--" in the C locale, "—" in UTF-8)
    assert re.search(r"^NAME\n\s+halcyon (--|—) Talk to", page, re.MULTILINE), page[:1000]
    for text in ["SYNOPSIS", "halcyon top", "--interval", "FILES", "/run/halcyon/halcyon.sock", "SEE ALSO"]:
        assert text in page, f"{text!r} is not in man halcyon:\n{page[:3000]}"
    daemon_page = debian_root.run("env", "MANWIDTH=80", "man", "-P", "cat", "8", "halcyond").stdout
    for text in ["halcyond -- ", "--socket", "--metrics-listen", "FILES", "/var/cache/halcyon"]:
        assert text in daemon_page, f"{text!r} is not in man 8 halcyond:\n{daemon_page[:3000]}"
    dashboard = json.loads((debian_root.path / "usr/share/halcyon/grafana-dashboard.json").read_text())
    assert dashboard["uid"] == "halcyon-overview" and dashboard["panels"]
