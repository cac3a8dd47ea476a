// Package e2e holds lvskit's end-to-end tests.
//
// Real traffic goes from a client through IPVS directors to real servers,
// all set up with our ipvsadm and lvsprep inside the QEMU lab (files with
// the "lab" build tag). It also holds the demo that make demo runs.
//
// The programs the tests need on the simulated hosts are here too, as
// plain Go so host unit tests cover them: an HTTP server that answers with
// its name and the addresses it sees, clients that tally the answers or keep
// one connection open, and a passive-mode FTP server and client. The lab
// test binary runs them by re-executing itself with the role in an
// environment variable (RoleEnv), so nothing else has to be packed into the
// VM.
package e2e
