//go:build !linux

package health

import (
	"context"
	"sync"
)

// tcpProbe is an inline TCP probe under way; there are none here.
type tcpProbe struct{}

// probeInline runs no probe inline here: TCP probes dial on a goroutine
// of their own, as other types do.
func (c *Checker) probeInline(context.Context, *entry, *sync.WaitGroup) bool { return false }

func (c *Checker) stopInline(*sync.WaitGroup) {}
