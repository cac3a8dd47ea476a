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
# apt's own output goes to a log; the terminal gets what is installed, how
# much, and a line at the end.
mkdir -p .cache
log=.cache/deps.log
: >"$log"
echo "deps: updating apt's package lists (apt's output: $log)"
i=0
until apt-get update -q >>"$log" 2>&1; do
	if grep -q "Could not get lock" "$log"; then
		i=$((i + 1))
		[ "$i" = 1 ] && echo "deps: waiting for another apt-get to finish"
		[ "$i" -ge 120 ] && { tail -5 "$log" >&2; exit 1; }
		sleep 5
		continue
	fi
	tail -5 "$log" >&2
	exit 1
done
# shellcheck disable=SC2086 # one word per package
plan=$(apt-get install -s -o DPkg::Lock::Timeout=600 --no-install-recommends $missing 2>>"$log")
count=$(printf '%s\n' "$plan" | grep -c '^Inst ' || true)
# What apt downloads: the sizes of the files it has not cached yet.
# shellcheck disable=SC2086
mb=$(apt-get install --print-uris -qq -o DPkg::Lock::Timeout=600 --no-install-recommends $missing 2>>"$log" |
	awk '{ n += $3 } END { printf "%.0f", n / 1e6 }')
echo "deps: installing $(echo "$missing" | wc -w) Debian packages, $count with their dependencies ($mb MB to download): $missing"
start=$(date +%s)
# shellcheck disable=SC2086 # one word per package
if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=600 --no-install-recommends $missing >>"$log" 2>&1; then
	tail -20 "$log" >&2
	echo "deps: apt-get install failed; its whole output is in $log" >&2
	exit 1
fi
echo "deps: installed $count packages in $(($(date +%s) - start)) s"
