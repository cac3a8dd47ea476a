package main

// The host's evidence in the summary: when a failed test ran, and whether
// the host kept the VM's CPU waiting meanwhile (vm.HostWaits).

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/lvskit/lvskit/lab/vm"
)

// listedWaits is how many windows a failed test's line lists.
const listedWaits = 5

// host is the record of VM number n, nil if there is none.
func (r vmRuns) host(n int) *vm.HostWaits {
	if n < 1 || n > len(r.hosts) {
		return nil
	}
	return r.hosts[n-1]
}

func spanTime(t time.Time) string { return t.Format("15:04:05.000") }
func waitTime(t time.Time) string { return t.Format("15:04:05.00") }

// describeWait is "07:06:49.80 for 3.4 s (waited 2.9 s, load 7.9)".
func describeWait(w vm.Wait) string {
	load := ""
	if w.Load >= 0 {
		load = fmt.Sprintf(", load %.1f", w.Load)
	}
	return fmt.Sprintf("%s for %.1f s (waited %.1f s%s)", waitTime(w.Start), w.End.Sub(w.Start).Seconds(), w.Waited.Seconds(), load)
}

// ranLine says when a test ran in host time (sp) and, with h, whether the
// host kept the VM's CPU waiting meanwhile.
func ranLine(sp span, h *vm.HostWaits) string {
	var b strings.Builder
	switch {
	case sp.start.IsZero():
		b.WriteString("ran at a time not known")
	case sp.end.IsZero():
		fmt.Fprintf(&b, "ran from %s (host time)", spanTime(sp.start))
	default:
		fmt.Fprintf(&b, "ran %s–%s (host time)", spanTime(sp.start), spanTime(sp.end))
	}
	if h == nil || sp.start.IsZero() {
		return b.String()
	}
	if h.Err != nil && h.Until.IsZero() {
		fmt.Fprintf(&b, "; whether the host kept the VM's CPU waiting is not known (%v)", h.Err)
		return b.String()
	}
	to := sp.end
	if to.IsZero() { // it ran until its VM ended
		to = sp.start.Add(math.MaxInt64)
	}
	waits := h.Waits(sp.start, to)
	if len(waits) == 0 {
		fmt.Fprintf(&b, "; the host never kept the VM's CPU waiting %.1f s or more in it", vm.MinWait.Seconds())
	} else {
		b.WriteString("; the host kept the VM's CPU waiting in it: ")
		var total time.Duration
		for i, w := range waits {
			total += w.Waited
			if i < listedWaits {
				if i > 0 {
					b.WriteString("; ")
				}
				b.WriteString(describeWait(w))
			}
		}
		if len(waits) > listedWaits {
			fmt.Fprintf(&b, "; and %d more (%.1f s waited in all)", len(waits)-listedWaits, total.Seconds())
		}
	}
	if h.Err != nil && h.Until.Before(to) {
		fmt.Fprintf(&b, " (known until %s only: %v)", waitTime(h.Until), h.Err)
	}
	if n := len(h.Windows); n > 0 && n < h.Count && h.Windows[n-1].End.Before(to) {
		fmt.Fprintf(&b, " (windows after the first %d were not kept)", n)
	}
	return b.String()
}

// vmWaitsLine sums up a VM's waiting windows for the summary.
func vmWaitsLine(h *vm.HostWaits) string {
	if h.Err != nil && h.Until.IsZero() {
		return fmt.Sprintf("whether the host kept its CPU waiting is not known (%v)", h.Err)
	}
	var s string
	if h.Count == 0 {
		s = fmt.Sprintf("the host never kept its CPU waiting %.1f s or more", vm.MinWait.Seconds())
	} else {
		s = fmt.Sprintf("the host kept its CPU waiting %.1f s or more %d time(s), %.1f s in all; the longest %s",
			vm.MinWait.Seconds(), h.Count, h.Total.Seconds(), describeWait(h.Longest))
	}
	if h.Err != nil {
		s += fmt.Sprintf(" (known until %s only: %v)", waitTime(h.Until), h.Err)
	}
	return s
}
