package packaging_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/packaging/hosttool"
)

// makeInstall runs `make install` in the fresh clone into a new DESTDIR.
func makeInstall(t *testing.T, prefix string) string {
	t.Helper()
	clone := freshClone(t)
	dest := t.TempDir()
	makeMu.Lock()
	defer makeMu.Unlock()
	if _, err := command(clone, cleanMakeEnv, "make", "install", "DESTDIR="+dest, "PREFIX="+prefix); err != nil {
		t.Fatal(err)
	}
	return dest
}

func requireFiles(t *testing.T, dest string, files ...string) {
	t.Helper()
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(dest, f)); err != nil {
			t.Errorf("make install did not install %s: %v", f, err)
		}
	}
}

// TestMakeInstallLayout checks `make install DESTDIR=... PREFIX=/usr`: the
// programs in /usr/sbin, and the manual pages and completions in the
// directories where Debian's man-db, bash-completion, zsh and fish look for
// them, which it verifies by asking each tool for its search path and by
// loading the installed completions from DESTDIR the way each shell does.
func TestMakeInstallLayout(t *testing.T) {
	buildsWithMake(t)
	t.Parallel()
	dest := makeInstall(t, "/usr")
	var files []string
	for name := range programs {
		files = append(files, "usr/sbin/"+name)
	}
	pages, _ := filepath.Glob("../man/*.8")
	for _, p := range pages {
		files = append(files, "usr/share/man/man8/"+filepath.Base(p))
	}
	const (
		bashDir = "/usr/share/bash-completion/completions"
		zshDir  = "/usr/share/zsh/vendor-completions"
		fishDir = "/usr/share/fish/vendor_completions.d"
	)
	for _, c := range []string{"ipvsadm", "ipvsadm-save", "ipvsadm-restore", "lvsprep", "lvsctl"} {
		files = append(files, bashDir[1:]+"/"+c, fishDir[1:]+"/"+c+".fish")
	}
	files = append(files, zshDir[1:]+"/_ipvsadm", zshDir[1:]+"/_lvsprep", zshDir[1:]+"/_lvsctl")
	for _, d := range userDocs {
		files = append(files, "usr/share/doc/lvskit/"+d)
	}
	requireFiles(t, dest, files...)
	for name := range programs {
		if fi, err := os.Stat(filepath.Join(dest, "usr/sbin", name)); err == nil && fi.Mode().Perm() != 0o755 {
			t.Errorf("%s has mode %v", name, fi.Mode())
		}
	}

	// man-db: the installed tree is a manual hierarchy man finds pages in,
	// and /usr/share/man is where it looks by default.
	hosttool.Require(t, "man", "man-db")
	if out, err := command(".", nil, "man", "-M", filepath.Join(dest, "usr/share/man"), "-w", "ipvsadm"); err != nil ||
		strings.TrimSpace(out) != filepath.Join(dest, "usr/share/man/man8/ipvsadm.8") {
		t.Errorf("man -w ipvsadm in the installed tree: %q %v", out, err)
	}
	if out, _ := command(".", []string{"MANPATH="}, "manpath", "-g"); !slices.Contains(strings.Split(strings.TrimSpace(out), ":"), "/usr/share/man") {
		t.Errorf("man-db's global manpath %q lacks /usr/share/man", out)
	}

	// bash-completion: its loader finds the installed files (for all three
	// commands) through XDG_DATA_DIRS, and its own directory is bashDir.
	lib := hosttool.RequireFile(t, "/usr/share/bash-completion/bash_completion", "bash-completion")
	pc, err := os.ReadFile("/usr/share/pkgconfig/bash-completion.pc")
	if err != nil || !strings.Contains(string(pc), "completionsdir=${datadir}/bash-completion/completions\n") || !strings.Contains(string(pc), "datadir=/usr/share\n") {
		t.Errorf("bash-completion.pc does not name %s (%v)", bashDir, err)
	}
	out, err := command(".", []string{"XDG_DATA_DIRS=" + filepath.Join(dest, "usr/share")}, "bash", "--norc", "--noprofile", "-c",
		"source "+lib+"; for c in ipvsadm ipvsadm-save ipvsadm-restore; do __load_completion $c || exit 1; done; complete -p ipvsadm ipvsadm-save ipvsadm-restore")
	if err != nil || out != "complete -F _ipvsadm ipvsadm\ncomplete -F _ipvsadm_save ipvsadm-save\ncomplete -F _ipvsadm_restore ipvsadm-restore\n" {
		t.Errorf("bash-completion did not load the installed completions: %q %v", out, err)
	}

	// zsh: zshDir is on its default fpath, and compinit picks up _ipvsadm
	// from the installed copy.
	hosttool.Require(t, "zsh", "zsh")
	if out, _ := command(".", nil, "zsh", "-f", "-c", "print -l $fpath"); !slices.Contains(strings.Fields(out), zshDir) {
		t.Errorf("zsh's fpath lacks %s:\n%s", zshDir, out)
	}
	if out, err := command(".", nil, "zsh", "-f", "-c", "fpath=("+filepath.Join(dest, zshDir)+" $fpath); autoload -U compinit; compinit -u -D; print $_comps[ipvsadm]"); err != nil || out != "_ipvsadm\n" {
		t.Errorf("zsh did not register the installed _ipvsadm: %q %v", out, err)
	}

	// fish: fishDir is one of its vendor completion directories, and it
	// autoloads ipvsadm.fish from the installed copy.
	// (Without -N fish reads its own config.fish, which sets the paths; a
	// temporary HOME keeps the user's configuration out.) fish autoloads a
	// command's completions only when the command is on PATH, so PATH is
	// the installed tree's sbin and the system's: with the host's PATH the
	// result depended on whether Debian's ipvsadm happened to be installed
	// (it was not on a fresh machine, which failed this test on the first
	// run only).
	hosttool.Require(t, "fish", "fish")
	home := []string{"HOME=" + t.TempDir(), "XDG_CONFIG_HOME=" + t.TempDir(), "XDG_DATA_HOME=" + t.TempDir(),
		"PATH=" + filepath.Join(dest, "usr/sbin") + ":/usr/bin:/bin"}
	if out, _ := command(".", home, "fish", "-c", "printf '%s\\n' $__fish_vendor_completionsdirs"); !slices.Contains(strings.Fields(out), fishDir) {
		t.Errorf("fish's vendor completion directories lack %s:\n%s", fishDir, out)
	}
	if out, err := command(".", home, "fish", "-c", "set -p fish_complete_path "+filepath.Join(dest, fishDir)+"; complete -C 'ipvsadm-save -'"); err != nil || !strings.HasPrefix(out, "-n\t") {
		t.Errorf("fish did not autoload the installed ipvsadm-save.fish: %q %v", out, err)
	}
}

