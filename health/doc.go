// Package health checks real servers and keeps a state per target.
//
// It probes them (TCP, HTTP, HTTPS, DNS, UDP, SMTP, ICMP echo or a
// program), and turns the results into a state per target (unknown, up,
// down) with rise and fall counts, so that a long-running director can
// take failed servers out of its IPVS table and bring them back.
//
// A Spec is one check as a desired-state document writes it; a Target is
// one probe destination with its Spec. Probe runs one probe. A Checker
// schedules the probes of many targets (one scheduler goroutine, probes
// bounded by Options.MaxInFlight, one probe in flight per TargetKey however
// many services share it), reports state changes on Changes, and measures
// how late probes start, so a watchdog can tell when it falls behind.
//
// The package changes nothing on the host and never logs: results are
// states and error texts for the caller to act on.
package health
