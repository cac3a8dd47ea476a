# fish completion for ipvsadm-restore (lvskit): no arguments, the rules come
# from standard input.
complete -c ipvsadm-restore -f
