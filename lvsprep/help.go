package lvsprep

import (
	"bytes"
	"io"
	"strings"

	"github.com/alecthomas/kong"
)

// lvsprep's --help is kong's, changed in three ways for each command: the
// usage line names every flag the command needs, the flags that mean
// nothing to it are left out (--dry-run and --undo for check and status,
// --version below the top), and it ends with examples (helpExamples).

// example is one line of a help's Examples section, under its comment.
type example struct{ comment, cmd string }

// profileExamples are each profile's examples, the first one applying it.
var profileExamples = map[string][]example{
	"director nat": {
		{"the LVS paper's VS/NAT director, with the FTP helper", "lvsprep director nat --vip 202.103.106.5/24 --dev eth0 --rs-net 172.16.0.0/24 --ftp"},
		{"the ip, sysctl and iptables commands that would do it, changing nothing", "lvsprep director nat --vip 202.103.106.5/24 --dev eth0 --rs-net 172.16.0.0/24 --dry-run"},
		{"put back what it changed", "lvsprep director nat --vip 202.103.106.5 --undo"},
	},
	"director fullnat": {
		{"clients reach the real servers as the director's 10.0.0.1", "lvsprep director fullnat --vip 192.0.2.100 --dev eth0 --snat 10.0.0.1"},
		{"only connections to port 443", "lvsprep director fullnat --vip 192.0.2.100 --dev eth0 --snat 10.0.0.1 --proto tcp --port 443"},
		{"put back what it changed", "lvsprep director fullnat --vip 192.0.2.100 --undo"},
	},
	"director dr": {
		{"the VIP on the director's segment", "lvsprep director dr --vip 192.0.2.100/24 --dev eth0"},
		{"one of two directors whose VIP keepalived moves by VRRP: all but the VIP", "lvsprep director dr --vip 192.0.2.100/24 --dev eth0 --vrrp"},
		{"put back what it changed", "lvsprep director dr --vip 192.0.2.100 --undo"},
	},
	"director tun": {
		{"the VIP; the real servers may be anywhere", "lvsprep director tun --vip 192.0.2.100/24 --dev eth0"},
		{"the ip command that would do it, changing nothing", "lvsprep director tun --vip 192.0.2.100/24 --dev eth0 --dry-run"},
		{"put back what it changed", "lvsprep director tun --vip 192.0.2.100 --undo"},
	},
	"director ecmp": {
		{"one director of an ECMP group, the VIP on lo", "lvsprep director ecmp --vip 192.0.2.10"},
		{"then BIRD's configuration, announcing the VIPs lvsctl run can serve", "lvsprep bird director --router 10.2.0.1 --router-as 65000 --as 65001 > /etc/bird/bird.conf"},
		{"put back what it changed", "lvsprep director ecmp --vip 192.0.2.10 --undo"},
	},
	"realserver dr": {
		{"a real server on the director's segment, through its eth0", "lvsprep realserver dr --vip 192.0.2.100 --dev eth0"},
		{"the ip and sysctl commands that would do it, changing nothing", "lvsprep rs dr --vip 192.0.2.100 --dev eth0 --dry-run"},
		{"put back what it changed", "lvsprep realserver dr --vip 192.0.2.100 --undo"},
	},
	"realserver tun": {
		{"a real server anywhere, reached through an IP-in-IP tunnel", "lvsprep realserver tun --vip 192.0.2.100"},
		{"the same for an IPv6 VIP (ip6_tunnel)", "lvsprep realserver tun --vip 2001:db8::100"},
		{"put back what it changed", "lvsprep realserver tun --vip 192.0.2.100 --undo"},
	},
	"realserver nat": {
		{"replies go back through the director at 172.16.0.1", "lvsprep realserver nat --gateway 172.16.0.1"},
		{"the ip route commands that would do it, changing nothing", "lvsprep realserver nat --gateway 172.16.0.1 --dev eth0 --dry-run"},
		{"put the former default routes back", "lvsprep realserver nat --gateway 172.16.0.1 --undo"},
	},
}

// birdExamples are the bird commands' examples.
var birdExamples = map[string][]example{
	"bird director": {
		{"a director announcing lvsctl run's VIPs to the router at 10.2.0.1", "lvsprep bird director --router 10.2.0.1 --router-as 65000 --as 65001"},
		{"the same with BFD, IPv6 VIPs too, and a given router id", "lvsprep bird director --router 10.2.0.1 --router-as 65000 --as 65001 --router-id 10.2.0.11 --ipv6 --bfd"},
		{"a director without lvsctl run: the VIP always announced", "lvsprep bird director --router 10.2.0.1 --router-as 65000 --as 65001 --static 10.3.0.1"},
	},
	"bird router": {
		{"the router of three directors", "lvsprep bird router --as 65000 --director-as 65001 --director 10.2.0.11 --director 10.2.0.12 --director 10.2.0.13"},
		{"also a /28 that a desired state announces (announce: \"203.0.113.0/28\")", "lvsprep bird router --as 65000 --director-as 65001 --director 10.2.0.11 --director 10.2.0.12 --prefix 203.0.113.0/28"},
		{"with BFD, and written where BIRD reads it", "lvsprep bird router --as 65000 --director-as 65001 --director 10.2.0.11 --director 10.2.0.12 --bfd > /etc/bird/bird.conf"},
	},
}

