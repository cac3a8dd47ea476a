package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// selfSignedPEM makes a certificate for the addresses ips, signed by
// itself (so it is its own CA), and its key, both PEM-encoded.
func selfSignedPEM(ips ...netip.Addr) (certPEM, keyPEM []byte, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "lvskit e2e"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.IP(ip.AsSlice()))
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

// selfSigned is a certificate for no address in particular, for servers
// whose clients do not verify it.
func selfSigned() (*tls.Certificate, error) {
	certPEM, keyPEM, err := selfSignedPEM()
	if err != nil {
		return nil, err
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	return &c, err
}

// WriteSelfSigned writes cert.pem and key.pem into dir: a certificate for
// the addresses ips, signed by itself, so cert.pem is also the CA a client
// verifies it with. It returns the two paths.
func WriteSelfSigned(dir string, ips ...netip.Addr) (cert, key string, err error) {
	certPEM, keyPEM, err := selfSignedPEM(ips...)
	if err != nil {
		return "", "", err
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	err = errors.Join(os.WriteFile(cert, certPEM, 0o644), os.WriteFile(key, keyPEM, 0o600))
	return cert, key, err
}

// serveEchoTLS is serveEcho over TLS with the certificate and key files.
func serveEchoTLS(ctx context.Context, name, certFile, keyFile string, ln net.Listener) error {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return err
	}
	return serveEcho(ctx, name, nil, tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{pair}}))
}

// serveDNS answers every query as dnsAnswer does, and with SERVFAIL while
// the file sick exists, until ctx ends.
func serveDNS(ctx context.Context, pc net.PacketConn, sick string) error {
	return answerDatagrams(ctx, pc, func(q []byte) []byte {
		if _, err := os.Stat(sick); err == nil {
			return dnsFailure(q)
		}
		a, _ := dnsAnswer(q)
		return a
	})
}

// dnsFailure answers q with SERVFAIL (nil if q does not parse).
func dnsFailure(q []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(q)
	if err != nil {
		return nil
	}
	question, err := p.Question()
	if err != nil {
		return nil
	}
	out, _ := (&dnsmessage.Message{
		Header:    dnsmessage.Header{ID: h.ID, Response: true, RCode: dnsmessage.RCodeServerFailure},
		Questions: []dnsmessage.Question{question},
	}).Pack()
	return out
}

// answerDatagrams sends each datagram on pc what answer makes of it
// (nothing when it makes nil), until ctx ends.
func answerDatagrams(ctx context.Context, pc net.PacketConn, answer func(q []byte) []byte) error {
	stop := context.AfterFunc(ctx, func() { pc.Close() })
	defer stop()
	buf := make([]byte, 2048)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if out := answer(buf[:n]); out != nil {
			if _, err := pc.WriteTo(out, from); err != nil && ctx.Err() != nil {
				return nil
			}
		}
	}
}
