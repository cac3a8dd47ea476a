# fish completion for ipvsadm (lvskit)
#
# ipvsadm takes exactly one command, which must be the first option; after it
# only the options of that command are offered. Existing services (for -E -D
# -a -e -d -L -Z) and their real servers (for -e -d) are read from
# `ipvsadm -S -n`, which needs root.

# True while the command (the first option) is being typed.
function __fish_ipvsadm_needs_command
    set -l tokens (commandline -opc)
    test (count $tokens) -eq 1
end

# True when the command on the line is one of the arguments. A cluster such
# as -Ln counts as its first letter.
function __fish_ipvsadm_command_is
    set -l tokens (commandline -opc)
    set -q tokens[2]; or return 1
    set -l cmd $tokens[2]
    if string match -qr -- '^-[^-].' $cmd
        set cmd (string sub -l 2 -- $cmd)
    end
    contains -- $cmd $argv
end

# True when none of the options given as arguments is on the line yet. While
# an option's value is being completed, that option (the last token) does not
# count.
function __fish_ipvsadm_unused
    set -l tokens (commandline -opc)
    set -l last -1
    string match -q -- '-*' (commandline -ct); or set last -2
    for t in $tokens[3..$last]
        contains -- (string replace -r -- '=.*' '' $t) $argv; and return 1
    end
    return 0
end

# True when the command and its options allow another option from the
# argument list: the command is one of those before "--", the options after
# it are not on the line yet.
function __fish_ipvsadm_offer
    set -l i (contains -i -- -- $argv)
    __fish_ipvsadm_command_is $argv[1..(math $i - 1)]
    and __fish_ipvsadm_unused $argv[(math $i + 1)..-1]
end

# Prints the existing services of kind $argv[1] (-t, -u, --sctp-service or -f).
function __fish_ipvsadm_services
    ipvsadm -S -n 2>/dev/null | while read -l cmd kind addr rest
        if test "$cmd" = -A; and test "$kind" = "$argv[1]"
            echo $addr
        end
    end
end

# Prints the real servers of the service named on the command line.
function __fish_ipvsadm_servers
    set -l tokens (commandline -opc)
    set -l svc
    set -l ipv6
    for i in (seq 3 (count $tokens))
        set -l next (math $i + 1)
        switch $tokens[$i]
            case -t --tcp-service
                set svc "-t $tokens[$next]"
            case -u --udp-service
                set svc "-u $tokens[$next]"
            case --sctp-service
                set svc "--sctp-service $tokens[$next]"
            case -f --fwmark-service
                set svc "-f $tokens[$next]"
            case -6 --ipv6
                set ipv6 " -6"
        end
    end
    test -n "$svc"; or return
    ipvsadm -S -n 2>/dev/null | while read -l line
        string match -q -- '-a *' $line; or continue
        set -l rest (string replace -- '-a ' '' $line)
        set -l parts (string split -m 1 -- ' -r ' $rest)
        test "$parts[1]" = "$svc$ipv6"; or continue
        string split -f 1 -- ' ' $parts[2]
    end
end

# Prints the scheduler flags that fit the scheduler on the line (wlc when
# none), continuing the comma-separated list being typed.
function __fish_ipvsadm_sched_flags
    set -l tokens (commandline -opc)
    set -l sched wlc
    for i in (seq 3 (count $tokens))
        switch $tokens[$i]
            case -s --scheduler
                set -q tokens[(math $i + 1)]; and set sched $tokens[(math $i + 1)]
            case '--scheduler=*'
                set sched (string replace -- '--scheduler=' '' $tokens[$i])
        end
    end
    set -l flags flag-1 flag-2 flag-3
    switch $sched
        case sh
            set -a flags sh-fallback sh-port
        case mh
            set -a flags mh-fallback mh-port
    end
    set -l cur (commandline -ct)
    set -l done_part ''
    if string match -q -- '*,*' $cur
        set done_part (string replace -r -- ',[^,]*$' ',' $cur)
    end
    for f in $flags
        contains -- $f (string split , -- $done_part); or echo $done_part$f
    end
