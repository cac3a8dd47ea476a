# Drives zsh's completion system in a pseudo-terminal, for the tests.
# usage: zsh -f complete.zsh FPATH_DIR LINE...
# Starts an interactive zsh with compinit and FPATH_DIR first in fpath, types
# each LINE followed by TAB, and prints every match the completion functions
# add (captured by wrapping compadd), then a line "<<END>>".
zmodload zsh/zpty || exit 1
local dir=$1 line out
shift
zpty z zsh -f -i
zpty -w z "PS1='' RPROMPT=''; fpath=(${(q)dir} \$fpath); autoload -U compinit; compinit -u -D"
zpty -w z 'compadd() {
  if (( ${@[(I)-[OAD]]} )); then builtin compadd "$@"; return; fi
  local -a __m; builtin compadd -O __m "$@"
  (( $#__m )) && print -rl -- "<<M>>"${^__m} >&2
  builtin compadd "$@"
}'
# TAB runs the completion and then reports that it is over, so that nothing
# is typed ahead while it runs (completion behaves differently then).
zpty -w z '__t_done() { print -r -- "<<"COMPDONE">>" >&2 }'
zpty -w z '__t_complete() { comppostfuncs=(__t_done); zle complete-word }'
zpty -w z 'zle -N __t_complete; bindkey "^I" __t_complete; zstyle ":completion:*" menu no; print "<<"READY">>"'
while zpty -r z out; do [[ $out == *'<<READY>>'* ]] && break; done
for line in "$@"; do
  zpty -w -n z "$line"$'\t'
  while zpty -r z out; do
    [[ $out == *'<<COMPDONE>>'* ]] && break
    [[ $out == *'<<M>>'* ]] && print -r -- "${${out##*<<M>>}%%$'\r'*}"
  done
  print -r -- '<<END>>'
  zpty -w -n z $'\C-e\C-u'
done
zpty -d z
