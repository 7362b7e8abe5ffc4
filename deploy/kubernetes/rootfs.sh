#!/bin/sh
# The image's whole file system, from this machine and offline: the c1m binary, the
# shared libraries it links (as ldd lists them), and the /bin/sh and sleep that the
# manifests' scripts run. deploy/kubernetes/Containerfile copies it onto `FROM scratch`.
#   deploy/kubernetes/rootfs.sh BINARY DIR    (DIR must not exist)
# `cargo xtask image` runs it for target/release/c1m; the podman test
# (c1m-userspace/tests/deploy_podman.rs) for the binary it tests.
set -eu
if [ $# -ne 2 ]; then
    echo "usage: $0 BINARY DIR" >&2
    exit 2
fi
bin=$1
out=$2
if [ -e "$out" ]; then
    echo "$out exists: give a new folder" >&2
    exit 2
fi
mkdir -p "$out/usr/local/bin" "$out/bin" "$out/tmp" "$out/etc"
chmod 1777 "$out/tmp"
cp "$bin" "$out/usr/local/bin/c1m"
# cp follows the symbolic link: /bin/sh is dash on Debian.
cp /bin/sh "$out/bin/sh"
cp "$(command -v sleep)" "$out/bin/sleep"
# The libraries and the dynamic loader, at the paths the binaries name (glibc resolves
# /etc/hosts itself: no NSS module is needed for the Service name's hostAliases entry).
ldd "$bin" /bin/sh "$(command -v sleep)" |
    awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// && $1 !~ /:$/ { print $1 }' |
    sort -u |
    while read -r lib; do
        mkdir -p "$out$(dirname "$lib")"
        cp -L "$lib" "$out$lib"
    done
