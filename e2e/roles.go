package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// RoleEnv selects a role when the lab test binary re-executes itself as a
// server or client on a simulated host.
const RoleEnv = "LVSKIT_E2E_ROLE"

// Roles and their arguments:
//
//	http NAME ADDR...        echo server; prints "ready" once listening
//	get ADDR N               N requests on new connections; prints a tally as JSON
//	keepalive ADDR           one connection; a JSON answer per "get" line on stdin
//	ftpd NAME ADDR SIZE      FTP server offering ftpFile of SIZE bytes; prints "ready"
//	ftpget ADDR              downloads ftpFile; prints an ftpResult as JSON
//	checked KIND/ADDR...     what health checks probe (see serveChecked); prints "ready"
//	udpecho NAME ADDR        UDP server answering "NAME DATAGRAM"; prints "ready"
//	flowd NAME ADDR          line echo server answering "NAME LINE"; prints "ready"
//	https NAME CERT KEY ADDR echo server over TLS; prints "ready"
//	dnsd ADDR SICK           DNS server answering each query with a record of its
//	                         type, SERVFAIL while the file SICK exists; prints "ready"
//	smtpd NAME ADDR SICK     mail server (see serveSMTP), greeting with 554 while
//	                         the file SICK exists; prints "ready"
//	flows ADDR N BASEPORT INTERVAL LIFETIME OPENTIMEOUT
//	                         N long-lived connections (see flowConfig); prints
//	                         {"ready":N,...}, then answers mark, clock, report, quit on stdin
//	probe ADDR N BASEPORT TIMEOUT
//	                         one line on each of N new connections from fixed
//	                         ports; prints a probeResult as JSON
//	churn ADDR RATE TIMEOUT  RATE new connections a second, one line each
//	                         (see churnConfig); prints {"ready":true}, then
//	                         answers mark, report, quit on stdin
//	stalls                   when the whole VM stood still (see stallWatch);
//	                         prints {"ready":true,...}, then answers report, quit
//	uprobe ADDR N BASEPORT TIMEOUT
//	                         one datagram on each of N UDP flows from fixed
//	                         ports (three tries); prints a probeResult as JSON
//
// runRoleStatus runs one and returns its exit status.
func runRoleStatus(role string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if err := runRole(role, args, stdin, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "e2e %s: %v\n", role, err)
		return 1
	}
	return 0
}

func runRole(role string, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	enc := json.NewEncoder(stdout)
	switch {
	case role == "http" && len(args) >= 2:
		var lns []net.Listener
		for _, a := range args[1:] {
			ln, err := net.Listen("tcp", a)
			if err != nil {
				return err
			}
			lns = append(lns, ln)
		}
		fmt.Fprintln(stdout, "ready")
		return serveEcho(ctx, args[0], stderr, lns...)
	case role == "get" && len(args) == 2:
		n, err := strconv.Atoi(args[1])
		if err != nil {
			return err
		}
		return enc.Encode(httpGetN(args[0], n))
	case role == "keepalive" && len(args) == 1:
		return keepAliveLoop(args[0], bufio.NewScanner(stdin), enc)
	case role == "ftpd" && len(args) == 3:
		size, err := strconv.Atoi(args[2])
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp4", args[1])
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, "ready")
		return serveFTP(ctx, args[0], ln, fileContent(size))
	case role == "udpecho" && len(args) == 2:
		pc, err := net.ListenPacket("udp4", args[1])
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, "ready")
		return serveUDPEcho(ctx, args[0], pc)
	case role == "flowd" && len(args) == 2:
		ln, err := net.Listen("tcp4", args[1])
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, "ready")
		return serveFlows(ctx, args[0], ln)
	case role == "https" && len(args) == 4:
		ln, err := net.Listen("tcp4", args[3])
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, "ready")
		return serveEchoTLS(ctx, args[0], args[1], args[2], ln)
	case role == "dnsd" && len(args) == 2:
		pc, err := net.ListenPacket("udp4", args[0])
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, "ready")
		return serveDNS(ctx, pc, args[1])
	case role == "smtpd" && len(args) == 3:
		ln, err := net.Listen("tcp", args[1])
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, "ready")
		return serveSMTP(ctx, args[0], ln, 0, func() bool {
			_, err := os.Stat(args[2])
			return err == nil
		})
	case role == "flows":
		cfg, err := flowsConfigFromArgs(args)
		if err != nil {
			return err
		}
		return flowsLoop(cfg, bufio.NewScanner(stdin), enc)
	case role == "churn":
		cfg, err := churnConfigFromArgs(args)
		if err != nil {
			return err
		}
		return churnLoop(cfg, bufio.NewScanner(stdin), enc)
	case role == "stalls" && len(args) == 0:
		// The role's own process only: every thread goes real-time.
		return stallLoop(realTime() == nil, bufio.NewScanner(stdin), enc)
	case (role == "probe" || role == "uprobe") && len(args) == 4:
		n, err1 := strconv.Atoi(args[1])
		base, err2 := strconv.Atoi(args[2])
		timeout, err3 := time.ParseDuration(args[3])
		if err := errors.Join(err1, err2, err3); err != nil {
			return err
		}
		if role == "uprobe" {
			return enc.Encode(probeUDPFlows(args[0], n, base, timeout))
		}
		return enc.Encode(probeFlows(args[0], n, base, timeout))
	case role == "ftpget" && len(args) == 1:
		res, err := ftpGet(args[0], ftpFile)
		if err != nil {
			return err
		}
		return enc.Encode(res)
	case role == "checked" && len(args) > 0:
		return serveChecked(ctx, args, stdout)
	}
	return fmt.Errorf("unknown role or wrong arguments: %s %q", role, args)
}
