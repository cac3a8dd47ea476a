package keepalived

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// numRead is how keepalived took a number it was given.
type numRead int

const (
	// numBad: refused; the keyword is ignored.
	numBad numRead = iota
	// numOK: read as written.
	numOK
	// numLoose: taken after a warning; the value may differ from the
	// text (keepalived 2.2.7 is built without strict config checks, so a
	// number with trailing junk or out of range is read as C's strtoul
	// read its leading digits, when those fall in range).
	numLoose
)

// strtoul is C's strtoul in base 10: leading blanks, a sign, digits. It
// returns the value (negated modulo 2^64 after '-'), the text after the
// digits (all of s when there are none) and whether it overflowed.
func strtoul(s string) (uint64, string, bool) {
	i := 0
	for i < len(s) && strings.IndexByte(" \t\n\v\f\r", s[i]) >= 0 {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	start := i
	var v uint64
	over := false
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		d := uint64(s[i] - '0')
		if v > (math.MaxUint64-d)/10 {
			over = true
		}
		v = v*10 + d
		i++
	}
	if i == start {
		return 0, s, false
	}
	if over {
		return math.MaxUint64, s[i:], true
	}
	if neg {
		v = -v
	}
	return v, s[i:], false
}

// readUnsigned reads a number as lib/parser.c read_unsigned_func does
// (keepalived 2.2.7): a '-', trailing text, or a value beyond 32 bits or
// outside [lo, hi] is an error; with lenient (keepalived's ignore_error)
// the leading digits are still taken when they fall in [lo, hi].
func readUnsigned(w string, lo, hi uint64, lenient bool) (uint64, numRead) {
	t := strings.TrimLeft(w, " \t")
	v, rest, over := strtoul(t)
	switch {
	case strings.HasPrefix(t, "-"), rest != "", over || v > math.MaxUint32, v < lo || v > hi:
		if lenient && v >= lo && v <= hi && !over {
			return v, numLoose
		}
		return v, numBad
	}
	return v, numOK
}

// timerMax is lib/timer.h's TIMER_MAXIMUM in microseconds (what a
// read_timer without a maximum accepts).
const timerMax = math.MaxInt64 / 1000

// readTimer reads seconds with up to six decimals as microseconds, as
// lib/parser.c read_timer (read_decimal_unsigned_long_func) does: "1.5" is
// 1,500,000; "6s" is read as "6s000000" whose leading digits make 6 µs,
// a warning, and taken when lenient; a '-' is refused.
func readTimer(w string, lo, hi uint64, lenient bool) (uint64, numRead) {
	if hi == 0 {
		hi = timerMax
	}
	if strings.HasPrefix(w, "-") {
		return 0, numBad
	}
	warn := false
	digits, frac, hasDot := strings.Cut(w, ".")
	roundUp := false
	if len(frac) > 6 {
		warn = true
		roundUp = frac[6] >= '5'
		frac = frac[:6]
	}
	text := w + strings.Repeat("0", 6)
	if hasDot {
		text = digits + frac + strings.Repeat("0", 6-len(frac))
	}
	v, rest, over := strtoul(text)
	if strings.HasPrefix(strings.TrimLeft(text, " \t"), "-") {
		return 0, numBad
	}
	if roundUp {
		v++
	}
	switch {
	case rest != "":
		warn = true
	case over:
		return 0, numBad
	case v < lo || v > hi:
		warn = true
	}
	if !warn {
		return v, numOK
	}
	if lenient && v >= lo && v <= hi {
		return v, numLoose
	}
	return v, numBad
}

// micros writes microseconds as a duration in seconds ("6s", "0.5s").
func micros(us uint64) string {
	return strconv.FormatFloat(float64(us)/1e6, 'f', -1, 64) + "s"
}

func microsDuration(us uint64) time.Duration { return time.Duration(us) * time.Microsecond }

// trueFalse is lib/parser.c check_true_false: lower case only.
func trueFalse(w string) (bool, bool) {
	switch w {
	case "true", "on", "yes":
		return true, true
	case "false", "off", "no":
		return false, true
	}
	return false, false
}

// inetAton reads an IPv4 address as inet_aton(3) (and so getaddrinfo with
// AI_NUMERICHOST) does: one to four parts, each decimal, octal (0...) or
// hexadecimal (0x...), the last filling the remaining bytes ("24" is
// 0.0.0.24, "255.255.255" is 255.255.0.255).
func inetAton(s string) ([4]byte, bool) {
	var out [4]byte
	parts := strings.Split(s, ".")
	if len(parts) > 4 || s == "" {
		return out, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		base := 10
		switch {
		case strings.HasPrefix(p, "0x") || strings.HasPrefix(p, "0X"):
			base, p = 16, p[2:]
			if p == "" {
				p = "0"
			}
		case len(p) > 1 && p[0] == '0':
			base, p = 8, p[1:]
		}
		v, err := strconv.ParseUint(p, base, 32)
		if err != nil {
			return out, false
		}
		vals[i] = v
	}
	n := len(vals)
	for i := 0; i < n-1; i++ {
		if vals[i] > 255 {
			return out, false
		}
		out[i] = byte(vals[i])
	}
	last := vals[n-1]
	rem := 4 - (n - 1)
	if rem < 4 && last >= 1<<(8*rem) {
		return out, false
	}
	for i := 3; i >= n-1; i-- {
		out[i] = byte(last)
		last >>= 8
	}
	return out, true
}
