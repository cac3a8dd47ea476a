package e2e

import "fmt"

// The configuration files of the two-director set-up with VRRP, as
// docs/vrrp.md shows them and the lab runs them (TestVRRP); a host test
// keeps the page and these equal.
const (
	vrrpPort   = "7000"
	vrrpSyncID = "7"
)

// vrrpKeepalived is a director's keepalived.conf: global_defs with the
// sync daemon flipped by VRRP, one vrrp_instance holding the VIP
// 10.0.0.100/24 on eth0, and nothing else.
func vrrpKeepalived(name string, priority int) string {
	return fmt.Sprintf(`global_defs {
    router_id %s
    # The connection sync daemon on eth0: master while VI_1 is MASTER,
    # backup otherwise. Without "id", the sync id is VI_1's VRID.
    lvs_sync_daemon eth0 VI_1 id %s
}

vrrp_instance VI_1 {
    # Both directors start as BACKUP with nopreempt: the higher priority
    # wins only when both start; a director that comes back never takes
    # the VIP from the one holding it.
    state BACKUP
    nopreempt
    interface eth0
    virtual_router_id 51
    priority %d
    advert_int 1
    virtual_ipaddress {
        10.0.0.100/24 dev eth0
    }
}
`, name, vrrpSyncID, priority)
}

// vrrpDirector is the file lvsctl run keeps on both directors: the VIP's
// service to the two real servers by direct routing, each checked by a
// TCP connect through the VIP.
const vrrpDirector = `version: 2
services:
  - protocol: tcp
    address: 10.0.0.100
    port: ` + vrrpPort + `
    scheduler: wrr
    # A TCP connect through the VIP to each real server (via: vip, the
    # default for direct routing), with the defaults: every 2 s, 1 s
    # timeout, out after 3 failures, back after 2 passes.
    check: {type: tcp, interval: 2s, timeout: 1s, rise: 2, fall: 3}
    destinations:
      - {address: 10.0.0.11, port: ` + vrrpPort + `, method: route, weight: 1}
      - {address: 10.0.0.12, port: ` + vrrpPort + `, method: route, weight: 1}
`
