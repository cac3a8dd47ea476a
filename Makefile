# lvskit: ipvsadm-compatible tools for Linux IPVS, and the lab that tests them
# against the real kernel. Every target means the same locally and in CI.

GO       ?= go
PREFIX   ?= /usr/local
DESTDIR  ?=
# The version the programs report (lvsprep --version, lvsctl --version, and
# `go version -m` for all five): `git describe --tags --always --dirty`
# without a tag's leading v, so 1.2.3 on the tag v1.2.3, 1.2.3-4-gabc1234
# four commits after it, abc1234 with no tag, -dirty with uncommitted changes.
ifndef VERSION
VERSION := $(patsubst v%,%,$(shell git describe --tags --always --dirty 2>/dev/null || echo dev))
endif
# Reproducible builds: every timestamp in the archives and packages is the
# last commit's time (packagers building without git set it themselves).
ifndef SOURCE_DATE_EPOCH
SOURCE_DATE_EPOCH := $(shell git log -1 --format=%ct 2>/dev/null)
endif
ifneq ($(SOURCE_DATE_EPOCH),)
export SOURCE_DATE_EPOCH
endif
# disablethp=1 (a runtime GODEBUG setting that //go:debug does not accept)
# keeps the Go heap off transparent huge pages from the runtime's first
# allocation, before main can ask (sysenv.SmallPages): decision 0011.
# -buildid= and -trimpath leave nothing of the build machine in a binary.
LDFLAGS  := -s -w -buildid= -X github.com/lvskit/lvskit/internal/version.Version=$(VERSION) -X runtime.godebugDefault=disablethp=1
GOBUILD   = $(GO) build -trimpath -buildvcs=false -ldflags '$(LDFLAGS)'
BINARIES := ipvsadm ipvsadm-save ipvsadm-restore lvsprep lvsctl
export CGO_ENABLED := 0

.PHONY: all help deps lab-deps tools build test unit unit-arm64 lab lab-guest lab-pkgs lab-arm64 labrun check install uninstall deb rpm rpmlint lintian release tarball sbom bench-keepalived \
	pkg-bin check-arch pkg-stage demo bench bench-plot lab-run try-run clean fuzz fuzz-short soak soak-lvsprep

all: build

## help: the targets, each with the first line of what it does
help:
	@awk '/^## [a-z0-9-]+: / { sub(/^## /, ""); n = index($$0, ":"); printf "  %-14s %s\n", substr($$0, 1, n - 1), substr($$0, n + 2) }' $(firstword $(MAKEFILE_LIST))

## deps: install the Debian packages the lab, tests and packaging need
## The Debian packages every test, the lab, the demo and packaging need,
## installed here once, in one apt-get call (as root; tools/deps.sh); tests
## never install anything. Run as another user it names what is missing and
## the command that installs it, and fails. apt's output goes to
## .cache/deps.log; the terminal gets what is installed and a summary.
# the lab's VM image: emulator, guest kernel, guest user space, the reference
# ipvsadm, BIRD for the ECMP topology, and what the image builder runs: all
# that make demo, try-run and lab-run need (lab-deps)
LAB_PACKAGES  := qemu-system-x86 linux-image-cloud-amd64 busybox-static iptables \
	iproute2 ipvsadm kmod bash dash netbase cpio bird2 keepalived tmux procps ncurses-base libc-bin
# the arm64 lab (make lab ARCH=arm64, make lab-arm64) and the parsers'
# tests under qemu-user (make unit-arm64)
ARM64_PACKAGES := qemu-system-arm qemu-user-static
# The foreign architectures of the lab (make lab ARCH=arm64): make deps adds
# them to dpkg, so apt-get download finds their packages; they are unpacked
# under .cache/lab, never installed on the host (lab-guest).
LAB_FOREIGN_ARCHES := arm64
# host-side tests: manual pages, completions in real shells, the .deb, units
HOST_PACKAGES := git groff man-db bash-completion zsh fish dpkg lintian systemd rpm rpmlint
DEBIAN_PACKAGES := $(LAB_PACKAGES) $(ARM64_PACKAGES) $(HOST_PACKAGES)
deps:
	@tools/deps.sh $(DEBIAN_PACKAGES)
	@tools/deps.sh --foreign-arch $(LAB_FOREIGN_ARCHES)

## lab-deps: install only the Debian packages the amd64 lab needs
## What make demo, try-run and lab-run install: the lab's packages alone
## (LAB_PACKAGES), no arm64 architecture, no packaging tools
lab-deps:
	@tools/deps.sh $(LAB_PACKAGES)
