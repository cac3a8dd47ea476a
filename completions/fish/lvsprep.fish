# fish completion for lvsprep (lvskit)
#
# lvsprep <command> [flags]: the commands are director {nat,fullnat,dr,tun,ecmp},
# realserver (or rs) {dr,tun,nat}, check followed by one of those, status,
# and bird {director,router}. The global flags may appear anywhere; each
# command is offered those that mean something to it: --version before any
# command, --dry-run and --undo except for check, status and bird,
# --state-dir except for bird.

# Prints the command words typed so far (flag values skipped, rs spelled
# realserver), separated by spaces.
function __fish_lvsprep_path
    set -l tokens (commandline -opc)
    set -l path
    set -l skip 0
    for t in $tokens[2..-1]
        if test $skip -eq 1
            set skip 0
            continue
        end
        switch $t
            case --state-dir --vip --dev --rs-net --out-dev --snat --proto --port --gateway \
                --router --router-as --as --router-id --device --static --hold --director --director-as --prefix
                set skip 1
            case '-*'
            case rs
                set -a path realserver
            case '*'
                set -a path $t
        end
    end
    echo $path
end

# True when the command words typed so far are exactly the arguments.
function __fish_lvsprep_path_is
    test "$(__fish_lvsprep_path)" = "$argv"
end

# True when the profile (the command without "check") is one of the arguments.
function __fish_lvsprep_profile_is
    set -l p (string replace -r -- '^check ' '' (__fish_lvsprep_path))
    contains -- "$p" $argv
end

complete -c lvsprep -f

# True when the command typed so far may change the host (not check,
# status or bird), so that --dry-run and --undo mean something to it.
function __fish_lvsprep_changes
    set -l p (__fish_lvsprep_path)
    not string match -qr -- '^(check|status|bird)( |$)' "$p"
end

# True when the command typed so far has a state directory (not bird).
function __fish_lvsprep_has_state
    set -l p (__fish_lvsprep_path)
    not string match -qr -- '^bird( |$)' "$p"
end

# Global flags.
complete -c lvsprep -s h -l help -d 'Show context-sensitive help'
complete -c lvsprep -n __fish_lvsprep_changes -s n -l dry-run -d 'Print the equivalent commands instead of changing anything'
complete -c lvsprep -n __fish_lvsprep_changes -l undo -d 'Restore what the profile changed, from its state file'
complete -c lvsprep -n __fish_lvsprep_has_state -l state-dir -x -a '(__fish_complete_directories)' -d 'Where applied profiles record what they changed'
complete -c lvsprep -n '__fish_lvsprep_path_is ""' -l version -d 'Print the version and exit'

# Commands.
complete -c lvsprep -n '__fish_lvsprep_path_is ""' -a director -d 'Prepare a director (the host running IPVS)'
complete -c lvsprep -n '__fish_lvsprep_path_is ""' -a realserver -d 'Prepare a real server behind a director'
complete -c lvsprep -n '__fish_lvsprep_path_is ""' -a rs -d 'Prepare a real server (short for realserver)'
complete -c lvsprep -n '__fish_lvsprep_path_is ""' -a check -d 'Tell what is missing or wrong for a profile'
complete -c lvsprep -n '__fish_lvsprep_path_is ""' -a status -d 'List the profiles applied on this host'
complete -c lvsprep -n '__fish_lvsprep_path_is ""' -a bird -d 'Print the BIRD 2 configuration of a director or router'
complete -c lvsprep -n '__fish_lvsprep_path_is bird' -a director -d "A director's bird.conf"
complete -c lvsprep -n '__fish_lvsprep_path_is bird' -a router -d "The router's bird.conf"
complete -c lvsprep -n '__fish_lvsprep_path_is check' -a 'director realserver rs' -d 'Profile to check'
for p in director 'check director'
    complete -c lvsprep -n "__fish_lvsprep_path_is $p" -a nat -d 'VS/NAT director'
    complete -c lvsprep -n "__fish_lvsprep_path_is $p" -a fullnat -d 'Full-NAT director'
    complete -c lvsprep -n "__fish_lvsprep_path_is $p" -a dr -d 'VS/DR director'
    complete -c lvsprep -n "__fish_lvsprep_path_is $p" -a tun -d 'VS/TUN director'
    complete -c lvsprep -n "__fish_lvsprep_path_is $p" -a ecmp -d 'DR/TUN director in a BGP ECMP group'
