// Package packaging holds lvskit's Debian and RPM packaging and its tests.
//
// It holds the nfpm configuration (nfpm.yaml) that `make deb` feeds to the
// nfpm Go tool, the systemd units and the script they run (ipvsadm-service),
// the /etc/default/ipvsadm and /etc/ipvsadm.rules conffiles, the maintainer
// scripts, the copyright file, the changelog and the lintian overrides.
//
// Its tests build the .deb from a fresh clone of the tree, check it with
// lintian, install it into a throw-away root with dpkg (also over Debian's
// own ipvsadm package, which it must replace), compare the installed
// ipvsadm with Debian's, and check the `make install` layout. The service
// script is tested against a fake ipvsadm. A lab test installs the .deb
// with dpkg over Debian's ipvsadm against the lab's kernel, upgrades it
// from the previous version and purges it (amd64 and arm64); the arm64
// programs also run under qemu-aarch64-static on the host. The files are
// data; this package has no Go API.
package packaging
