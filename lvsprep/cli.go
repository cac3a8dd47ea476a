// Package lvsprep is the companion tool that prepares hosts for IPVS.
//
// It prepares a director for VS/NAT or full-NAT, and real servers for VS/DR,
// VS/TUN and VS/NAT. Each profile is a list of steps (modules, sysctls,
// links, addresses, routes, iptables rules) that are checked, applied
// idempotently with a journal in a state file, rolled back on failure,
// reverted exactly by --undo, printed as equivalent commands by --dry-run,
// and audited by the check subcommand. The bird subcommand prints the BIRD 2
// configuration of a BGP ECMP group and changes nothing (bird.go).
package lvsprep

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/lvskit/lvskit/internal/kongmsg"
	"github.com/lvskit/lvskit/internal/version"
	"github.com/lvskit/lvskit/lvsprep/birdconf"
)

// Exit statuses, decided only in Main.
const (
	exitOK      = 0
	exitFailed  = 1 // the change failed (and was rolled back), or check found problems
	exitUsage   = 2 // bad command line: nothing was attempted
	description = "Prepare hosts for Linux IPVS (LVS): directors and real servers.\n\n" +
		"Every change is idempotent and recorded, so --undo restores exactly what was there; " +
		"--dry-run prints the equivalent ip, sysctl, iptables and modprobe commands; " +
		"'check' tells what is missing or wrong and how to fix it."
)

// vrrpHelp is the help of --vrrp, the same for every director profile
// that has it.
const vrrpHelp = "The VIP moves between two directors by VRRP (keepalived's virtual_ipaddress): " +
	"prepare everything else and leave the VIP to keepalived; check says whether this host holds it."

// usageError is a mistake on the command line (exit status 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

type cli struct {
	DryRun   bool             `name:"dry-run" short:"n" help:"Print the equivalent commands instead of changing anything."`
	Undo     bool             `help:"Restore what the profile changed, from its state file."`
	StateDir string           `name:"state-dir" default:"${statedir}" env:"LVSPREP_STATE_DIR" placeholder:"DIR" help:"Where applied profiles record what they changed, one directory per network namespace (default: ${default}; $$${env} sets it)."`
	Version  kong.VersionFlag `help:"Print the version and exit."`

	Director   directorCmds   `cmd:"" help:"Prepare a director (the host running IPVS)."`
	RealServer realServerCmds `cmd:"" name:"realserver" aliases:"rs" help:"Prepare a real server behind a director."`
	Check      checkCmds      `cmd:"" help:"Tell what is missing or wrong on this host for a profile, and how to fix it."`
	Status     struct{}       `cmd:"" help:"List the profiles applied on this host and how to undo them."`
	Bird       birdCmds       `cmd:"" help:"Print the BIRD 2 configuration of a director or router of a BGP ECMP group; change nothing."`
}

type directorCmds struct {
	NAT     directorNATCmd     `cmd:"" name:"nat" help:"VS/NAT director: the VIP, IP forwarding, masquerading of the real servers' subnet."`
	FullNAT directorFullNATCmd `cmd:"" name:"fullnat" help:"Full-NAT director: the VIP, forwarding, IPVS conntrack, clients' addresses rewritten to a director address."`
	DR      directorDirectCmd  `cmd:"" name:"dr" help:"VS/DR director: the VIP."`
	TUN     directorDirectCmd  `cmd:"" name:"tun" help:"VS/TUN director: the VIP."`
	ECMP    directorECMPCmd    `cmd:"" name:"ecmp" help:"DR/TUN director in a BGP ECMP group: the VIP on lo hidden from ARP, sloppy TCP/SCTP, the mh scheduler, no conntrack for the VIP."`
}

type realServerCmds struct {
	DR  realServerDRCmd  `cmd:"" name:"dr" help:"VS/DR real server: the VIP on lo, hidden from ARP."`
	TUN realServerTUNCmd `cmd:"" name:"tun" help:"VS/TUN real server: ipip, tunl0 up with the VIP, rp_filter relaxed."`
	NAT realServerNATCmd `cmd:"" name:"nat" help:"VS/NAT real server: the default route via the director."`
}

