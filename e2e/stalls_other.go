//go:build !linux

package e2e

import "errors"

// realTime needs Linux's sched_setattr.
func realTime() error { return errors.New("real-time priority: Linux only") }