# lab-run and try-run for another architecture need make deps' arm64 set-up
RUN_DEPS = $(if $(filter $(HOST_ARCH),$(ARCH)),lab-deps,deps)

## build: static binaries into bin/
build:
	@mkdir -p bin
	$(GOBUILD) -o bin/ ./cmd/...

## test: everything CI runs: check, unit(-arm64), fuzz-short, lab, lab-arm64
## Everything: static checks, host unit tests (and the parsers' under
## qemu-user for arm64), a short fuzz pass, then the kernel lab, and the
## arm64 lab's share (decision 0016)
test: deps check unit unit-arm64 fuzz-short lab lab-arm64

## unit: host-side tests, no kernel needed
## Host-side tests (no kernel IPVS needed), with the plotting
## tool's own module (bench/benchplot: gonum stays out of the main module)
unit:
	$(GO) test ./...
	$(GO) -C bench/benchplot test ./...

## lab: the tests that need the real kernel, in the QEMU lab (ARCH=arm64 too)
## Tests that need the real kernel, run inside the QEMU lab (one boot
## per CPU, sharing a queue of packages; installs the lab's Debian packages
## when root). Narrow it with make lab LAB_ARGS='-run TestName ./ipvs';
## ARCH=arm64 boots Debian's arm64 kernel (docs/lab.md)
LABRUN   := .cache/lab/labrun
LAB_ARGS ?=
lab: deps build lab-guest lab-pkgs labrun
	$(LABRUN) $(LAB_ARCH_FLAGS) -pkgs $(LAB_PKGS) -tests -test-timeout 30m -timeout 45m $(LAB_ARGS)

# The lab boots ARCH's Debian 12 kernel: the host's own architecture from
# the host's packages and bin/; another (arm64) from its Debian packages,
# unpacked into LAB_ROOT by tools/lab-root.sh, with our programs built for
# it (pkg-bin) and the tests cross-compiled by labrun.
HOST_ARCH      := $(shell $(GO) env GOHOSTARCH)
LAB_ROOT        = .cache/lab/$(ARCH)-root
LAB_GUEST_PACKAGES = linux-image-cloud-$(ARCH) busybox-static iptables iproute2 ipvsadm kmod \
	bash dash bird2 keepalived dpkg tar sysvinit-utils tmux procps ncurses-base libc-bin
LAB_ARCH_FLAGS  = $(if $(filter $(HOST_ARCH),$(ARCH)),,-arch $(ARCH) -arch-root $(LAB_ROOT) -bin $(PKG_BINDIR))
lab-guest:
	@if [ '$(ARCH)' != '$(HOST_ARCH)' ]; then \
	  $(MAKE) --no-print-directory pkg-bin ARCH=$(ARCH) && \
	  tools/lab-root.sh $(ARCH) $(LAB_ROOT) $(LAB_GUEST_PACKAGES); fi

# The packages the package lab tests install (packaging/deb_lab_test.go):
# Debian's ipvsadm for ARCH (apt-get download, kept in .cache/lab), our
# .deb at LAB_OLD_VERSION, the previous version an upgrade starts from
# (0~0 sorts below every version a tree's package carries), and at this
# tree's version.
LAB_PKGS        = .cache/lab/pkgs-$(ARCH)
LAB_OLD_VERSION := 0~0
lab-pkgs: tools
	rm -rf $(LAB_PKGS).tmp && mkdir -p $(LAB_PKGS).tmp .cache/lab/debian-$(ARCH)
	@$(MAKE) --no-print-directory deb ARCH=$(ARCH) VERSION='$(LAB_OLD_VERSION)' DISTDIR=$(LAB_PKGS).tmp \
		PKG_BINDIR=.cache/build/old_linux_$(ARCH) PKG_STAGEDIR=.cache/pkg/old_linux_$(ARCH) >/dev/null
	@$(MAKE) --no-print-directory deb ARCH=$(ARCH) DISTDIR=$(LAB_PKGS).tmp >/dev/null
	cd .cache/lab/debian-$(ARCH) && { ls ipvsadm_*_$(ARCH).deb >/dev/null 2>&1 || apt-get download -q ipvsadm:$(ARCH) 2>/dev/null; }
	cp .cache/lab/debian-$(ARCH)/ipvsadm_*_$(ARCH).deb $(LAB_PKGS).tmp/
	rm -rf $(LAB_PKGS) && mv $(LAB_PKGS).tmp $(LAB_PKGS)
	@ls $(LAB_PKGS)