type checkCmds struct {
	Director   directorCmds   `cmd:"" help:"Check a director profile."`
	RealServer realServerCmds `cmd:"" name:"realserver" aliases:"rs" help:"Check a real-server profile."`
}

type directorNATCmd struct {
	VIP    string `name:"vip" required:"" placeholder:"ADDR[/LEN]" help:"Virtual IP to add (a host prefix when no length is given)."`
	Dev    string `name:"dev" needed:"" placeholder:"IFACE" help:"Interface that gets the VIP."`
	RSNet  string `name:"rs-net" needed:"" placeholder:"PREFIX" help:"The real servers' subnet, masqueraded for their own outbound traffic."`
	OutDev string `name:"out-dev" placeholder:"IFACE" help:"Masquerade only traffic leaving through this interface."`
	FTP    bool   `name:"ftp" help:"Load the IPVS FTP helper (ip_vs_ftp) for FTP services on port 21."`
	VRRP   bool   `name:"vrrp" help:"${vrrphelp}"`
}

type directorDirectCmd struct {
	VIP  string `name:"vip" required:"" placeholder:"ADDR[/LEN]" help:"Virtual IP to add (a host prefix when no length is given)."`
	Dev  string `name:"dev" needed:"" placeholder:"IFACE" help:"Interface that gets the VIP."`
	VRRP bool   `name:"vrrp" help:"${vrrphelp}"`
	// mode is "dr" or "tun", from the command that selected this value.
	mode string
}

type directorECMPCmd struct {
	VIP string `name:"vip" required:"" placeholder:"ADDR" help:"Virtual IP, announced by BGP; put on --dev as a host address."`
	Dev string `name:"dev" default:"lo" placeholder:"IFACE" help:"Interface that holds the VIP: lo or a dummy interface (default: ${default})."`
}

type directorFullNATCmd struct {
	VIP   string `name:"vip" required:"" placeholder:"ADDR[/LEN]" help:"Virtual IP to add (a host prefix when no length is given)."`
	Dev   string `name:"dev" needed:"" placeholder:"IFACE" help:"Interface that gets the VIP."`
	SNAT  string `name:"snat" needed:"" placeholder:"ADDR" help:"Director address that real servers see as the client."`
	Proto string `name:"proto" default:"tcp" enum:"tcp,udp,sctp" placeholder:"PROTO" help:"Protocol of --port: tcp, udp or sctp (default: ${default})."`
	Port  int    `name:"port" placeholder:"PORT" help:"Rewrite only connections to this VIP port (default: every port)."`
}

type realServerDRCmd struct {
	VIP string `name:"vip" required:"" placeholder:"ADDR" help:"Virtual IP, put on lo as a host address."`
	Dev string `name:"dev" needed:"" placeholder:"IFACE" help:"Interface facing the director."`
}

type realServerTUNCmd struct {
	VIP string `name:"vip" required:"" placeholder:"ADDR" help:"Virtual IP, put on tunl0 (ip6tnl0 for IPv6) as a host address."`
	Dev string `name:"dev" placeholder:"IFACE" help:"Interface facing the director, also hidden from ARP (optional)."`
}

type realServerNATCmd struct {
	Gateway string `name:"gateway" required:"" placeholder:"ADDR" help:"The director's address on the real servers' network."`
	Dev     string `name:"dev" placeholder:"IFACE" help:"Interface of the route (optional)."`
}

// profiler is a profile command: it builds its profile from the flags; for
// --undo only the flags that name the state file are needed.
type profiler interface {
	profile(undo bool) (profile, error)
}

func parseAddr(flag, s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, usagef("%s %q: not an IP address", flag, s)
	}
	a = a.Unmap()
	if a.IsUnspecified() || a.IsMulticast() || a.IsLoopback() {
		return netip.Addr{}, usagef("%s %s: not usable here (unspecified, multicast or loopback)", flag, a)
	}
	return a, nil
}

