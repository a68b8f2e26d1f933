#!/usr/bin/env bash
# Usage: apt_repo.sh DIR NAME=VERSION...
#
# Builds a local, unsigned apt repository in DIR/repo with one tiny
# architecture-all package per NAME=VERSION (dpkg-deb; each installs
# /usr/share/doc/NAME/brine-test holding "NAME VERSION"), indexes it with
# apt-ftparchive, and writes DIR/apt.conf, which makes apt see that
# repository and nothing else, with its lists and caches under DIR. With
# APT_CONFIG=DIR/apt.conf, apt-get update, install and remove run for real
# against the machine's dpkg database, with no network. The caller removes
# what it installed.
set -euo pipefail
dir=$1
shift
# apt reads file: sources as its _apt user: the tree must be readable.
chmod 755 "$dir"
mkdir -p "$dir/repo" "$dir/build" "$dir/lists/partial" "$dir/cache/archives/partial" \
  "$dir/sources.list.d" "$dir/preferences.d"
for spec in "$@"; do
  name=${spec%%=*}
  version=${spec#*=}
  root="$dir/build/$name-$version"
  mkdir -p "$root/DEBIAN" "$root/usr/share/doc/$name"
  cat > "$root/DEBIAN/control" <<EOF
Package: $name
Version: $version
Architecture: all
Maintainer: brine tests <tests@brine.invalid>
Section: misc
Priority: optional
Description: a package that brine's tests install and remove
EOF
  echo "$name $version" > "$root/usr/share/doc/$name/brine-test"
  dpkg-deb --build --root-owner-group "$root" "$dir/repo/${name}_${version}_all.deb" >/dev/null
done
(cd "$dir/repo" && apt-ftparchive packages . > Packages && apt-ftparchive release . > Release)
echo "deb [trusted=yes] file:$dir/repo ./" > "$dir/sources.list"
cat > "$dir/apt.conf" <<EOF
Dir::Etc::SourceList "$dir/sources.list";
Dir::Etc::SourceParts "$dir/sources.list.d";
Dir::Etc::Preferences "$dir/preferences";
Dir::Etc::PreferencesParts "$dir/preferences.d";
Dir::State::Lists "$dir/lists";
Dir::Cache "$dir/cache";
EOF
echo "$dir/apt.conf"