// TestMakeInstallEmptyPrefix: PREFIX= installs the programs in /sbin, like
// Debian's ipvsadm, and everything else below /usr.
func TestMakeInstallEmptyPrefix(t *testing.T) {
	buildsWithMake(t)
	t.Parallel()
	dest := makeInstall(t, "")
	requireFiles(t, dest, "sbin/ipvsadm", "sbin/ipvsadm-save", "sbin/ipvsadm-restore", "sbin/lvsprep", "sbin/lvsctl",
		"usr/share/man/man8/ipvsadm.8", "usr/share/bash-completion/completions/ipvsadm",
		"usr/share/zsh/vendor-completions/_ipvsadm", "usr/share/fish/vendor_completions.d/ipvsadm.fish")
	if _, err := os.Stat(filepath.Join(dest, "share")); err == nil {
		t.Error("PREFIX= installed something below /share")
	}
}

// TestMakeInstallDefaultsToUsrLocalAndUninstalls: without PREFIX, make
// install stays out of the package manager's /usr (programs in
// /usr/local/sbin, the rest below /usr/local/share, zsh's completions in
// site-functions); make uninstall then removes exactly those files and
// leaves another program's file in the same directories alone.
func TestMakeInstallDefaultsToUsrLocalAndUninstalls(t *testing.T) {
	buildsWithMake(t)
	t.Parallel()
	clone := freshClone(t)
	dest := t.TempDir()
	makeMu.Lock()
	defer makeMu.Unlock()
	if _, err := command(clone, cleanMakeEnv, "make", "install", "DESTDIR="+dest); err != nil {
		t.Fatal(err)
	}
	var installed []string
	err := filepath.WalkDir(dest, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			installed = append(installed, strings.TrimPrefix(path, dest+"/"))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range installed {
		if !strings.HasPrefix(f, "usr/local/") {
			t.Errorf("make install without PREFIX wrote %s, outside /usr/local", f)
		}
	}
	requireFiles(t, dest, "usr/local/sbin/ipvsadm", "usr/local/sbin/lvsctl", "usr/local/share/man/man8/ipvsadm.8",
		"usr/local/share/bash-completion/completions/ipvsadm", "usr/local/share/zsh/site-functions/_ipvsadm",
		"usr/local/share/fish/vendor_completions.d/ipvsadm.fish")
	pages, _ := filepath.Glob("../man/*.8")
	if want := len(programs) + len(pages) + 5 + 3 + 5 + len(userDocs); len(installed) != want {
		t.Errorf("make install wrote %d files, want %d: %q", len(installed), want, installed)
	}

	other := filepath.Join(dest, "usr/local/sbin/other-tool")
	if err := os.WriteFile(other, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := command(clone, cleanMakeEnv, "make", "uninstall", "DESTDIR="+dest); err != nil {
		t.Fatal(err)
	}
	for _, f := range installed {
		if _, err := os.Lstat(filepath.Join(dest, f)); err == nil {
			t.Errorf("make uninstall left %s", f)
		}
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("make uninstall removed another program's file: %v", err)
	}
}
