#!/bin/sh
# lvsctl run in the lab, for a first look: a VS/NAT director (this VM's
# own namespace), two real servers and a client in namespaces of their
# own. rs2 fails its check and comes back while the client asks; the table
# and lvsctl status show each step. Run it with make try-run.
set -eu
work=$(mktemp -d)
export LVSCTL_JOURNAL_DIR="$work/journal"

step() { printf '\n== %s\n' "$*"; }
ask() { # six requests from the client: which real server answered each
	for _ in 1 2 3 4 5 6; do
		ip netns exec client timeout 2 bash -c 'exec 3<>/dev/tcp/192.0.2.100/80 &&
			printf "GET / HTTP/1.0\r\n\r\n" >&3 && tail -n 1 <&3' || echo "(no answer)"
	done | sort | uniq -c
}

step "two real servers, each answering its name over HTTP"
ip link add br0 type bridge
ip link set br0 up
for i in 1 2; do
	ip netns add "rs$i"
	ip link add "rs$i-d" type veth peer name eth0 netns "rs$i"
	ip link set "rs$i-d" master br0 up
	ip -n "rs$i" link set lo up
	ip -n "rs$i" link set eth0 up
	ip -n "rs$i" addr add "172.16.0.$((i + 1))/24" dev eth0
	mkdir -p "$work/www$i"
	echo "rs$i" >"$work/www$i/index.html"
done
ip netns add client
ip link add client-d type veth peer name eth0 netns client
ip link set client-d up
ip -n client link set lo up
ip -n client link set eth0 up
ip -n client addr add 192.0.2.2/24 dev eth0
ip netns exec rs1 busybox httpd -p 80 -h "$work/www1"
ip netns exec rs2 busybox httpd -p 80 -h "$work/www2"

step "lvsprep: the director's VIP and NAT, the real servers' route back"
lvsprep director nat --vip 192.0.2.100/24 --dev client-d --rs-net 172.16.0.0/24
for i in 1 2; do ip netns exec "rs$i" lvsprep realserver nat --gateway 172.16.0.1; done
ip addr add 172.16.0.1/24 dev br0

cat >"$work/director.yaml" <<'YAML'
version: 2
services:
  - protocol: tcp
    address: 192.0.2.100
    port: 80
    scheduler: wrr
    # every second; two failures take a server out, two passes bring it back
    check: {type: http, path: /, interval: 1s, timeout: 500ms, rise: 2, fall: 2}
    destinations:
      - {address: 172.16.0.2, port: 80, method: masq, weight: 1}
      - {address: 172.16.0.3, port: 80, method: masq, weight: 2}
YAML
step "lvsctl run director.yaml (its log is prefixed 'lvsctl run:')"
cat "$work/director.yaml"
lvsctl run "$work/director.yaml" &
run=$!
sleep 3
ipvsadm -Ln
ask

step "rs2 stops answering: its check fails twice, lvsctl run sets its weight to 0"
ip netns exec rs2 iptables -I INPUT -p tcp --dport 80 -j REJECT --reject-with tcp-reset
sleep 4
ipvsadm -Ln
rc=0; lvsctl status || rc=$?
echo "(lvsctl status exited $rc: 1 when a real server is held out)"
ask

step "rs2 answers again: after two passing checks it has its weight back"
ip netns exec rs2 iptables -D INPUT -p tcp --dport 80 -j REJECT --reject-with tcp-reset
sleep 4
ipvsadm -Ln
rc=0; lvsctl status || rc=$?
echo "(lvsctl status exited $rc: 0 when every real server is in service and probes are on time)"
ask

step "SIGTERM: lvsctl run stops and leaves the table as it is"
kill -TERM "$run"
wait "$run" || true
ipvsadm -Sn
