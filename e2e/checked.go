package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// serveChecked serves what health checks probe, one listener per spec
// KIND/ADDR:PORT: tcp (an HTTP server answering 200 to any request, which
// also passes a bare connect), https (the same over TLS with a
// self-signed certificate), udp (echoes each datagram), dns (answers
// every query NOERROR with one record of the type asked), smtp (a mail
// server, serveSMTP), smtp554 (one that greets with 554) and smtpslow (one
// that greets after 200 ms). It prints "ready" once all listen and serves
// until ctx ends.
func serveChecked(ctx context.Context, specs []string, stdout io.Writer) error {
	var cert *tls.Certificate
	var closers []io.Closer
	defer func() {
		for _, c := range closers {
			c.Close()
		}
	}()
	for _, spec := range specs {
		kind, addr, ok := strings.Cut(spec, "/")
		if !ok {
			return fmt.Errorf("%q: want KIND/ADDR:PORT", spec)
		}
		switch kind {
		case "tcp", "https":
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return err
			}
			closers = append(closers, ln)
			if kind == "https" {
				if cert == nil {
					if cert, err = selfSigned(); err != nil {
						return err
					}
				}
				ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{*cert}})
			}
			go acceptHTTP(ln)
		case "smtp", "smtp554", "smtpslow":
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return err
			}
			closers = append(closers, ln)
			refuse, pause := kind == "smtp554", time.Duration(0)
			if kind == "smtpslow" {
				pause = 200 * time.Millisecond
			}
			go serveSMTP(ctx, "mx."+strings.NewReplacer(":", "-", "[", "", "]", "").Replace(addr)+".test", ln, pause, func() bool { return refuse })
		case "udp", "dns":
			pc, err := net.ListenPacket("udp", addr)
			if err != nil {
				return err
			}
			closers = append(closers, pc)
			go serveDatagrams(ctx, pc, kind == "dns")
		default:
			return fmt.Errorf("%q: kind tcp, https, udp, dns, smtp, smtp554 or smtpslow", spec)
		}
	}
	fmt.Fprintln(stdout, "ready")
	<-ctx.Done()
	return nil
}

func acceptHTTP(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			br := bufio.NewReader(c)
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					return // a bare connect: nothing to answer
				}
				if strings.TrimSpace(line) == "" {
					break
				}
			}
			io.WriteString(c, "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n")
		}()
	}
}

func serveDatagrams(ctx context.Context, pc net.PacketConn, dns bool) {
	answerDatagrams(ctx, pc, func(q []byte) []byte {
		if !dns {
			return q
		}
		a, _ := dnsAnswer(q)
		return a
	})
}

// dnsAnswer answers q with one record of the type asked (A, AAAA or SOA;
// any other type gets an A record's worth of TXT).
func dnsAnswer(q []byte) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(q)
	if err != nil {
		return nil, err
	}
	question, err := p.Question()
	if err != nil {
		return nil, err
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired})
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(question); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	rh := dnsmessage.ResourceHeader{Name: question.Name, Type: question.Type, Class: dnsmessage.ClassINET, TTL: 60}
	switch question.Type {
	case dnsmessage.TypeAAAA:
		err = b.AAAAResource(rh, dnsmessage.AAAAResource{AAAA: [16]byte{15: 1}})
	case dnsmessage.TypeSOA:
		ns := dnsmessage.MustNewName("ns.example.")
		err = b.SOAResource(rh, dnsmessage.SOAResource{NS: ns, MBox: ns, Serial: 1, Refresh: 60, Retry: 60, Expire: 60, MinTTL: 60})
	case dnsmessage.TypeTXT:
		err = b.TXTResource(rh, dnsmessage.TXTResource{TXT: []string{"ok"}})
	default:
		rh.Type = dnsmessage.TypeA
		err = b.AResource(rh, dnsmessage.AResource{A: [4]byte{127, 0, 0, 1}})
	}
	if err != nil {
		return nil, err
	}
	return b.Finish()
}
