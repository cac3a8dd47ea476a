package announce

import "golang.org/x/sys/unix"

// netlinkRoute is the netlink family of links and addresses.
const netlinkRoute = unix.NETLINK_ROUTE
