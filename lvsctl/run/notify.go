package run

import (
	"net"
	"os"
	"strconv"
	"time"
)

// notify tells the service manager about run's state (sd_notify:
// READY=1, RELOADING=1, WATCHDOG=1, STATUS=...): through Config.Notify
// when set, else to $NOTIFY_SOCKET when systemd gave one; otherwise it
// does nothing.
func (cfg *Config) notify(state string) {
	if cfg.Notify != nil {
		cfg.Notify(state)
		return
	}
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return
	}
	if path[0] == '@' {
		path = "\x00" + path[1:]
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return
	}
	defer c.Close()
	c.Write([]byte(state))
}

// watchdog ticks at half the service manager's watchdog interval
// ($WATCHDOG_USEC for this process, or Config.Watchdog); nil when there is
// none.
func (cfg *Config) watchdog() <-chan time.Time {
	every := cfg.Watchdog
	if every == 0 && os.Getenv("WATCHDOG_PID") == strconv.Itoa(os.Getpid()) {
		if us, err := strconv.ParseInt(os.Getenv("WATCHDOG_USEC"), 10, 64); err == nil && us > 0 {
			every = time.Duration(us) * time.Microsecond
		}
	}
	if every <= 0 {
		return nil
	}
	return time.NewTicker(every / 2).C
}
