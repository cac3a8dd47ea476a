package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// fileContent is the test file's content: size bytes that differ
// everywhere (SHA-256 in counter mode), so any corruption, truncation or
// reordering in transit changes the checksum.
func fileContent(size int) []byte {
	out := make([]byte, 0, size+sha256.Size)
	var ctr [8]byte
	for i := uint64(0); len(out) < size; i++ {
		binary.BigEndian.PutUint64(ctr[:], i)
		sum := sha256.Sum256(append([]byte("lvskit-e2e-ftp"), ctr[:]...))
		out = append(out, sum[:]...)
	}
	return out[:size]
}

// ftpFile is the only file the test FTP server has.
const ftpFile = "data.bin"

// serveFTP is a minimal passive-mode FTP server (RFC 959 subset: USER, PASS,
// SYST, TYPE, PWD, PASV, SIZE, RETR, QUIT) offering ftpFile with content.
// Its PASV reply names the address the control connection arrived on, as
// real servers do; behind a VS/NAT director that is the real server's
// address, which the kernel's ip_vs_ftp helper must rewrite to the VIP.
func serveFTP(ctx context.Context, name string, ln net.Listener, content []byte) error {
	return acceptLoop(ctx, ln, func(c net.Conn) { go ftpSession(name, c, content) })
}

func ftpSession(name string, c net.Conn, content []byte) {
	defer c.Close()
	r := bufio.NewReader(c)
	reply := func(format string, args ...any) { fmt.Fprintf(c, format+"\r\n", args...) }
	reply("220 %s FTP ready", name)
	var pasv net.Listener
	defer func() {
		if pasv != nil {
			pasv.Close()
		}
	}()
	for {
		c.SetDeadline(time.Now().Add(30 * time.Second))
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		cmd, arg, _ := strings.Cut(strings.TrimRight(line, "\r\n"), " ")
		switch strings.ToUpper(cmd) {
		case "USER":
			reply("331 any password will do")
		case "PASS":
			reply("230 logged in")
		case "SYST":
			reply("215 UNIX Type: L8")
		case "TYPE":
			reply("200 type set to %s", arg)
		case "PWD":
			reply(`257 "/" is the current directory`)
		case "PASV":
			if pasv != nil {
				pasv.Close()
			}
			local := c.LocalAddr().(*net.TCPAddr)
			pasv, err = net.ListenTCP("tcp4", &net.TCPAddr{IP: local.IP})
			if err != nil {
				reply("425 cannot open data port: %v", err)
				continue
			}
			ip := local.IP.To4()
			port := pasv.Addr().(*net.TCPAddr).Port
			reply("227 Entering Passive Mode (%d,%d,%d,%d,%d,%d)", ip[0], ip[1], ip[2], ip[3], port>>8, port&0xff)
		case "SIZE":
			if arg != ftpFile {
				reply("550 no such file")
				continue
			}
			reply("213 %d", len(content))
		case "RETR":
			if arg != ftpFile {
				reply("550 no such file")
				continue
			}
			if pasv == nil {
				reply("425 use PASV first")
				continue
			}
			reply("150 opening data connection for %s (%d bytes)", ftpFile, len(content))
			pasv.(*net.TCPListener).SetDeadline(time.Now().Add(10 * time.Second))
			dc, err := pasv.Accept()
			pasv.Close()
			pasv = nil
			if err != nil {
				reply("425 no data connection: %v", err)
				continue
			}
			_, err = dc.Write(content)
			dc.Close()
			if err != nil {
				reply("426 transfer aborted: %v", err)
				continue
			}
			reply("226 transfer complete")
		case "QUIT":
			reply("221 bye")
			return
		default:
			reply("502 %s not implemented", cmd)
		}
	}
}

// ftpResult is what a download got.
type ftpResult struct {
	Greeting  string `json:"greeting"`
	PASVReply string `json:"pasv_reply"`
	DataAddr  string `json:"data_addr"` // where the client opened the data connection
	Size      int    `json:"size"`
	SHA256    string `json:"sha256"`
}

var pasvRE = regexp.MustCompile(`\((\d+),(\d+),(\d+),(\d+),(\d+),(\d+)\)`)

// readReply reads one (possibly multi-line) FTP reply and checks its code's
// first digit.
func readReply(r *bufio.Reader, want byte) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if len(line) >= 4 && line[3] == '-' {
		end := line[:3] + " "
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				return "", err
			}
			if strings.HasPrefix(l, end) {
				break
			}
		}
	}
	if len(line) < 3 || line[0] != want {
		return line, fmt.Errorf("ftp: unexpected reply %q", line)
	}
	return line, nil
}

// ftpGet downloads file from the server at addr in passive mode, opening
// the data connection to the address the PASV reply names, and returns the
// content's size and checksum.
func ftpGet(addr, file string) (ftpResult, error) {
	var res ftpResult
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return res, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	r := bufio.NewReader(c)
	cmd := func(line string, want byte) (string, error) {
		if _, err := fmt.Fprintf(c, "%s\r\n", line); err != nil {
			return "", err
		}
		return readReply(r, want)
	}
	if res.Greeting, err = readReply(r, '2'); err != nil {
		return res, err
	}
	for _, step := range []struct {
		line string
		want byte
	}{{"USER anonymous", '3'}, {"PASS lvskit@", '2'}, {"TYPE I", '2'}} {
		if _, err := cmd(step.line, step.want); err != nil {
			return res, err
		}
	}
	if res.PASVReply, err = cmd("PASV", '2'); err != nil {
		return res, err
	}
	m := pasvRE.FindStringSubmatch(res.PASVReply)
	if m == nil {
		return res, fmt.Errorf("ftp: no address in %q", res.PASVReply)
	}
	n := make([]int, 6)
	for i := range n {
		n[i], _ = strconv.Atoi(m[i+1])
	}
	res.DataAddr = net.JoinHostPort(fmt.Sprintf("%d.%d.%d.%d", n[0], n[1], n[2], n[3]), strconv.Itoa(n[4]<<8|n[5]))
	dc, err := net.DialTimeout("tcp", res.DataAddr, 5*time.Second)
	if err != nil {
		return res, fmt.Errorf("ftp: data connection to %s: %w", res.DataAddr, err)
	}
	defer dc.Close()
	dc.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := cmd("RETR "+file, '1'); err != nil {
		return res, err
	}
	h := sha256.New()
	size, err := io.Copy(h, dc)
	if err != nil {
		return res, fmt.Errorf("ftp: reading data: %w", err)
	}
	res.Size, res.SHA256 = int(size), hex.EncodeToString(h.Sum(nil))
	if _, err := readReply(r, '2'); err != nil {
		return res, err
	}
	if _, err := cmd("QUIT", '2'); err != nil && !errors.Is(err, io.EOF) {
		return res, err
	}
	return res, nil
}

// sha256Hex is the hex SHA-256 of b.
func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
