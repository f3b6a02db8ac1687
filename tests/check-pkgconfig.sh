#!/bin/sh
# check-pkgconfig.sh -- uvmrt.pc is enough to build against an installed uvmrt.
#
# Run by `make check` in the build directory. Installs the library, header and
# uvmrt.pc into a temporary DESTDIR, then compiles tests/pkgconfig-user.c as an
# outside project would, with only pkg-config's flags:
#   shared:  cc $(pkg-config --cflags --libs uvmrt)
#   static:  cc $(pkg-config --static --cflags --libs uvmrt), in a copy of the
#            prefix without libuvmrt.so, so -luvmrt can only be libuvmrt.a and
#            every dependency must come from Libs.private / Requires.private
# and runs each on the sim backend. Then the README's static recipe as written (the
# line ending "# libuvmrt.a"), in the whole prefix with libuvmrt.so beside
# libuvmrt.a: the program must not need libuvmrt.so. The build's own CFLAGS/LDFLAGS
# ($UVMRT_BUILD_CFLAGS/_LDFLAGS) are added, so that a sanitizer build's
# instrumented library links too. A copy of the installed uvmrt.pc with its
# prefix= line pointed into DESTDIR stands for the relocated install
# (PKG_CONFIG_SYSROOT_DIR or --define-variable would move jansson's and CUDA's
# paths too). Skips (77) without pkg-config; the static half skips
# when configured --disable-static, the shared half with --disable-shared.

: "${top_srcdir:=.}" "${MAKE:=make}" "${CC:=cc}" "${PKG_CONFIG:=pkg-config}"
command -v "${PKG_CONFIG%% *}" >/dev/null 2>&1 || { echo "SKIP: no pkg-config"; exit 77; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-pkgconfig.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
dest=$tmp/dest

# Only what a library user needs; install-exec/data would relink the example programs.
if ! $MAKE -s install-libLTLIBRARIES install-includeHEADERS install-pkgconfigDATA \
        DESTDIR="$dest" >"$tmp/install.log" 2>&1; then
    cat "$tmp/install.log"
    echo "FAIL: make install into DESTDIR=$dest"
    exit 1
fi
pc=$(find "$dest" -name uvmrt.pc | head -n 1)
[ -n "$pc" ] || { echo "FAIL: no uvmrt.pc installed under $dest"; exit 1; }
pcdir=$(dirname "$pc")
libdir=$(dirname "$pcdir")

status=0
ran=0
# try NAME PREFIX-ROOT PKG-CONFIG-ARGS...
try() {
    name=$1 root=$2
    shift 2
    pcpath=$tmp/pc-$name
    mkdir -p "$pcpath"
    prefix=$(sed -n 's/^prefix=//p' "$pc")
    sed "s|^prefix=.*|prefix=$root$prefix|" "$pc" >"$pcpath/uvmrt.pc"
    flags=$(PKG_CONFIG_PATH=$pcpath $PKG_CONFIG "$@" --cflags --libs uvmrt) || {
        echo "FAIL: $name: $PKG_CONFIG $* --cflags --libs uvmrt"; status=1; return; }
    echo "$name: $CC pkgconfig-user.c $flags"
    # shellcheck disable=SC2086 # flags are words
    if ! $CC ${UVMRT_BUILD_CFLAGS-} -o "$tmp/user-$name" "$top_srcdir/tests/pkgconfig-user.c" $flags \
            ${UVMRT_BUILD_LDFLAGS-} >"$tmp/$name.log" 2>&1; then
        cat "$tmp/$name.log"
        echo "FAIL: $name link"
        status=1
        return
    fi
    if ! LD_LIBRARY_PATH=$root${libdir#"$dest"}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
            UVMRT_BACKEND=sim "$tmp/user-$name"; then
        echo "FAIL: $name: the linked program failed"
        status=1
        return
    fi
    ran=$((ran + 1))
}

if ls "$libdir"/libuvmrt.so >/dev/null 2>&1; then
    try shared "$dest"
else
    echo "shared: no libuvmrt.so installed (--disable-shared), skipped"
fi
if [ -f "$libdir/libuvmrt.a" ]; then
    cp -R "$dest" "$tmp/static"
    rm -f "$tmp/static${libdir#"$dest"}"/libuvmrt.so*
    try static "$tmp/static" --static
    if [ -f "$tmp/user-static" ] && command -v ldd >/dev/null 2>&1 &&
            ldd "$tmp/user-static" | grep -q libuvmrt; then
        echo "FAIL: static: the program still needs libuvmrt.so"
        status=1
    fi
else
    echo "static: no libuvmrt.a installed (--disable-static), skipped"
fi
recipe=$(sed -n 's/^cc app\.c \(.*[^ ]\) *# libuvmrt\.a$/\1/p' "$top_srcdir/README.md")
if [ -z "$recipe" ]; then
    echo "FAIL: README.md has no static recipe (a line \"cc app.c ... # libuvmrt.a\")"
    status=1
elif [ -f "$libdir/libuvmrt.a" ]; then
    mkdir -p "$tmp/pc-readme"
    sed "s|^prefix=.*|prefix=$dest$(sed -n 's/^prefix=//p' "$pc")|" "$pc" >"$tmp/pc-readme/uvmrt.pc"
    cp "$top_srcdir/tests/pkgconfig-user.c" "$tmp/app.c"
    echo "README static: cc app.c $recipe"
    # shellcheck disable=SC2086 # the recipe is words, with its $(...) run by eval
    if ! (cd "$tmp" && PKG_CONFIG_PATH=$tmp/pc-readme && export PKG_CONFIG_PATH &&
            eval "$CC ${UVMRT_BUILD_CFLAGS-} -o user-readme app.c $recipe ${UVMRT_BUILD_LDFLAGS-}") \
            >"$tmp/readme.log" 2>&1; then
        cat "$tmp/readme.log"
        echo "FAIL: README static recipe: link"
        status=1
    elif command -v ldd >/dev/null 2>&1 && ldd "$tmp/user-readme" | grep -q libuvmrt; then
        echo "FAIL: README static recipe: the program needs libuvmrt.so (not a static link of uvmrt)"
        status=1
    elif ! UVMRT_BACKEND=sim "$tmp/user-readme"; then
        echo "FAIL: README static recipe: the linked program failed"
        status=1
    else
        ran=$((ran + 1))
    fi
fi
[ $status -eq 0 ] && [ $ran -eq 0 ] && exit 77
[ $status -eq 0 ] && echo "PASS: $ran links through uvmrt.pc"
exit $status
