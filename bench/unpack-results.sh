#!/usr/bin/env bash
#
# unpack-results.sh -- the raw files of a packed run directory (bench/pack-results.sh)
# back beside its summaries, or into another folder.
#
#   bench/unpack-results.sh DIR [DEST]
#
# DIR: a run directory under bench/results with a raw.tar.xz, or a folder inside one
# (e.g. bench/results/2026-12-01-plan6/r18-handset: the archive is found in a parent).
# DEST (default: the directory that holds the archive) gets the archive's files, then
# a copy of the summaries when DEST is elsewhere, so DEST is the whole run as it was.
# Prints the path that corresponds to DIR inside DEST. Archives inside (records.tgz,
# records-reports.tgz) are left packed: `tar xzf` them where they are when needed.
set -euo pipefail
dir=${1:?usage: bench/unpack-results.sh DIR [DEST]}
[ -d "$dir" ] || { echo "unpack-results.sh: $dir: not a directory" >&2; exit 2; }
top=$(cd "$dir" && pwd)
sub=
while [ ! -f "$top/raw.tar.xz" ]; do
    [ "$top" != / ] && [ "$(basename "$top")" != results ] ||
        { echo "unpack-results.sh: no raw.tar.xz in $dir or a parent run directory" >&2; exit 2; }
    sub=$(basename "$top")${sub:+/$sub}
    top=$(dirname "$top")
done
dest=${2:-$top}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
xz -dc "$top/raw.tar.xz" | tar -xf - -C "$dest"
if [ "$dest" != "$top" ]; then
    (cd "$top" && find . -type f ! -name raw.tar.xz | while read -r f; do
        mkdir -p "$dest/$(dirname "$f")" && cp "$f" "$dest/$f"
    done)
fi
echo "$dest${sub:+/$sub}"
