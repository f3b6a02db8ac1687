#!/usr/bin/env bash
#
# pack-results.sh -- packs a finished run directory under bench/results for the tree:
# its summaries stay as files (READMEs and tables *.md, notes *.txt, the commands
# *.sh, and every profile.json, which bench/run-plan.sh's PROFILE= and the calibration
# tables read), everything else (the raw JSON results, records, reports, CSVs and
# archives) goes into one DIR/raw.tar.xz, with paths relative to DIR, and is removed.
#
#   bench/pack-results.sh DIR...
#
# Run it on a run directory before committing it. The archive is reproducible (sorted
# names, owner root, mtime 0): packing the same files again gives the same bytes.
# bench/unpack-results.sh undoes it.
set -euo pipefail
keep() { # the summaries: stay in the tree
    case $1 in *.md | *.txt | *.sh | */profile.json | profile.json | raw.tar.xz) return 0 ;; esac
    return 1
}
for dir in "$@"; do
    [ -d "$dir" ] || { echo "pack-results.sh: $dir: not a directory" >&2; exit 2; }
    if [ -e "$dir/raw.tar.xz" ]; then
        echo "pack-results.sh: $dir/raw.tar.xz exists already (bench/unpack-results.sh it first)" >&2
        exit 2
    fi
    list=$(mktemp)
    (cd "$dir" && find . -type f | sed 's|^\./||' | LC_ALL=C sort) | while read -r f; do
        keep "$f" || printf '%s\n' "$f"
    done >"$list"
    if [ ! -s "$list" ]; then
        echo "pack-results.sh: $dir: nothing to pack"
        rm -f "$list"
        continue
    fi
    (cd "$dir" && tar --no-recursion --owner=0 --group=0 --numeric-owner --mtime=@0 \
        -T "$list" -cf - | xz -9e -T1 >raw.tar.xz)
    (cd "$dir" && tr '\n' '\0' <"$list" | xargs -0 rm -f)
    find "$dir" -mindepth 1 -type d -empty -delete
    echo "pack-results.sh: $dir: $(wc -l <"$list") files -> $dir/raw.tar.xz ($(du -k "$dir/raw.tar.xz" | cut -f1) KiB)"
    rm -f "$list"
done
