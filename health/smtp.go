package health

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"time"
)

// SMTP limits: RFC 5321 (4.5.3.1.5) bounds a reply line at 512 octets;
// a reply, a greeting with a banner say, may hold several. A probe reads
// no more than this.
const (
	smtpLineMax  = 1024
	smtpLinesMax = 64
)

// probeSMTP holds the conversation keepalived's SMTP_CHECK holds: the
// greeting must be 220, the reply to "HELO name" 250; then QUIT, whose
// reply must come but whose code is not judged (the conversation is
// over). Replies of several lines ("220-...", then "220 ...") are read
// whole. The connection then ends with a reset, as a tcp probe's does:
// no TIME_WAIT on the director for each probe.
func probeSMTP(ctx context.Context, addr netip.AddrPort, d *net.Dialer, c *config) error {
	conn, err := d.DialContext(ctx, "tcp", addr.String())
	if err != nil {
		return failure(err, "connect "+addr.String())
	}
	defer func() {
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		conn.Close()
	}()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	// A cancellation before the deadline ends the wait too.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	r := bufio.NewReaderSize(conn, smtpLineMax)
	if err := smtpExpect(r, "greeting", 220); err != nil {
		return err
	}
	if _, err := io.WriteString(conn, "HELO "+c.spec.Helo+"\r\n"); err != nil {
		return failure(err, "smtp HELO")
	}
	if err := smtpExpect(r, "HELO", 250); err != nil {
		return err
	}
	if _, err := io.WriteString(conn, "QUIT\r\n"); err != nil {
		return failure(err, "smtp QUIT")
	}
	return smtpExpect(r, "QUIT", 0)
}

// smtpExpect reads a reply, the answer to what, and checks its code (0:
// any).
func smtpExpect(r *bufio.Reader, what string, want int) error {
	code, text, err := smtpReply(r)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return &probeError{"smtp " + what + ": connection closed", err}
		}
		var pe *probeError
		if errors.As(err, &pe) {
			return &probeError{"smtp " + what + ": " + pe.msg, err}
		}
		return failure(err, "smtp "+what)
	}
	if want != 0 && code != want {
		return fmt.Errorf("smtp %s: %d %s, want %d", what, code, quoteShort(text), want)
	}
	return nil
}

// smtpReply reads one reply: its code and the text of its last line.
func smtpReply(r *bufio.Reader) (code int, text string, err error) {
	for n := 1; ; n++ {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return 0, "", &probeError{msg: fmt.Sprintf("reply line over %d bytes", smtpLineMax), err: err}
		}
		if err != nil {
			return 0, "", err
		}
		line = line[:len(line)-1]
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		// Reply-line: a code, then "-" and text on every line but the
		// last, which has " " and text, or nothing (RFC 5321 4.2).
		c, cerr := strconv.Atoi(string(line[:min(3, len(line))]))
		if len(line) < 3 || cerr != nil || c < 100 || c > 599 || (len(line) > 3 && line[3] != ' ' && line[3] != '-') {
			return 0, "", &probeError{msg: "bad reply line " + quoteShort(string(line))}
		}
		if n > 1 && c != code {
			return 0, "", &probeError{msg: fmt.Sprintf("reply of codes %d and %d", code, c)}
		}
		code = c
		if len(line) == 3 || line[3] == ' ' {
			if len(line) > 4 {
				text = string(line[4:])
			}
			return code, text, nil
		}
		if n == smtpLinesMax {
			return 0, "", &probeError{msg: fmt.Sprintf("reply over %d lines", smtpLinesMax)}
		}
	}
}

// quoteShort quotes s for a message, cut to 64 bytes.
func quoteShort(s string) string {
	if len(s) > 64 {
		return strconv.Quote(s[:64]) + "..."
	}
	return strconv.Quote(s)
}