end

complete -c ipvsadm -f

# Commands.
complete -c ipvsadm -n __fish_ipvsadm_needs_command -s A -l add-service -d 'Add a virtual service'
complete -c ipvsadm -n __fish_ipvsadm_needs_command -s E -l edit-service -d 'Edit a virtual service'
complete -c ipvsadm -n __fish_ipvsadm_needs_command -s D -l delete-service -d 'Delete a virtual service'
complete -c ipvsadm -n __fish_ipvsadm_needs_command -s C -l clear -d 'Clear the whole table'
complete -c ipvsadm -n __fish_ipvsadm_needs_command -s R -l restore -d 'Restore rules from stdin'
complete -c ipvsadm -n __fish_ipvsadm_needs_command -s S -l save -d 'Save rules to stdout'
complete -c ipvsadm -n __fish_ipvsadm_needs_command -s a -l add-server -d 'Add a real server'
complete -c ipvsadm -n __fish_ipvsadm_needs_command -s e -l edit-server -d 'Edit a real server'
complete -c ipvsadm -n __fish_ipvsadm_needs_command -s d -l delete-server -d 'Delete a real server'
complete -c ipvsadm -n __fish_ipvsadm_needs_command -s L -l list -d 'List the table'
complete -c ipvsadm -n __fish_ipvsadm_needs_command -s l -d 'List the table'
complete -c ipvsadm -n __fish_ipvsadm_needs_command -s Z -l zero -d 'Zero counters'
complete -c ipvsadm -n __fish_ipvsadm_needs_command -l set -d 'Set tcp tcpfin udp timeouts'
complete -c ipvsadm -n __fish_ipvsadm_needs_command -l start-daemon -x -a 'master backup' -d 'Start a sync daemon'
complete -c ipvsadm -n __fish_ipvsadm_needs_command -l stop-daemon -x -a 'master backup' -d 'Stop a sync daemon'
complete -c ipvsadm -n __fish_ipvsadm_needs_command -s h -l help -d 'Show the syntax summary'
complete -c ipvsadm -n __fish_ipvsadm_needs_command -s v -l version -d 'Show the version'

# The virtual service: existing ones where the command needs one.
set -l __ipvsadm_svc_group -t --tcp-service -u --udp-service --sctp-service -f --fwmark-service
set -l __ipvsadm_new -A --add-service
set -l __ipvsadm_existing -E --edit-service -D --delete-service -a --add-server -e --edit-server -d --delete-server -L -l --list -Z --zero
for cmds in "$__ipvsadm_new" "$__ipvsadm_existing"
    set -l cmd (string split ' ' -- $cmds)
    set -l cond "__fish_ipvsadm_offer $cmd -- $__ipvsadm_svc_group"
    if test "$cmd[1]" = -A
        complete -c ipvsadm -n $cond -s t -l tcp-service -x -d 'TCP service host[:port]'
        complete -c ipvsadm -n $cond -s u -l udp-service -x -d 'UDP service host[:port]'
        complete -c ipvsadm -n $cond -l sctp-service -x -d 'SCTP service host[:port]'
        complete -c ipvsadm -n $cond -s f -l fwmark-service -x -d 'Firewall-mark service'
    else
        complete -c ipvsadm -n $cond -s t -l tcp-service -x -a '(__fish_ipvsadm_services -t)' -d 'TCP service'
        complete -c ipvsadm -n $cond -s u -l udp-service -x -a '(__fish_ipvsadm_services -u)' -d 'UDP service'
        complete -c ipvsadm -n $cond -l sctp-service -x -a '(__fish_ipvsadm_services --sctp-service)' -d 'SCTP service'
        complete -c ipvsadm -n $cond -s f -l fwmark-service -x -a '(__fish_ipvsadm_services -f)' -d 'Firewall-mark service'
    end