## lab-arm64: the arm64 lab's share of make test (decision 0016)
## The arm64 lab's share of make test (decision 0016 has the figures):
## Debian's arm64 kernel under TCG runs every lab test of the kernel
## interface (conformance, the getsockopt structures), seven files of the
## differential corpus against Debian's arm64 ipvsadm, save/restore, the
## units, lvsctl apply, and the .deb over Debian's ipvsadm.
## make lab ARCH=arm64 runs everything.
lab-arm64: deps labrun
	@$(MAKE) --no-print-directory lab-guest lab-pkgs ARCH=arm64
	$(LABRUN) -tests -arch arm64 -bin .cache/build/linux_arm64 -test-timeout 20m -timeout 30m ./ipvs
	$(LABRUN) -tests -arch arm64 -bin .cache/build/linux_arm64 -test-timeout 20m -timeout 30m \
		-run '^TestDifferential$$/^(listing|saverestore-save|saverestore-roundtrip|daemon|zero|tunnel|golden-t00)$$' ./testscripts
	$(LABRUN) -tests -arch arm64 -bin .cache/build/linux_arm64 -pkgs .cache/lab/pkgs-arm64 -test-timeout 20m -timeout 30m \
		-run '^(TestLabRoundTrip|TestRestoreRefusedLineLeavesTable|TestRestoreGoodFileAfterTrial|TestUnit.*|TestLabWrappersLikeDebian|TestLabUnnamedForwardMethods|TestLvsctl.*|TestDebOverDebianIpvsadmUpgradeAndPurge)$$' \
		./ipvsadm ./ipvsadm/wrappers ./ipvsadm/list ./lvsctl ./packaging

## unit-arm64: the parsers' host tests built for arm64, under qemu-user
## The host tests of the parsers (ipvsadm's command line and restore
## input, rules, names, the save format) built for arm64 and run under
## qemu-aarch64-static. TestTranscripts is left to make unit: its shell
## starts the test binary again as ipvsadm, which the host cannot exec
## without binfmt_misc. The programs themselves run under qemu-user in
## packaging's TestArm64ProgramsUnderQemuUser (make unit).
unit-arm64: deps
	GOARCH=arm64 $(GO) test -exec qemu-aarch64-static -skip '^TestTranscripts$$' ./ipvsadm ./ipvsadm/cmdline ./rules ./names ./save

# Host programs (labrun, the tools) are built for the host, whatever GOARCH
# the environment names (GOARCH=arm64 make deb must still run nfpm).
HOST_GO = GOOS=$(shell $(GO) env GOHOSTOS) GOARCH=$(HOST_ARCH) $(GO)
labrun:
	$(HOST_GO) build -o $(LABRUN) ./lab/labrun

## soak-lvsprep: 1,000 SIGKILLs of lvsprep, each followed by --undo
## 1,000 random SIGKILLs of lvsprep during apply and undo,
## each followed by --undo and a host snapshot compare (the figure in
## docs/reliability.md; about 0.6 s a kill in the lab)
soak-lvsprep: deps build labrun
	LVSKIT_SOAK_LVSPREP_KILLS=$${LVSKIT_SOAK_LVSPREP_KILLS:-1000} $(LABRUN) -tests -vms 1 -test-timeout 3h -timeout 4h \
		-run TestLabRandomKillsThenUndoRestoresTheHost ./lvsprep

## tools: build the pinned staticcheck, nfpm, cyclonedx-gomod into .cache/tools
## Staticcheck, nfpm and cyclonedx-gomod, pinned in their own module
## (tools/go.mod) so that the module packagers build needs none of them
TOOLS := .cache/tools
tools: $(TOOLS)/staticcheck $(TOOLS)/nfpm $(TOOLS)/cyclonedx-gomod
$(TOOLS)/staticcheck $(TOOLS)/nfpm $(TOOLS)/cyclonedx-gomod: tools/go.mod tools/go.sum
	@mkdir -p $(TOOLS)
	cd tools && $(HOST_GO) build -trimpath -buildvcs=false -o ../$(TOOLS)/ honnef.co/go/tools/cmd/staticcheck github.com/goreleaser/nfpm/v2/cmd/nfpm \
		github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod

## check: gofmt, go vet (also for macOS), staticcheck
## Gofmt, go vet, staticcheck
check: tools
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags lab ./...
	$(TOOLS)/staticcheck ./...
	$(TOOLS)/staticcheck -tags lab ./...
	$(GO) -C bench/benchplot vet ./...
	cd bench/benchplot && ../../$(TOOLS)/staticcheck ./...
	@# The packages and their tests build off Linux (no IPVS there:
	@# ipvs.Open says so), so a maintainer on a Mac can read, build and vet
	@# the tree.
	GOOS=darwin $(GO) vet ./...
	GOOS=freebsd $(GO) build ./...