// helpExamples returns the examples that end the help of the command
// with these words ("" for lvsprep itself).
func helpExamples(path string) []example {
	if ex, ok := profileExamples[path]; ok {
		return ex
	}
	if ex, ok := birdExamples[path]; ok {
		return ex
	}
	first := func(profile string) example { return profileExamples[profile][0] }
	checkOf := func(profile string) example {
		apply := first(profile).cmd
		return example{"what " + profile + " still needs here, and the commands that fix it",
			"lvsprep check " + strings.TrimPrefix(apply, "lvsprep ")}
	}
	switch path {
	case "":
		return []example{first("director nat"), checkOf("realserver dr"),
			{"the profiles applied here, and how to undo them", "lvsprep status"}}
	case "director":
		return []example{first("director nat"), first("director dr"), first("director ecmp")}
	case "realserver":
		return []example{first("realserver dr"), first("realserver tun"), first("realserver nat")}
	case "check", "check director", "check realserver":
		return []example{checkOf("director nat"), checkOf("realserver dr")}
	case "bird":
		return []example{birdExamples["bird director"][0], birdExamples["bird router"][0]}
	case "status":
		return []example{{"the profiles applied in this network namespace", "lvsprep status"},
			{"those of the network namespace blue", "ip netns exec blue lvsprep status"}}
	}
	if profile, ok := strings.CutPrefix(path, "check "); ok {
		c := checkOf(profile)
		return []example{c, {"apply it only if something is missing", c.cmd + " >/dev/null || " + first(profile).cmd}}
	}
	return nil
}

// commandPath is a command's words, without aliases: "realserver dr".
func commandPath(n *kong.Node) string {
	var words []string
	for ; n != nil && n.Type == kong.CommandNode; n = n.Parent {
		words = append([]string{n.Name}, words...)
	}
	return strings.Join(words, " ")
}

// changesHost reports whether a command may change the host, so that
// --dry-run and --undo mean something to it: every one but check, status
// and bird.
func changesHost(path string) bool {
	return path != "status" && path != "check" && !strings.HasPrefix(path, "check ") && !isBird(path)
}

// isBird reports whether a command is bird or under it: those print a
// configuration and touch no state file, so --state-dir means nothing to
// them.
func isBird(path string) bool { return path == "bird" || strings.HasPrefix(path, "bird ") }

// usageLines are the help's first lines: for a profile, one that names
// every flag it needs and one for --undo.
func usageLines(n *kong.Node, path string) string {
	cmd := strings.TrimSpace("lvsprep " + path)
	if len(n.Children) > 0 || n.Type == kong.ApplicationNode {
		return "Usage: " + cmd + " <command> [flags]"
	}
	var needed []string
	for _, f := range n.Flags {
		if f.Required || f.Tag.Has("needed") {
			needed = append(needed, f.Summary())
		}
	}
	lines := "Usage: " + strings.TrimSpace(cmd+" "+strings.Join(needed, " ")) + " [flags]"
	for _, f := range n.Flags {
		if changesHost(path) && (f.Name == "vip" || f.Name == "gateway") {
			lines += "\n       " + cmd + " " + f.Summary() + " --undo [flags]"
		}
	}
	return lines
}

// printHelp is kong's help printer with lvsprep's changes.
func printHelp(options kong.HelpOptions, ctx *kong.Context) error {
	node := ctx.Model.Node
	if sel := ctx.Selected(); sel != nil {
		node = sel
	}
	path := commandPath(node)
	var hidden []*kong.Flag
	for _, f := range ctx.Model.Flags {
		hide := (f.Name == "version" && path != "") || ((f.Name == "dry-run" || f.Name == "undo") && !changesHost(path)) ||
			(f.Name == "state-dir" && isBird(path))
		if hide && !f.Hidden {
			f.Hidden = true
			hidden = append(hidden, f)
		}
	}
	var buf bytes.Buffer
	out := ctx.Stdout
	ctx.Stdout = &buf
	err := kong.DefaultHelpPrinter(options, ctx)
	ctx.Stdout = out
	for _, f := range hidden {
		f.Hidden = false
	}
	if err != nil {
		return err
	}
	text := buf.String()
	if first, rest, ok := strings.Cut(text, "\n"); ok && strings.HasPrefix(first, "Usage: ") {
		text = usageLines(node, path) + "\n" + rest
	}
	text = strings.TrimRight(text, "\n") + "\n\nExamples:\n"
	for i, e := range helpExamples(path) {
		if i > 0 {
			text += "\n"
		}
		text += "  # " + e.comment + "\n  " + e.cmd + "\n"
	}
	_, err = io.WriteString(out, text)
	return err
}