end
complete -c ipvsadm -n "__fish_ipvsadm_offer $__ipvsadm_new $__ipvsadm_existing -- -6 --ipv6; and __fish_seen_argument -s f -l fwmark-service" -s 6 -l ipv6 -d 'The fwmark service is IPv6'

# Options of -A and -E.
set -l __ipvsadm_svc -A --add-service -E --edit-service
complete -c ipvsadm -n "__fish_ipvsadm_offer $__ipvsadm_svc -- -s --scheduler" -s s -l scheduler -x -a 'rr wrr lc wlc lblc lblcr dh sh sed nq fo ovf mh' -d 'Scheduling algorithm'
complete -c ipvsadm -n "__fish_ipvsadm_offer $__ipvsadm_svc -- -p --persistent" -s p -l persistent -d 'Persistent service [timeout]'
complete -c ipvsadm -n "__fish_ipvsadm_offer $__ipvsadm_svc -- -M --netmask" -s M -l netmask -x -d 'Persistence granularity mask'
complete -c ipvsadm -n "__fish_ipvsadm_offer $__ipvsadm_svc -- --pe" -l pe -x -a sip -d 'Persistence engine'
complete -c ipvsadm -n "__fish_ipvsadm_offer $__ipvsadm_svc -- -b --sched-flags" -s b -l sched-flags -x -a '(__fish_ipvsadm_sched_flags)' -d 'Scheduler flags'
complete -c ipvsadm -n "__fish_ipvsadm_offer $__ipvsadm_svc -- -o --ops" -s o -l ops -d 'One-packet scheduling'

# Options of -a, -e and -d.
set -l __ipvsadm_rs -a --add-server -e --edit-server -d --delete-server
set -l __ipvsadm_rs_edit -a --add-server -e --edit-server
complete -c ipvsadm -n "__fish_ipvsadm_offer -a --add-server -- -r --real-server" -s r -l real-server -x -d 'Real server host[:port]'
complete -c ipvsadm -n "__fish_ipvsadm_offer -e --edit-server -d --delete-server -- -r --real-server" -s r -l real-server -x -a '(__fish_ipvsadm_servers)' -d 'Real server'
set -l __ipvsadm_fwd -g --gatewaying -i --ipip -m --masquerading
complete -c ipvsadm -n "__fish_ipvsadm_offer $__ipvsadm_rs_edit -- $__ipvsadm_fwd" -s g -l gatewaying -d 'Direct routing (default)'
complete -c ipvsadm -n "__fish_ipvsadm_offer $__ipvsadm_rs_edit -- $__ipvsadm_fwd" -s i -l ipip -d 'Tunnelling'
complete -c ipvsadm -n "__fish_ipvsadm_offer $__ipvsadm_rs_edit -- $__ipvsadm_fwd" -s m -l masquerading -d 'Masquerading (NAT)'
complete -c ipvsadm -n "__fish_ipvsadm_offer $__ipvsadm_rs_edit -- -w --weight" -s w -l weight -x -d 'Weight (default 1)'
complete -c ipvsadm -n "__fish_ipvsadm_offer $__ipvsadm_rs_edit -- -x --u-threshold" -s x -l u-threshold -x -d 'Upper connection threshold'
complete -c ipvsadm -n "__fish_ipvsadm_offer $__ipvsadm_rs_edit -- -y --l-threshold" -s y -l l-threshold -x -d 'Lower connection threshold'
complete -c ipvsadm -n "__fish_ipvsadm_offer $__ipvsadm_rs_edit -- --tun-type" -l tun-type -x -a 'ipip gue gre' -d 'Tunnel type'
complete -c ipvsadm -n "__fish_ipvsadm_offer $__ipvsadm_rs_edit -- --tun-port" -l tun-port -x -d 'GUE tunnel port'
set -l __ipvsadm_csum --tun-nocsum --tun-csum --tun-remcsum
complete -c ipvsadm -n "__fish_ipvsadm_offer $__ipvsadm_rs_edit -- $__ipvsadm_csum" -l tun-nocsum -d 'Tunnel without checksum'
complete -c ipvsadm -n "__fish_ipvsadm_offer $__ipvsadm_rs_edit -- $__ipvsadm_csum" -l tun-csum -d 'Tunnel with checksum'
complete -c ipvsadm -n "__fish_ipvsadm_offer $__ipvsadm_rs_edit -- $__ipvsadm_csum" -l tun-remcsum -d 'Tunnel with remote checksum offload'

