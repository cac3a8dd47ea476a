#!/bin/sh
# lab-root.sh ARCH DIR PACKAGE...: the guest files of a lab for a foreign
# architecture. Downloads the Debian packages (ARCH's build of each, and of
# everything they depend on) with apt-get download, unpacks them with
# dpkg-deb -x into DIR (nothing is installed on the host), merges /bin,
# /sbin and /lib into /usr as Debian 12 does, and runs the host's depmod on
# the kernel's modules (a package's postinst would). DIR/.packages lists
# the .deb files it was made of; the same list again changes nothing.
# Needs `dpkg --add-architecture ARCH && apt-get update` (make deps).
set -eu
[ $# -ge 3 ] || { echo "usage: lab-root.sh ARCH DIR PACKAGE..." >&2; exit 2; }
arch=$1 dir=$(realpath -m "$2")
shift 2
if ! dpkg --print-foreign-architectures | grep -qx "$arch"; then
	echo "lab-root: dpkg does not know the architecture $arch: run make deps as root (dpkg --add-architecture $arch; apt-get update)" >&2
	exit 1
fi
roots=
for p in "$@"; do roots="$roots $p:$arch"; done
# Every package the roots depend on, as apt resolves it for ARCH; the
# architecture-independent ones (arch all) have no :ARCH name and carry no
# programs or libraries the image takes.
# shellcheck disable=SC2086 # one word per package
pkgs=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
	--no-replaces --no-enhances $roots | grep -E "^[a-z0-9][a-z0-9.+-]*:$arch\$" | LC_ALL=C sort -u)
[ -n "$pkgs" ] || { echo "lab-root: apt-cache resolved nothing for:$roots" >&2; exit 1; }
debs=$dir.debs
mkdir -p "$debs"
# shellcheck disable=SC2086
(cd "$debs" && apt-get download -q $pkgs >/dev/null 2>"$debs.log") || { cat "$debs.log" >&2; exit 1; }
want=$(for p in $pkgs; do n=${p%:*}; ls "$debs/${n}_"*"_$arch.deb" 2>/dev/null | sort -V | tail -n 1; done)
if [ -f "$dir/.packages" ] && [ "$(cat "$dir/.packages")" = "$want" ]; then
	echo "lab-root: $dir is up to date ($(echo "$want" | wc -l) packages)"
	exit 0
fi
rm -rf "$dir.tmp"
mkdir -p "$dir.tmp"
for d in $want; do dpkg-deb -x "$d" "$dir.tmp"; done
for d in bin sbin lib; do
	if [ -d "$dir.tmp/$d" ] && [ ! -L "$dir.tmp/$d" ]; then
		mkdir -p "$dir.tmp/usr/$d"
		cp -a "$dir.tmp/$d/." "$dir.tmp/usr/$d/"
		rm -rf "${dir:?}.tmp/$d"
	fi
	ln -sfn "usr/$d" "$dir.tmp/$d"
done
for m in "$dir.tmp"/usr/lib/modules/*; do
	[ -d "$m" ] && depmod -b "$dir.tmp" "$(basename "$m")"
done
echo "$want" > "$dir.tmp/.packages"
rm -rf "$dir"
mv "$dir.tmp" "$dir"
echo "lab-root: $dir: $(echo "$want" | wc -l) $arch packages unpacked"
