package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// serveSMTP answers each connection on ln as a mail server answers the
// health checks of keepalived's SMTP_CHECK and lvsctl's smtp check: a
// "220 NAME ESMTP" greeting, 250 to HELO and EHLO, 221 to QUIT (then it
// closes), 502 to anything else. While refuse says so, it greets with
// "554 NAME no service" and closes instead. It waits pause before each
// greeting, as a server with a greeting delay does. It serves until ctx
// ends.
func serveSMTP(ctx context.Context, name string, ln net.Listener, pause time.Duration, refuse func() bool) error {
	return acceptLoop(ctx, ln, func(c net.Conn) {
		go converseSMTP(c, name, pause, refuse != nil && refuse())
	})
}

func converseSMTP(c net.Conn, name string, pause time.Duration, refuse bool) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	time.Sleep(pause)
	if refuse {
		fmt.Fprintf(c, "554 %s no service\r\n", name)
		return
	}
	fmt.Fprintf(c, "220 %s ESMTP\r\n", name)
	r := bufio.NewReader(io.LimitReader(c, 64<<10))
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		verb, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch strings.ToUpper(verb) {
		case "HELO", "EHLO":
			fmt.Fprintf(c, "250 %s\r\n", name)
		case "QUIT":
			fmt.Fprintf(c, "221 %s closing\r\n", name)
			return
		default:
			fmt.Fprint(c, "502 5.5.2 not here\r\n")
		}
	}
}
