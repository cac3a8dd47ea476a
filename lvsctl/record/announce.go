package record

import (
	"net/netip"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lvskit/lvskit/internal/netnsid"
)

// WithdrawalName is the file lvsctl withdraw leaves for lvsctl run in the
// journal directory: the prefixes this director stops announcing for
// maintenance, until lvsctl announce takes them back.
const WithdrawalName = "withdrawn.json"

// Withdrawal is what lvsctl withdraw asks of run.
type Withdrawal struct {
	// All withdraws every prefix; else Prefixes lists them.
	All      bool           `json:"all,omitempty"`
	Prefixes []netip.Prefix `json:"prefixes,omitempty"`
	Since    time.Time      `json:"since"`
	netnsid.Identity
}

// Withdraws reports whether w takes p out of the announcement.
func (w *Withdrawal) Withdraws(p netip.Prefix) bool {
	return w != nil && (w.All || slices.Contains(w.Prefixes, p))
}

// LoadWithdrawal reads the withdrawal of this boot and namespace; nil when
// there is none.
func (j *Journal) LoadWithdrawal() (*Withdrawal, error) {
	var w Withdrawal
	if ok, err := j.readFile(WithdrawalName, &w); !ok || err != nil {
		return nil, err
	}
	if !j.id.Same(w.Identity) {
		return nil, nil
	}
	return &w, nil
}

// SaveWithdrawal replaces the withdrawal; nil or an empty one removes it.
func (j *Journal) SaveWithdrawal(w *Withdrawal) error {
	if w == nil || !w.All && len(w.Prefixes) == 0 {
		return j.writeFile(WithdrawalName, nil)
	}
	w.Identity = j.id
	return j.writeFile(WithdrawalName, w)
}

// StatWithdrawal fills st with the withdrawal file's status, so that run
// reads it again only when it changed; unix.ENOENT when there is none.
func (j *Journal) StatWithdrawal(st *unix.Stat_t) error {
	return unix.Fstatat(j.fd, WithdrawalName, st, unix.AT_SYMLINK_NOFOLLOW)
}

// WhyWithdrawn is an Announcement's Why while lvsctl withdraw holds its
// prefix back.
const WhyWithdrawn = "withdrawn by lvsctl withdraw"

// Announcement is one prefix as run last decided it.
type Announcement struct {
	Prefix    netip.Prefix `json:"prefix"`
	Announced bool         `json:"announced"`
	// Why says why a prefix is not announced: "withdrawn by lvsctl
	// withdraw", "no real server in service", "table not in place",
	// "waiting for the first checks".
	Why string `json:"why,omitempty"`
	// Services are the services that count for it, as ipvsadm names them.
	Services []string `json:"services"`
}
