# fish completion for ipvsadm-save (lvskit)
complete -c ipvsadm-save -f
complete -c ipvsadm-save -s n -d 'Numeric addresses and ports'
