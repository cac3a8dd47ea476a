// Package version holds the project's own version.
//
// The Makefile stamps it at build time from `git describe`. ipvsadm's -v
// output is ipvsadm's, not this; this is what the companion tools and
// packages report.
package version

// Version is overridden with -ldflags "-X github.com/lvskit/lvskit/internal/version.Version=...".
var Version = "dev"