## demo: the LVS paper's VS/NAT example, built and run in the lab
## Boot the lab and build the LVS paper's VS/NAT example with our
## lvsprep and ipvsadm; prints the rules, the split of 60 requests against
## the weights, ipvsadm -Ln --stats, one request's addresses, then lvsctl
## changing the weights, two lvsctl top frames and draining a server while
## requests flow (e2e TestDemo)
demo: lab-deps build labrun
	$(LABRUN) -tests -run '^TestDemo$$' ./e2e

## bench: our tools against Debian's ipvsadm and the kernel floor
## Time our ipvsadm, Debian's and the kernel floor in the lab (one
## boot, full size: the reference needs a long time), then the growth
## from 1,000 to 10,000 services measured in pairs (TestGrowth); keep the
## log in $(BENCH_LOG), merge its results into docs/benchmarks.json,
## redraw the plot docs/benchmarks.svg and write the tables into
## docs/benchmarks.md (bench-plot). BENCH_RUN narrows it, e.g.
## BENCH_RUN='TestBenchmarks/spread_1000x10' or BENCH_RUN=TestGrowth.
## The guest gets BENCH_MEM MiB: a table of 10,000 x 100 is a million
## destinations.
BENCH_LOG ?= .cache/bench.log
BENCH_RUN ?= ^(TestBenchmarks|TestGrowth)$$
BENCH_MEM ?= 4096
bench: deps build labrun
	@mkdir -p $(dir $(BENCH_LOG))
	@{ $(LABRUN) -mem $(BENCH_MEM) -tests -run '$(BENCH_RUN)' -test-timeout 300m -timeout 310m ./bench; echo $$? > $(BENCH_LOG).status; } 2>&1 | tee $(BENCH_LOG)
	@st=$$(cat $(BENCH_LOG).status); if [ "$$st" != 0 ]; then echo "bench: the lab run failed (status $$st)" >&2; exit $$st; fi
	$(MAKE) bench-plot BENCH_PLOT_LOGS=$(BENCH_LOG)

## bench-plot: merge bench results into docs/benchmarks.{json,svg,md}
## Merge the results of the last bench run ($(BENCH_LOG)), or
## of the runs in BENCH_PLOT_LOGS, into $(BENCH_BASE) and write them to
## docs/benchmarks.json, docs/benchmarks.svg and the tables of
## docs/benchmarks.md (between its benchplot markers): a later run's table
## replaces the same table of an earlier one, the others stay, so a
## narrowed run loses nothing. BENCH_BASE= starts from the logs alone;
## BENCH_PLOT_LOGS= redoes the plot and tables from docs/benchmarks.json.
## benchplot refuses to merge a smoke run into full-size results.
BENCH_PLOT_LOGS ?= $(BENCH_LOG)
BENCH_BASE ?= docs/benchmarks.json
bench-plot:
	$(GO) -C bench/benchplot run . $(foreach l,$(wildcard $(BENCH_BASE)) $(BENCH_PLOT_LOGS),-in $(abspath $(l))) \
		-json $(CURDIR)/docs/benchmarks.json -plot $(CURDIR)/docs/benchmarks.svg -doc $(CURDIR)/docs/benchmarks.md

## bench-keepalived: lvsctl run against keepalived 2.2.7, 10,000 real servers
## lvsctl run and Debian's keepalived side by side in the lab at full
## size (TestKeepalivedSideBySide: keepalived alone needs most of an hour
## to start and reload 10,000 checked real servers); the log goes to
## $(BENCH_KA_LOG), the plot to docs/keepalived.svg.
BENCH_KA_LOG ?= .cache/bench-keepalived.log
bench-keepalived: deps build labrun
	@mkdir -p $(dir $(BENCH_KA_LOG))
	@{ $(LABRUN) -tests -run '^TestKeepalivedSideBySide$$' -test-timeout 150m -timeout 160m ./bench; echo $$? > $(BENCH_KA_LOG).status; } 2>&1 | tee $(BENCH_KA_LOG)
	@st=$$(cat $(BENCH_KA_LOG).status); if [ "$$st" != 0 ]; then echo "bench-keepalived: the lab run failed (status $$st)" >&2; exit $$st; fi
	$(GO) -C bench/benchplot run . -keepalived $(abspath $(BENCH_KA_LOG)) -plot $(CURDIR)/docs/keepalived.svg

