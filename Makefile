# lvskit: ipvsadm-compatible tools for Linux IPVS, and the lab that tests them
# against the real kernel. Every target means the same locally and in CI.

GO       ?= go
PREFIX   ?= /usr
DESTDIR  ?=
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X github.com/lvskit/lvskit/internal/version.Version=$(VERSION)
BINARIES := ipvsadm ipvsadm-save ipvsadm-restore lvsprep
export CGO_ENABLED := 0

.PHONY: all build test unit lab labrun check install deb demo lab-run clean

all: build

## build: static binaries into bin/
build:
	@mkdir -p bin
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/ ./cmd/...

## test: everything: static checks, host unit tests, then the kernel lab
test: check unit lab

## unit: host-side tests (no kernel IPVS needed)
unit:
	$(GO) test ./...

## lab: tests that need the real kernel, run inside the QEMU lab (one boot;
## installs the lab's Debian packages when root). Narrow it with
## make lab LAB_ARGS='-run TestName ./ipvs'
LABRUN   := .cache/lab/labrun
LAB_ARGS ?=
lab: build labrun
	$(LABRUN) -tests $(LAB_ARGS)

labrun:
	$(GO) build -o $(LABRUN) ./lab/labrun

## check: gofmt, go vet, staticcheck (pinned as a Go tool dependency)
check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags lab ./...
	$(GO) tool staticcheck ./...
	$(GO) tool staticcheck -tags lab ./...

## lab-run: run any shell command inside the lab with our bin/ first on PATH,
## e.g. make lab-run CMD='ipvsadm -Ln'; exits with the command's status
lab-run: build labrun
	@if [ -z "$$CMD" ]; then echo "usage: make lab-run CMD='ipvsadm -Ln'" >&2; exit 2; fi
	$(LABRUN) -- "$$CMD"

## install: binaries, man pages, completions (honours PREFIX and DESTDIR)
install: build
	install -d $(DESTDIR)$(PREFIX)/sbin
	for b in $(BINARIES); do install -m 0755 bin/$$b $(DESTDIR)$(PREFIX)/sbin/$$b; done

clean:
	rm -rf bin dist
