// Package completions holds the shell completion scripts of lvskit's
// commands.
//
// They cover ipvsadm, ipvsadm-save, ipvsadm-restore, lvsctl and lvsprep for
// bash (bash/), zsh (zsh/) and fish (fish/). The tests run them in their own
// shells: the bash function is driven with COMP_WORDS/COMP_CWORD as readline
// would, zsh through its completion system in a pseudo-terminal, fish
// through `complete -C`. The scripts are data; this package has no Go API.
package completions
