package kongmsg

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"
)

type cli struct {
	Addr    string        `name:"addr" placeholder:"ADDR"`
	Wait    time.Duration `name:"wait" default:"5s"`
	Count   int           `name:"count"`
	Proto   string        `name:"proto" enum:"tcp,udp" default:"tcp"`
	Listen  string        `name:"listen" placeholder:"ADDR"`
	Unknown string        `name:"unknown"`
}

// TestMessage: kong's words for a missing value become the flag's.
func TestMessage(t *testing.T) {
	for args, want := range map[string]string{
		"--addr":         "--addr needs a value (an address)",
		"--wait":         "--wait needs a value (a duration such as 5s)",
		"--count":        "--count needs a value (a number)",
		"--proto":        "--proto needs a value (one of tcp, udp)",
		"--listen":       "--listen needs a value (HOST:PORT)",
		"--unknown":      "--unknown needs a value",
		"--addr --count": "--addr needs a value (an address), not --count; write --addr=--count if --count is its value",
		"--count x":      `--count: expected a valid 64 bit int but got "x"`,
	} {
		var c cli
		p, err := kong.New(&c, kong.Writers(io.Discard, io.Discard))
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Parse(strings.Fields(args))
		var pe *kong.ParseError
		if !errors.As(err, &pe) {
			t.Fatalf("%s: %v", args, err)
		}
		if got := Message(err, pe.Context, map[string]string{"listen": "HOST:PORT"}); got != want {
			t.Errorf("%s: %q, want %q", args, got, want)
		}
	}
}