# Options of -L (and -n of -S).
set -l __ipvsadm_list -L -l --list
complete -c ipvsadm -n "__fish_ipvsadm_offer $__ipvsadm_list -S --save -- -n --numeric" -s n -l numeric -d 'Numeric addresses and ports'
complete -c ipvsadm -n "__fish_ipvsadm_offer $__ipvsadm_list -- -c --connection" -s c -l connection -d 'List connections'
complete -c ipvsadm -n "__fish_ipvsadm_offer $__ipvsadm_list -- --timeout" -l timeout -d 'Show timeouts'
complete -c ipvsadm -n "__fish_ipvsadm_offer $__ipvsadm_list -- --daemon" -l daemon -d 'Show sync daemons'
complete -c ipvsadm -n "__fish_ipvsadm_offer $__ipvsadm_list -- --stats" -l stats -d 'Show statistics'
complete -c ipvsadm -n "__fish_ipvsadm_offer $__ipvsadm_list -- --rate" -l rate -d 'Show rates'
complete -c ipvsadm -n "__fish_ipvsadm_offer $__ipvsadm_list -- --thresholds" -l thresholds -d 'Show thresholds'
complete -c ipvsadm -n "__fish_ipvsadm_offer $__ipvsadm_list -- --persistent-conn" -l persistent-conn -d 'Show persistent connections'
complete -c ipvsadm -n "__fish_ipvsadm_offer $__ipvsadm_list -- --tun-info" -l tun-info -d 'Show tunnel information'
complete -c ipvsadm -n "__fish_ipvsadm_offer $__ipvsadm_list -- --exact -X" -s X -l exact -d 'Exact numbers'
complete -c ipvsadm -n "__fish_ipvsadm_offer $__ipvsadm_list -- --nosort" -l nosort -d 'Do not sort'
complete -c ipvsadm -n "__fish_ipvsadm_offer $__ipvsadm_list -- --sort" -l sort -d 'Sort (default, does nothing)'

# Sync daemon options.
complete -c ipvsadm -n "__fish_ipvsadm_offer $__ipvsadm_list --start-daemon --stop-daemon -- --syncid" -l syncid -x -d 'Sync id (0-255, default 0)'
complete -c ipvsadm -n "__fish_ipvsadm_offer --start-daemon -- --mcast-interface" -l mcast-interface -x -a '(__fish_print_interfaces)' -d 'Multicast interface'
complete -c ipvsadm -n "__fish_ipvsadm_offer --start-daemon -- --sync-maxlen" -l sync-maxlen -x -d 'Max sync message length'
complete -c ipvsadm -n "__fish_ipvsadm_offer --start-daemon -- --mcast-group" -l mcast-group -x -d 'Multicast group address'
complete -c ipvsadm -n "__fish_ipvsadm_offer --start-daemon -- --mcast-port" -l mcast-port -x -d 'Multicast UDP port'
complete -c ipvsadm -n "__fish_ipvsadm_offer --start-daemon -- --mcast-ttl" -l mcast-ttl -x -d 'Multicast TTL'

# The role of --start-daemon and --stop-daemon.
complete -c ipvsadm -n '__fish_ipvsadm_command_is --start-daemon --stop-daemon; and test (count (commandline -opc)) -eq 2' -x -a 'master backup' -d Role