// parseVIP accepts ADDR or ADDR/LEN; without a length it is a host prefix.
func parseVIP(flag, s string) (netip.Prefix, error) {
	addr, bits, hasLen := strings.Cut(s, "/")
	a, err := parseAddr(flag, addr)
	if err != nil {
		return netip.Prefix{}, err
	}
	if !hasLen {
		return hostPrefix(a), nil
	}
	p, err := netip.ParsePrefix(a.String() + "/" + bits)
	if err != nil {
		return netip.Prefix{}, usagef("%s %q: bad prefix length", flag, s)
	}
	return p, nil
}

// parseHostVIP accepts ADDR, or ADDR/32 (/128): real servers and ECMP
// directors hold the VIP as a host address only.
func parseHostVIP(flag, s string) (netip.Addr, error) {
	p, err := parseVIP(flag, s)
	if err != nil {
		return netip.Addr{}, err
	}
	if !p.IsSingleIP() {
		return netip.Addr{}, usagef("%s %s: this profile holds the VIP as a host address (/%d), not a subnet", flag, s, p.Addr().BitLen())
	}
	return p.Addr(), nil
}

func parsePrefix(flag, s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, usagef("%s %q: not a prefix (ADDR/LEN)", flag, s)
	}
	return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()).Masked(), nil
}

// checkDev checks an interface name's syntax; whether it exists is checked
// against the host before anything changes.
func checkDev(flag, name string, required bool) error {
	if name == "" {
		if required {
			return usagef("%s is required", flag)
		}
		return nil
	}
	if len(name) > 15 || name == "." || name == ".." || strings.ContainsAny(name, "/: \t\n") {
		return usagef("%s %q: not a valid interface name", flag, name)
	}
	return nil
}

func sameFamily(flag1 string, a netip.Addr, flag2 string, b netip.Addr) error {
	if a.Is4() != b.Is4() {
		return usagef("%s %s and %s %s are of different address families", flag1, a, flag2, b)
	}
	return nil
}

func (c *directorNATCmd) profile(undo bool) (profile, error) {
	vip, err := parseVIP("--vip", c.VIP)
	if err != nil {
		return profile{}, err
	}
	if undo {
		return profile{Name: "director nat", Key: "director-nat-" + vip.Addr().String(), Args: []string{"--vip", vip.String()}}, nil
	}
	if err := checkDev("--dev", c.Dev, true); err != nil {
		return profile{}, err
	}
	if err := checkDev("--out-dev", c.OutDev, false); err != nil {
		return profile{}, err
	}
	if c.RSNet == "" {
		return profile{}, usagef("--rs-net is required")
	}
	rsNet, err := parsePrefix("--rs-net", c.RSNet)
	if err != nil {
		return profile{}, err
	}
	if err := sameFamily("--vip", vip.Addr(), "--rs-net", rsNet.Addr()); err != nil {
		return profile{}, err
	}
	p := directorNAT(vip, c.Dev, rsNet, c.OutDev, c.FTP)
	if c.VRRP {
		p = leaveVIPToVRRP(p)
	}
	return p, nil
}

func (c *directorDirectCmd) profile(undo bool) (profile, error) {
	vip, err := parseVIP("--vip", c.VIP)
	if err != nil {
		return profile{}, err
	}
	if undo {
		return profile{Name: "director " + c.mode, Key: "director-" + c.mode + "-" + vip.Addr().String(), Args: []string{"--vip", vip.String()}}, nil
	}
	if err := checkDev("--dev", c.Dev, true); err != nil {
		return profile{}, err
	}
	p := directorDirect(c.mode, vip, c.Dev)
	if c.VRRP {
		p = leaveVIPToVRRP(p)
	}
	return p, nil
}

func (c *directorECMPCmd) profile(undo bool) (profile, error) {
	vip, err := parseHostVIP("--vip", c.VIP)
	if err != nil {
		return profile{}, err
	}
	if undo {
		return profile{Name: "director ecmp", Key: "director-ecmp-" + vip.String(), Args: []string{"--vip", vip.String()}}, nil
	}
	if err := checkDev("--dev", c.Dev, true); err != nil {
		return profile{}, err
	}
	return directorECMP(vip, c.Dev), nil
}