## fuzz: every fuzz target for FUZZTIME (default 60s) each
## Every fuzz target for FUZZTIME each (minimising a new input for
## at most FUZZMINTIME); found inputs go to Go's cache, failures to the
## package's testdata/fuzz (commit them). go test replays the committed
## corpora (testdata/fuzz) and seeds on every run. Figures in
## docs/reliability.md.
## A run Go 1.26 ends on its fuzz deadline race (golang/go#75804) with no
## failing input is reported, not counted (tools/fuzz.sh).
FUZZTIME    ?= 60s
FUZZMINTIME ?= 2s
# package:target:executions of the short pass (about 5 s each on a 2-core host)
FUZZ_TARGETS := ./ipvsadm/cmdline:FuzzParse:40000 ./ipvsadm/cmdline:FuzzParseFast:60000 \
	./ipvs:FuzzNetlinkReplies:50000 ./ipvsadm/list:FuzzConnections:12000 \
	./names:FuzzNameFiles:1500 ./ipvsadm:FuzzRestoreReader:25000 \
	./ipvsadm/wrappers:FuzzRestoreScriptRefusal:35000 \
	./ipvsadm:FuzzSaveRoundTrip:5000 ./lvsprep:FuzzDecodeState:10000 \
	./rules/keepalived:FuzzParse:20000
## fuzz-short: every fuzz target for a fixed count of executions
## The short pass make test (so CI) runs: every target for the
## count of executions FUZZ_TARGETS gives it (a count has no deadline to race)
fuzz-short:
	$(MAKE) fuzz FUZZTIME=short

fuzz:
	@GO=$(GO) tools/fuzz.sh $(FUZZTIME) $(FUZZMINTIME) $(FUZZ_TARGETS)

## soak: the reliability tests at full size (hours)
## The reliability tests at the sizes docs/reliability.md publishes
## (1,000 SIGKILLs during -R of 10,000 lines, 1,000 saves while the table
## changes, 8 concurrent restores of 1,000 services, 1,000,000 restore
## lines, 100,000 destinations, a 100 MiB line, 100,000 requests of 500
## keep-alive clients through VS/NAT), 1,000 SIGKILLs of lvsprep
## (soak-lvsprep) and every fuzz target for 10 minutes. Hours, not minutes.
## The guest gets 3 GiB: -R holds a 100 MiB line as ipvsadm 1.31 does.
soak: deps build labrun
	LVSKIT_SOAK=1 $(LABRUN) -tests -vms 1 -mem 3072 -run '^(TestUnit.*|TestRestoreKilledLeavesPrefix|TestConcurrentRestores|TestSaveWhileEditing|TestRestorePeakMemory|TestVSNATUnderLoad)$$' -test-timeout 300m -timeout 320m ./ipvsadm/wrappers ./e2e
	$(MAKE) soak-lvsprep
	$(MAKE) fuzz FUZZTIME=10m

## lab-run: one shell command in the lab: make lab-run CMD='ipvsadm -Ln'
## Run any shell command inside the lab with our bin/ first on PATH,
## e.g. make lab-run CMD='ipvsadm -Ln'; exits with the command's status
lab-run: $(RUN_DEPS) build lab-guest labrun
	@if [ -z "$$CMD" ]; then echo "usage: make lab-run CMD='ipvsadm -Ln'" >&2; exit 2; fi
	$(LABRUN) $(LAB_ARCH_FLAGS) -- "$$CMD"

## try-run: lvsctl run in the lab: a real server fails and comes back
## Runs lab/try/run.sh in the lab (docs/health.md, "Try it in the lab"):
## two real servers behind lvsctl run; rs2 fails its check and comes back
try-run: $(RUN_DEPS) build lab-guest labrun
	$(LABRUN) $(LAB_ARCH_FLAGS) -- 'sh /src/lab/try/run.sh'

## install: binaries, man pages, completions, docs under PREFIX (/usr/local)
## Binaries, man pages, completions, user documentation (honours PREFIX,
## default /usr/local, and DESTDIR); PREFIX=/usr is for distribution packages; PREFIX= puts the
## programs in /sbin as Debian's ipvsadm does, the rest in /usr
install: build
	install -d $(DESTDIR)$(SBINDIR)
	for b in $(BINARIES); do install -m 0755 bin/$$b $(DESTDIR)$(SBINDIR)/$$b; done
	install -d $(DESTDIR)$(MANDIR)/man8
	install -m 0644 $(MANPAGES) $(DESTDIR)$(MANDIR)/man8/
	install -d $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR) $(DESTDIR)$(FISHCOMPDIR)
	install -m 0644 $(BASHCOMP) $(DESTDIR)$(BASHCOMPDIR)/
	install -m 0644 $(ZSHCOMP) $(DESTDIR)$(ZSHCOMPDIR)/
	install -m 0644 $(FISHCOMP) $(DESTDIR)$(FISHCOMPDIR)/
	install -d $(DESTDIR)$(DOCDIR)
	install -m 0644 $(USERDOCS) $(DESTDIR)$(DOCDIR)/

