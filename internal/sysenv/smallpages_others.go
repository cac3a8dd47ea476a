//go:build !linux

package sysenv

// SmallPages does nothing off Linux: transparent huge pages and
// PR_SET_THP_DISABLE are Linux's.
func SmallPages() {}

// SmallPagesFromStart does nothing off Linux.
func SmallPagesFromStart() {}
