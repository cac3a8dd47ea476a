#!/bin/sh
# deps.sh PACKAGE...: installs the Debian packages that are missing, in one
# apt-get call, and says which. As another user than root it names them and
# the command that installs them, and fails. Another apt-get holding apt's
# locks is waited for (up to 10 minutes), not a failure.
set -eu
# deps.sh --foreign-arch ARCH...: dpkg knows each ARCH (dpkg
# --add-architecture, then apt-get update), so apt-get download finds its
# packages; nothing of ARCH is installed.
if [ "${1:-}" = --foreign-arch ]; then
	shift
	add=
	for a in "$@"; do
		dpkg --print-foreign-architectures | grep -qx "$a" || add="$add $a"
	done
	add=${add# }
	[ -z "$add" ] && { echo "deps: dpkg knows the architectures $*"; exit 0; }
	if [ "$(id -u)" != 0 ]; then
		echo "deps: dpkg does not know the architectures $add; as root: dpkg --add-architecture ARCH (each) && apt-get update" >&2
		exit 1
	fi
	for a in $add; do dpkg --add-architecture "$a"; done
	echo "deps: added the architectures $add to dpkg"
	apt-get update -q -o DPkg::Lock::Timeout=600 >/dev/null
	exit 0
fi
missing=
for p in "$@"; do
	dpkg-query -W -f '${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || missing="$missing $p"
done
missing=${missing# }
if [ -z "$missing" ]; then
	echo "deps: all $# Debian packages are installed"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "deps: missing Debian packages: $missing" >&2
	echo "deps: install them as root: apt-get update && apt-get install -y --no-install-recommends $missing" >&2
	exit 1
fi
echo "deps: installing Debian packages: $missing"
i=0
until out=$(apt-get update -q 2>&1); do
	case $out in
	*"Could not get lock"*)
		i=$((i + 1))
		[ "$i" = 1 ] && echo "deps: waiting for another apt-get to finish"
		[ "$i" -ge 120 ] && { echo "$out" >&2; exit 1; }
		sleep 5
		;;
	*) echo "$out" >&2; exit 1 ;;
	esac
done
# shellcheck disable=SC2086 # one word per package
DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=600 --no-install-recommends $missing
