#!/usr/bin/env bash
# Builds brine's Debian package from a release build and prints the .deb's
# path as the last line of its output.
#
# The release build is build/release (configured if absent, else brought up
# to date); BRINE_JOBS sets the build's parallel jobs (default: one per core).
# The package is assembled by hand and packed with dpkg-deb rather than by
# CPack: every file's path, mode and owner is written here in one place (and
# checked by tests/integration/test_package.py), conffiles and maintainer
# scripts are plain files in packaging/deb/, and nothing in the CMake build
# has to know about Debian. Depends comes from dpkg-shlibdeps on the
# binaries; libpq5, libgit2-1.5 and libmicrohttpd12, which brine dlopens only when a config
# asks for them, are Suggests (packaging/deb/control.in).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
src=packaging/deb
bash scripts/deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j"${BRINE_JOBS:-$(nproc)}" --target brine >/dev/null

out=build/package
stage=$out/root
rm -rf "$stage"
mkdir -p "$stage"
umask 022

# The two binaries: brine hands the daemons to brine-dynamic in its own
# directory (src/app/static_client.cc).
cmake --install build/release --prefix "$stage/usr" --strip >/dev/null
installed=$(cd "$stage" && find . -type f | LC_ALL=C sort | tr '\n' ' ')
if [ "$installed" != "./usr/bin/brine ./usr/bin/brine-dynamic " ]; then
  echo "package.sh: cmake --install installed $installed; expected usr/bin/brine and usr/bin/brine-dynamic (is build/release a release build?)" >&2
  exit 1
fi
version=$("$stage/usr/bin/brine" --version | sed -n 's/^brine //p')
listed=$(dpkg-parsechangelog -l "$src/changelog" -S Version)
if [ "$version" != "$listed" ]; then
  echo "package.sh: brine --version says $version but $src/changelog's top entry is $listed: add an entry for $version" >&2
  exit 1
fi

install -D -m 644 "$src/brine-master.service" "$stage/lib/systemd/system/brine-master.service"
install -D -m 644 "$src/brine-minion.service" "$stage/lib/systemd/system/brine-minion.service"
install -d -m 755 "$stage/etc/brine"
install -m 644 "$src/master" "$src/minion" "$stage/etc/brine/"
# Keys and the job cache: the daemons make these 0700 too (base::ensure_dir);
# shipping them means the master unit's ReadWritePaths exists at its start.
install -d -m 700 "$stage/etc/brine/pki" "$stage/etc/brine/pki/master" "$stage/etc/brine/pki/minion"
install -d -m 700 "$stage/var/cache/brine" "$stage/var/cache/brine/master" "$stage/var/cache/brine/minion"
doc=$stage/usr/share/doc/brine
install -d -m 755 "$doc"
install -m 644 "$src/copyright" "$doc/copyright"
gzip -9n <"$src/changelog" >"$doc/changelog.gz"
gzip -9n <README.md >"$doc/README.md.gz"
gzip -9n <docs/configuration.md >"$doc/configuration.md.gz"
chmod 644 "$doc"/*.gz

install -d -m 755 "$stage/DEBIAN"
install -m 755 "$src/postinst" "$src/prerm" "$src/postrm" "$stage/DEBIAN/"
printf '%s\n' /etc/brine/master /etc/brine/minion >"$stage/DEBIAN/conffiles"
(cd "$stage" && find . -type f ! -path './DEBIAN/*' ! -path './etc/*' -printf '%P\0' |
  LC_ALL=C sort -z | xargs -0 md5sum) >"$stage/DEBIAN/md5sums"

# Depends: the shared libraries brine-dynamic loads at start (glibc's);
# brine is static, with no dynamic section for dpkg-shlibdeps to read, and
# needs nothing at run time but brine-dynamic. dpkg-shlibdeps wants a
# debian/control.
shlibs=$(mktemp -d)
trap 'rm -rf "$shlibs"' EXIT
mkdir "$shlibs/debian"
printf 'Source: brine\n\nPackage: brine\nArchitecture: any\n' >"$shlibs/debian/control"
depends=$(cd "$shlibs" && dpkg-shlibdeps -O -e"$root/$stage/usr/bin/brine-dynamic" |
  sed -n 's/^shlibs:Depends=//p')
if [ -z "$depends" ]; then
  echo "package.sh: dpkg-shlibdeps found no dependencies for brine-dynamic" >&2
  exit 1
fi
# Built-Using: the sources of the archives whose licences ask for them
# (glibc, static in brine; libstdc++ and libgcc, static in both).
cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' build/release/CMakeCache.txt)
built_using=$(for a in libc.a libstdc++.a; do dpkg -S "$(readlink -f "$("$cxx" -print-file-name=$a)")"; done |
  cut -d: -f1 | LC_ALL=C sort -u |
  xargs dpkg-query -W -f='${source:Package} (= ${source:Version})\n' | paste -sd, | sed 's/,/, /g')
arch=$(dpkg --print-architecture)
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@INSTALLED_SIZE@/$size/" \
  -e "s/@DEPENDS@/$depends/" -e "s/@BUILT_USING@/$built_using/" "$src/control.in" \
  >"$stage/DEBIAN/control"

deb=$out/brine_${version}_${arch}.deb
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
echo "brine $version ($arch): $(du -h "$deb" | cut -f1) packed, ${size} KiB installed"
echo "$root/$deb"
