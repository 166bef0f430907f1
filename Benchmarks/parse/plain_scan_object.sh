# Sourced by the scripts in this folder that compile Swift against CHalcyonSystem without
# a package build: `plain_scan_object OUT ROOT` writes OUT/CHalcyonSystem/module.modulemap
# for the C target's header (pass `-I OUT/CHalcyonSystem` to swiftc) and compiles the
# plain-string scan to OUT/plain_ascii.o (link it in).
plain_scan_object() {
    local out="$1" root="$2"
    mkdir -p "$out/CHalcyonSystem"
    printf 'module CHalcyonSystem {\n    header "%s"\n    export *\n}\n' \
        "$root/Sources/CHalcyonSystem/include/CHalcyonSystem.h" >"$out/CHalcyonSystem/module.modulemap"
    cc -O2 -c -I "$root/Sources/CHalcyonSystem/include" -o "$out/plain_ascii.o" \
        "$root/Sources/CHalcyonSystem/plain_ascii.c"
}