end
for p in realserver 'check realserver'
    complete -c lvsprep -n "__fish_lvsprep_path_is $p" -a dr -d 'VS/DR real server'
    complete -c lvsprep -n "__fish_lvsprep_path_is $p" -a tun -d 'VS/TUN real server'
    complete -c lvsprep -n "__fish_lvsprep_path_is $p" -a nat -d 'VS/NAT real server'
end

# Flags of the profiles.
complete -c lvsprep -n "__fish_lvsprep_profile_is 'director nat' 'director fullnat' 'director dr' 'director tun' 'director ecmp' 'realserver dr' 'realserver tun'" -l vip -x -d 'Virtual IP'
complete -c lvsprep -n "__fish_lvsprep_profile_is 'director nat' 'director fullnat' 'director dr' 'director tun' 'director ecmp' 'realserver dr' 'realserver tun' 'realserver nat'" -l dev -x -a '(__fish_print_interfaces)' -d Interface
complete -c lvsprep -n "__fish_lvsprep_profile_is 'director nat'" -l rs-net -x -d "Real servers' subnet, masqueraded"
complete -c lvsprep -n "__fish_lvsprep_profile_is 'director nat'" -l out-dev -x -a '(__fish_print_interfaces)' -d 'Masquerade only traffic leaving through this interface'
complete -c lvsprep -n "__fish_lvsprep_profile_is 'director nat'" -l ftp -d 'Load the IPVS FTP helper'
complete -c lvsprep -n "__fish_lvsprep_profile_is 'director nat' 'director dr' 'director tun'" -l vrrp -d 'Leave the VIP to VRRP (keepalived)'
complete -c lvsprep -n "__fish_lvsprep_profile_is 'director fullnat'" -l snat -x -d 'Director address the real servers see as the client'
complete -c lvsprep -n "__fish_lvsprep_profile_is 'director fullnat'" -l proto -x -a 'tcp udp sctp' -d 'Protocol of --port'
complete -c lvsprep -n "__fish_lvsprep_profile_is 'director fullnat'" -l port -x -d 'Rewrite only connections to this VIP port'
complete -c lvsprep -n "__fish_lvsprep_profile_is 'realserver nat'" -l gateway -x -d "Director's address on the real servers' network"

# Flags of bird.
complete -c lvsprep -n "__fish_lvsprep_profile_is 'bird director'" -l router -x -d "Router's IPv4 address"
complete -c lvsprep -n "__fish_lvsprep_profile_is 'bird director'" -l router-as -x -d "Router's AS number"
complete -c lvsprep -n "__fish_lvsprep_profile_is 'bird director' 'bird router'" -l as -x -d 'AS number (directors, or router)'
complete -c lvsprep -n "__fish_lvsprep_profile_is 'bird director'" -l device -x -a '(__fish_print_interfaces)' -d 'Interface whose addresses are announced'
complete -c lvsprep -n "__fish_lvsprep_profile_is 'bird director'" -l static -x -d 'VIP to announce always, without lvsctl run'
complete -c lvsprep -n "__fish_lvsprep_profile_is 'bird router'" -l director-as -x -d "Directors' AS number"
complete -c lvsprep -n "__fish_lvsprep_profile_is 'bird router'" -l director -x -d "A director's IPv4 address"
complete -c lvsprep -n "__fish_lvsprep_profile_is 'bird router'" -l prefix -x -d 'Accept this prefix besides host routes'
complete -c lvsprep -n "__fish_lvsprep_profile_is 'bird director' 'bird router'" -l router-id -x -d 'Router id and local address'
complete -c lvsprep -n "__fish_lvsprep_profile_is 'bird director' 'bird router'" -l ipv6 -d 'IPv6 VIPs too'
complete -c lvsprep -n "__fish_lvsprep_profile_is 'bird director' 'bird router'" -l hold -x -d 'BGP hold time in seconds'
complete -c lvsprep -n "__fish_lvsprep_profile_is 'bird director' 'bird router'" -l bfd -d 'Add BFD to the sessions'
