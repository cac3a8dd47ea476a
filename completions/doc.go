// Package completions holds the shell completion scripts of ipvsadm,
// ipvsadm-save, ipvsadm-restore, lvsctl and lvsprep for bash (bash/), zsh
// (zsh/) and fish (fish/), and the tests that run them in their own shells:
// the bash function is driven with COMP_WORDS/COMP_CWORD as readline would,
// zsh through its completion system in a pseudo-terminal, fish through
// `complete -C`. The scripts are data; this package has no Go API.
package completions