func (c *directorFullNATCmd) profile(undo bool) (profile, error) {
	vip, err := parseVIP("--vip", c.VIP)
	if err != nil {
		return profile{}, err
	}
	if undo {
		return profile{Name: "director fullnat", Key: "director-fullnat-" + vip.Addr().String(), Args: []string{"--vip", vip.String()}}, nil
	}
	if err := checkDev("--dev", c.Dev, true); err != nil {
		return profile{}, err
	}
	if c.SNAT == "" {
		return profile{}, usagef("--snat is required")
	}
	snat, err := parseAddr("--snat", c.SNAT)
	if err != nil {
		return profile{}, err
	}
	if err := sameFamily("--vip", vip.Addr(), "--snat", snat); err != nil {
		return profile{}, err
	}
	if c.Port < 0 || c.Port > 65535 {
		return profile{}, usagef("--port %d: out of range 0-65535 (0: every port)", c.Port)
	}
	return directorFullNAT(vip, c.Dev, snat, c.Proto, c.Port), nil
}

func (c *realServerDRCmd) profile(undo bool) (profile, error) {
	vip, err := parseHostVIP("--vip", c.VIP)
	if err != nil {
		return profile{}, err
	}
	if undo {
		return profile{Name: "realserver dr", Key: "realserver-dr-" + vip.String(), Args: []string{"--vip", vip.String()}}, nil
	}
	if err := checkDev("--dev", c.Dev, true); err != nil {
		return profile{}, err
	}
	return realServerDR(vip, c.Dev), nil
}

func (c *realServerTUNCmd) profile(undo bool) (profile, error) {
	vip, err := parseHostVIP("--vip", c.VIP)
	if err != nil {
		return profile{}, err
	}
	if undo {
		return profile{Name: "realserver tun", Key: "realserver-tun-" + vip.String(), Args: []string{"--vip", vip.String()}}, nil
	}
	if err := checkDev("--dev", c.Dev, false); err != nil {
		return profile{}, err
	}
	return realServerTUN(vip, c.Dev), nil
}

func (c *realServerNATCmd) profile(undo bool) (profile, error) {
	gw, err := parseAddr("--gateway", c.Gateway)
	if err != nil {
		return profile{}, err
	}
	if undo {
		return profile{Name: "realserver nat", Key: "realserver-nat-" + familyOf(gw).String(), Args: []string{"--gateway", gw.String()}}, nil
	}
	if err := checkDev("--dev", c.Dev, false); err != nil {
		return profile{}, err
	}
	return realServerNAT(gw, c.Dev), nil
}

// exitRequest carries kong's exit (after --help or --version) out of the
// parser, so that Main alone returns exit statuses.
type exitRequest int

// newParser builds lvsprep's command line on c. kong's exits (after --help
// or --version) panic with an exitRequest for the caller to recover.
func newParser(c *cli, stdout, stderr io.Writer, stateDir string) (*kong.Kong, error) {
	return kong.New(c,
		kong.Name("lvsprep"),
		kong.Description(description),
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { panic(exitRequest(code)) }),
		kong.Vars{"version": "lvsprep " + version.Version, "statedir": stateDir, "vrrphelp": vrrpHelp, "announcedev": birdconf.DefaultDevice},
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
		kong.Help(printHelp),
	)
}

// recoverExit turns kong's exit request into a status.
func recoverExit(code *int) {
	if r := recover(); r != nil {
		e, ok := r.(exitRequest)
		if !ok {
			panic(r)
		}
		*code = int(e)
	}
}