## uninstall: remove exactly the files install put under PREFIX
## Remove the files make install put there (same PREFIX and DESTDIR);
## directories stay, as they may hold other software's files
uninstall:
	rm -f $(addprefix $(DESTDIR)$(SBINDIR)/,$(BINARIES))
	rm -f $(addprefix $(DESTDIR)$(MANDIR)/man8/,$(notdir $(MANPAGES)))
	rm -f $(addprefix $(DESTDIR)$(BASHCOMPDIR)/,$(notdir $(BASHCOMP)))
	rm -f $(addprefix $(DESTDIR)$(ZSHCOMPDIR)/,$(notdir $(ZSHCOMP)))
	rm -f $(addprefix $(DESTDIR)$(FISHCOMPDIR)/,$(notdir $(FISHCOMP)))
	rm -f $(addprefix $(DESTDIR)$(DOCDIR)/,$(notdir $(USERDOCS)))

# What install puts where: programs in PREFIX/sbin (/sbin when PREFIX is
# empty), documentation and completions below PREFIX, or /usr when PREFIX is
# empty. zsh looks in vendor-completions only below /usr.
MANPAGES    = $(wildcard man/*.8)
# The user documentation the packages and install put in /usr/share/doc/lvskit
# (DOCDIR) and the tarball in doc/ beside README.md (packaging/nfpm.yaml lists the
# same files).
USERDOCS    = README.md $(addprefix docs/,lvsctl.md health.md lvsprep.md migrate-keepalived.md scale-out.md vrrp.md compatibility.md packaging.md)
BASHCOMP    = $(filter-out %.fish %.go,$(wildcard completions/bash/*))
ZSHCOMP     = $(wildcard completions/zsh/_*)
FISHCOMP    = $(wildcard completions/fish/*.fish)
SBINDIR     = $(PREFIX)/sbin
DATADIR     = $(or $(PREFIX),/usr)/share
MANDIR      = $(DATADIR)/man
DOCDIR      = $(DATADIR)/doc/lvskit
BASHCOMPDIR = $(DATADIR)/bash-completion/completions
ZSHCOMPDIR  = $(if $(filter /usr,$(or $(PREFIX),/usr)),$(DATADIR)/zsh/vendor-completions,$(DATADIR)/zsh/site-functions)
FISHCOMPDIR = $(DATADIR)/fish/vendor_completions.d

# Packages and release archives. ARCH is the one architecture variable (Go's
# and Debian's name: amd64, arm64); the programs are cross-compiled for it
# into PKG_BINDIR and checked (go version -m) before anything is packed.
ARCH         ?= $(shell $(GO) env GOARCH)
ARCHES       ?= amd64 arm64
DISTDIR      ?= dist
PKG_BINDIR   ?= .cache/build/linux_$(ARCH)
PKG_STAGEDIR ?= .cache/pkg/linux_$(ARCH)
RPM_ARCH      = $(or $(RPM_ARCH_$(ARCH)),$(ARCH))
RPM_ARCH_amd64 := x86_64
RPM_ARCH_arm64 := aarch64
# The package version. Given VERSION (make release VERSION=1.2.3): that,
# with git describe's -N-gHASH as +gitN.HASH and -dirty as +dirty. Otherwise
# from git: v1.2.3 tags give 1.2.3 (+gitN.HASH after them), untagged trees
# 0~gitN.HASH (N = commits); a dirty tree adds +dirty.
ifndef PKG_VERSION
ifneq ($(filter command line environment,$(origin VERSION)),)
PKG_VERSION := $(shell echo '$(VERSION)' | sed -E 's/^v//; s/-([0-9]+)-g([0-9a-f]+)/+git\1.\2/; s/-dirty$$/+dirty/')
else
PKG_VERSION := $(shell \
	d=$$(git describe --tags --match 'v[0-9]*' --dirty=+dirty 2>/dev/null) && \
	  echo "$$d" | sed -E 's/^v//; s/-([0-9]+)-g([0-9a-f]+)/+git\1.\2/' || \
	{ n=$$(git rev-list --count HEAD 2>/dev/null || echo 0); \
	  h=$$(git rev-parse --short HEAD 2>/dev/null || echo unknown); \
	  git diff --quiet HEAD 2>/dev/null && dirty= || dirty=+dirty; \
	  echo "0~git$$n.$$h$$dirty"; })
endif
endif
DEB_FILE     = $(DISTDIR)/lvskit_$(PKG_VERSION)_$(ARCH).deb
RPM_FILE     = $(DISTDIR)/lvskit-$(PKG_VERSION)-1.$(RPM_ARCH).rpm
TAR_NAME     = lvskit_$(VERSION)_linux_$(ARCH)
TAR_FILE     = $(DISTDIR)/$(TAR_NAME).tar.gz
SBOM_FILE    = $(DISTDIR)/lvskit_$(VERSION).cdx.json
NFPM_ENV     = LVSKIT_BINDIR=$(PKG_BINDIR) LVSKIT_STAGEDIR=$(PKG_STAGEDIR) PKG_VERSION=$(PKG_VERSION) PKG_ARCH=$(ARCH)

# The programs for ARCH, then check-arch.
pkg-bin:
	@case '$(PKG_VERSION)' in [0-9]*) ;; *) echo "package version '$(PKG_VERSION)' does not start with a digit: give VERSION=X.Y.Z" >&2; exit 1;; esac
	@if printf '%s' '$(PKG_VERSION)' | grep -q '[^A-Za-z0-9.+~]'; then echo "package version '$(PKG_VERSION)' has characters Debian and rpm versions do not allow" >&2; exit 1; fi
	@mkdir -p $(PKG_BINDIR)
	GOOS=linux GOARCH=$(ARCH) $(GOBUILD) -o $(PKG_BINDIR)/ ./cmd/...
	@$(MAKE) --no-print-directory check-arch ARCH=$(ARCH) PKG_BINDIR=$(PKG_BINDIR)

# Refuses to go on unless every program in PKG_BINDIR is a linux/ARCH build.
check-arch:
	@for b in $(BINARIES); do \
	  f=$(PKG_BINDIR)/$$b; \
	  got=$$($(GO) version -m $$f 2>/dev/null | awk '$$1 == "build" { split($$2, kv, "="); b[kv[1]] = kv[2] } END { print b["GOOS"] "/" b["GOARCH"] }'); \
	  if [ "$$got" != "linux/$(ARCH)" ]; then \
	    echo "$$f is built for '$$got', not linux/$(ARCH) (ARCH=$(ARCH)): not packaging it" >&2; exit 1; fi; \
	done

# Gzipped manual pages and the Debian changelog, for nfpm.
pkg-stage:
	rm -rf $(PKG_STAGEDIR) && mkdir -p $(PKG_STAGEDIR) $(DISTDIR)
	for p in $(MANPAGES); do gzip -9n < $$p > $(PKG_STAGEDIR)/$${p#man/}.gz; done
	sed 's/@VERSION@/$(PKG_VERSION)/' packaging/changelog | gzip -9n > $(PKG_STAGEDIR)/changelog.gz
	@# The .rpm's %changelog: nfpm.yaml plus a one-entry chglog file, dated
	@# by the commit (the .deb keeps its Debian changelog file).
	{ cat packaging/nfpm.yaml; echo; echo 'changelog: $(PKG_STAGEDIR)/rpm-changelog.yaml'; } > $(PKG_STAGEDIR)/nfpm-rpm.yaml
	printf -- '- semver: "%s-1"\n  date: %s\n  packager: "%s"\n  changes:\n    - note: "%s"\n' '$(PKG_VERSION)' \
		"$$(date -u -d @$(or $(SOURCE_DATE_EPOCH),0) +%Y-%m-%dT%H:%M:%SZ)" "$$(sed -n 's/^maintainer: //p' packaging/nfpm.yaml)" \
		'lvskit $(PKG_VERSION); the changes are in CHANGELOG.md (https://github.com/lvskit/lvskit)' > $(PKG_STAGEDIR)/rpm-changelog.yaml

## deb: the .deb for ARCH, into dist/
## Dist/lvskit_<version>_<arch>.deb with nfpm (pinned in tools/go.mod), from
## programs built for ARCH (default: this machine's); see docs/packaging.md
deb: tools pkg-bin pkg-stage
	rm -f $(DEB_FILE)
	$(NFPM_ENV) $(TOOLS)/nfpm package -p deb -f packaging/nfpm.yaml -t $(DEB_FILE)

## rpm: the .rpm for ARCH, into dist/
## Dist/lvskit-<version>-1.<rpm arch>.rpm with nfpm, from the same
## configuration as the .deb (packaging/nfpm.yaml, with rpm's paths)
rpm: tools pkg-bin pkg-stage
	rm -f $(RPM_FILE)
	$(NFPM_ENV) $(TOOLS)/nfpm package -p rpm -f $(PKG_STAGEDIR)/nfpm-rpm.yaml -t $(RPM_FILE)

## tarball: the binary archive for ARCH, into dist/
## Dist/lvskit_<version>_linux_<arch>.tar.gz: the programs, man pages,
## user documentation (doc/), completions, systemd units with their helper and configuration, README,
## LICENSE, CHANGELOG; sorted, owned by root, dated SOURCE_DATE_EPOCH
tarball: pkg-bin
	rm -rf $(PKG_STAGEDIR)-tar && mkdir -p $(DISTDIR)
	d=$(PKG_STAGEDIR)-tar/$(TAR_NAME); \
	install -d -m 0755 $$d/bin $$d/man/man8 $$d/doc $$d/completions/bash $$d/completions/zsh $$d/completions/fish \
		$$d/systemd $$d/libexec/lvskit $$d/etc/default && \
	install -m 0755 $(addprefix $(PKG_BINDIR)/,$(BINARIES)) $$d/bin/ && \
	install -m 0644 $(MANPAGES) $$d/man/man8/ && \
	install -m 0644 $(filter docs/%,$(USERDOCS)) $$d/doc/ && \
	install -m 0644 $(BASHCOMP) $$d/completions/bash/ && \
	install -m 0644 $(ZSHCOMP) $$d/completions/zsh/ && \
	install -m 0644 $(FISHCOMP) $$d/completions/fish/ && \
	install -m 0644 packaging/systemd/*.service $$d/systemd/ && \
	install -m 0755 packaging/ipvsadm-service $$d/libexec/lvskit/ && \
	install -m 0644 packaging/default/ipvsadm $$d/etc/default/ && \
	install -m 0644 packaging/ipvsadm.rules $$d/etc/ && \
	install -m 0644 README.md LICENSE CHANGELOG.md $$d/
	tar -C $(PKG_STAGEDIR)-tar --sort=name --mtime=@$(or $(SOURCE_DATE_EPOCH),0) --owner=0 --group=0 --numeric-owner \
		--format=gnu -cf $(PKG_STAGEDIR)-tar/$(TAR_NAME).tar $(TAR_NAME)
	gzip -9n < $(PKG_STAGEDIR)-tar/$(TAR_NAME).tar > $(TAR_FILE)

## sbom: the CycloneDX SBOM of the main module, into dist/
## Dist/lvskit_<version>.cdx.json (cyclonedx-gomod mod, pinned): every
## module the programs are built from, with licenses; no timestamp, and a
## serial number derived from the version and commit, so it is reproducible
sbom: tools
	@mkdir -p $(DISTDIR)
	serial=$$(printf 'lvskit %s %s' '$(VERSION)' "$$(git rev-parse HEAD 2>/dev/null)" | sha256sum | \
		sed -E 's/^(.{8})(.{4}).(.{3}).(.{3})(.{12}).*/\1-\2-8\3-8\4-\5/') && \
	$(TOOLS)/cyclonedx-gomod mod -json -licenses -notimestamp -serial $$serial -output $(SBOM_FILE) .

## release: tarball, .deb and .rpm for each of ARCHES, SBOM, SHA256SUMS
## Everything a release publishes, into DISTDIR (dist/): for each of ARCHES
## (amd64 arm64) the tarball, the .deb and the .rpm, then the SBOM and
## SHA256SUMS over all of them. make release VERSION=1.2.3; byte for byte
## reproducible from the same commit (docs/packaging.md)
release: tools
	@mkdir -p $(DISTDIR)
	rm -f $(DISTDIR)/lvskit_* $(DISTDIR)/lvskit-* $(DISTDIR)/SHA256SUMS
	for a in $(ARCHES); do \
	  $(MAKE) --no-print-directory tarball deb rpm ARCH=$$a VERSION='$(VERSION)' PKG_VERSION='$(PKG_VERSION)' DISTDIR='$(DISTDIR)' || exit 1; \
	done
	$(MAKE) --no-print-directory sbom VERSION='$(VERSION)' DISTDIR='$(DISTDIR)'
	cd $(DISTDIR) && ls lvskit_* lvskit-* | LC_ALL=C sort | xargs sha256sum > SHA256SUMS.tmp && mv SHA256SUMS.tmp SHA256SUMS
	@cat $(DISTDIR)/SHA256SUMS

## rpmlint: the .rpm, checked by rpmlint
## Build the .rpm and check it with rpmlint (fails on errors; the filters
## and their reasons are in packaging/rpm/rpmlint.toml)
rpmlint: deps rpm
	PATH=$(CURDIR)/packaging/rpm/bin:$$PATH rpmlint -c packaging/rpm/rpmlint.toml $(RPM_FILE)

## lintian: the .deb, checked by lintian
## Build the .deb and check it with lintian (fails on errors)
lintian: deps deb
	lintian --fail-on error --display-info $(DEB_FILE)

## clean: remove bin/ and dist/
clean:
	rm -rf bin dist
