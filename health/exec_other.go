//go:build !unix

package health

import (
	"context"
	"errors"
)

func probeExec(context.Context, Target, *config) error {
	return errors.New("exec: not on this system")
}