// Main runs lvsprep on host h (the command passes RealHost, tests fakes):
// args[0] is the name it was invoked as; stdin is not read. It returns the
// exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer, h *Host) (code int) {
	var c cli
	stateDir := h.StateDir
	if stateDir == "" {
		stateDir = defaultStateDir
	}
	parser, err := newParser(&c, stdout, stderr, stateDir)
	if err != nil {
		fmt.Fprintf(stderr, "lvsprep: internal error: %v\n", err)
		return exitFailed
	}
	defer recoverExit(&code)
	kctx, err := parser.Parse(args[min(1, len(args)):])
	if err != nil {
		var perr *kong.ParseError
		if errors.As(err, &perr) {
			kctx = perr.Context
		}
		fmt.Fprintf(stderr, "lvsprep: %s (see %s)\n", kongmsg.Message(err, kctx, nil), helpCommand(kctx))
		return exitUsage
	}
	r := &runner{h: h, dir: c.StateDir, out: stdout, errOut: stderr}
	err = dispatch(&c, kctx, r)
	var ue usageError
	var pe problemsFound
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "lvsprep: %v (see %s)\n", err, helpCommand(kctx))
		return exitUsage
	case errors.As(err, &pe):
		return exitFailed
	default:
		fmt.Fprintf(stderr, "lvsprep: %v\n", err)
		return exitFailed
	}
}

// helpCommand is the help to read after a usage error: that of the
// command given so far.
func helpCommand(kctx *kong.Context) string {
	if kctx == nil || kctx.Selected() == nil {
		return "lvsprep --help"
	}
	return "lvsprep " + commandPath(kctx.Selected()) + " --help"
}

// profileNames are the profiles a state file may name.
var profileNames = []string{"director nat", "director fullnat", "director dr", "director tun", "director ecmp",
	"realserver dr", "realserver tun", "realserver nat"}

// rebuildProfile builds the profile that a state file names from the flags
// it recorded, through the same command line as the user's. The flags must
// come back in their canonical order, exactly as lvsprep writes them.
func rebuildProfile(name string, args []string) (p profile, err error) {
	if !slices.Contains(profileNames, name) {
		return profile{}, errors.New("not a profile")
	}
	var c cli
	parser, err := newParser(&c, io.Discard, io.Discard, defaultStateDir)
	if err != nil {
		return profile{}, err
	}
	code := -1
	defer func() {
		if code != -1 {
			err = errors.New("not profile flags")
		}
	}()
	defer recoverExit(&code)
	kctx, err := parser.Parse(append(strings.Fields(name), args...))
	if err != nil {
		return profile{}, err
	}
	prof, err := selectedProfile(kctx, false)
	if err != nil {
		return profile{}, err
	}
	if prof.Name != name || !slices.Equal(prof.Args, args) {
		return profile{}, errors.New("flags not in the form lvsprep writes")
	}
	return prof, nil
}

// selectedProfile builds the profile of the command kong selected.
func selectedProfile(kctx *kong.Context, undo bool) (profile, error) {
	p, ok := kctx.Selected().Target.Addr().Interface().(profiler)
	if !ok {
		return profile{}, fmt.Errorf("internal error: %q is not a profile command", kctx.Command())
	}
	if d, ok := p.(*directorDirectCmd); ok {
		d.mode = kctx.Selected().Name
	}
	return p.profile(undo)
}

// problemsFound is check's verdict that something is missing; the table has
// said what, so Main prints nothing more.
type problemsFound struct{}

func (problemsFound) Error() string { return "problems found" }

func dispatch(c *cli, kctx *kong.Context, r *runner) error {
	cmd := kctx.Command()
	if cmd == "status" {
		if c.Undo || c.DryRun {
			return usagef("status takes neither --undo nor --dry-run")
		}
		return r.status()
	}
	if strings.HasPrefix(cmd, "bird ") {
		if c.Undo || c.DryRun {
			return usagef("bird takes neither --undo nor --dry-run: it changes nothing")
		}
		return printBird(kctx, r.h, r.out, r.errOut)
	}
	checking := strings.HasPrefix(cmd, "check ")
	if checking && (c.Undo || c.DryRun) {
		return usagef("check takes neither --undo nor --dry-run")
	}
	prof, err := selectedProfile(kctx, c.Undo)
	if err != nil {
		return err
	}
	switch {
	case checking:
		ok, err := r.check(prof)
		if err == nil && !ok {
			err = problemsFound{}
		}
		return err
	case c.DryRun:
		return r.plan(prof, c.Undo)
	case c.Undo:
		return r.undo(prof)
	}
	return r.apply(prof)
}
