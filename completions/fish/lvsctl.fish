# fish completion for lvsctl (lvskit)
#
# lvsctl <command> [flags] [FILE]: the commands are list, plan, apply,
# status, run, top, withdraw, announce and import keepalived; plan, apply and
# run take a rules file (ipvsadm-save text or lvsctl JSON), import keepalived a
# keepalived.conf; withdraw and announce take VIP prefixes. The flags may
# appear anywhere after the command.

# Prints the command word typed so far (flag values skipped).
function __fish_lvsctl_command
    set -l tokens (commandline -opc)
    set -l skip 0
    for t in $tokens[2..-1]
        if test $skip -eq 1
            set skip 0
            continue
        end
        switch $t
            case --journal-dir --drain-timeout --max-delete --checks --metrics-listen --wait --quiet --config-id
                set skip 1
            case '-*'
            case '*'
                echo $t
                return
        end
    end
end

function __fish_lvsctl_command_is
    contains -- "$(__fish_lvsctl_command)" $argv
end

# Prints the word after the command (import's kind), flags skipped.
function __fish_lvsctl_second
    set -l words
    for t in (commandline -opc)[2..-1]
        switch $t
            case '-*'
            case '*'
                set -a words $t
        end
    end
    if test (count $words) -ge 2
        echo $words[2]
    end
end

function __fish_lvsctl_import_is
    __fish_lvsctl_command_is import; and test "$(__fish_lvsctl_second)" = "$argv[1]"
end

complete -c lvsctl -f

# Global flags.
complete -c lvsctl -s h -l help -d 'Show context-sensitive help'
complete -c lvsctl -l version -d 'Print the version and exit'

# Commands.
complete -c lvsctl -n 'test -z "$(__fish_lvsctl_command)"' -a list -d "List the kernel's services and real servers"
complete -c lvsctl -n 'test -z "$(__fish_lvsctl_command)"' -a plan -d 'Show the changes that would turn the table into FILE'
complete -c lvsctl -n 'test -z "$(__fish_lvsctl_command)"' -a apply -d 'Make the table equal FILE: add, edit, drain, delete'
complete -c lvsctl -n 'test -z "$(__fish_lvsctl_command)"' -a status -d "Show run's health record and pending drains"
complete -c lvsctl -n 'test -z "$(__fish_lvsctl_command)"' -a run -d 'Keep the table as FILE says, with health checks'
complete -c lvsctl -n 'test -z "$(__fish_lvsctl_command)"' -a top -d 'Live view of rates, connections and states'
complete -c lvsctl -n 'test -z "$(__fish_lvsctl_command)"' -a withdraw -d 'Stop announcing VIP prefixes, for maintenance'
complete -c lvsctl -n 'test -z "$(__fish_lvsctl_command)"' -a announce -d 'Announce withdrawn VIP prefixes again'
complete -c lvsctl -n 'test -z "$(__fish_lvsctl_command)"' -a import -d "Convert another tool's configuration"
complete -c lvsctl -n '__fish_lvsctl_command_is import; and test -z "$(__fish_lvsctl_second)"' -a keepalived -d 'keepalived.conf as a desired state'

# Command flags.
complete -c lvsctl -n '__fish_lvsctl_command_is list plan apply status top' -l json -d 'Print JSON'
complete -c lvsctl -n '__fish_lvsctl_command_is list' -l stats -d 'Add the counters'
complete -c lvsctl -n '__fish_lvsctl_command_is list' -l rate -d 'Add the estimated rates'
complete -c lvsctl -n '__fish_lvsctl_command_is plan apply run' -l drain-timeout -x -a '0 30s 1m 5m 10m 1h' -d 'Longest drain of a leaving real server'
complete -c lvsctl -n '__fish_lvsctl_command_is plan apply' -l keep-mh-order -d "Leave mh services' real servers in the kernel's order"
complete -c lvsctl -n '__fish_lvsctl_command_is plan apply run' -l allow-empty -d 'Accept a file without any service'
complete -c lvsctl -n '__fish_lvsctl_command_is plan apply run' -l max-delete -x -a '10 25 50 100' -d 'Most real servers a plan may take out, in percent'
complete -c lvsctl -n '__fish_lvsctl_command_is plan apply status run top withdraw announce' -l journal-dir -x -a '(__fish_complete_directories)' -d 'Journal directory'
complete -c lvsctl -n '__fish_lvsctl_command_is apply' -s n -l dry-run -d 'Print the plan and change nothing'
complete -c lvsctl -n '__fish_lvsctl_command_is run' -l checks -r -F -d 'Checks for a rules-text file'
complete -c lvsctl -n '__fish_lvsctl_command_is run' -l metrics-listen -x -a '127.0.0.1:9117 :9117' -d 'Serve Prometheus metrics on an address'
complete -c lvsctl -n '__fish_lvsctl_command_is top' -s b -l batch -d 'Print plain-text frames'
complete -c lvsctl -n '__fish_lvsctl_command_is top' -s n -l iterations -x -a '1 3 10' -d 'Frames to print, then exit'
complete -c lvsctl -n '__fish_lvsctl_command_is top' -s d -l delay -x -a '0.5 1 2 5' -d 'Seconds between refreshes'
complete -c lvsctl -n '__fish_lvsctl_command_is top' -l filter -x -d 'Show addresses holding a text'
complete -c lvsctl -n '__fish_lvsctl_command_is top' -l sort -x -a 'service server state cps inpps outpps inbps outbps active inact weight fwd' -d 'Sort column'
complete -c lvsctl -n '__fish_lvsctl_command_is top' -l reverse -d 'Reverse the sort order'
complete -c lvsctl -n '__fish_lvsctl_command_is withdraw' -l wait -x -a '0 1m 5m 10m' -d 'Then wait at most this long until the traffic moved'
complete -c lvsctl -n '__fish_lvsctl_command_is withdraw' -l quiet -x -a '10s 30s 1m' -d 'Time without a new connection that counts as moved'
complete -c lvsctl -n '__fish_lvsctl_import_is keepalived' -l lossy -d 'Convert what cannot be said exactly, with a warning each'
complete -c lvsctl -n '__fish_lvsctl_import_is keepalived' -l config-id -x -d 'Read the @ID lines of this keepalived -i'

# The rules file.
complete -c lvsctl -n '__fish_lvsctl_command_is plan apply run' -F
complete -c lvsctl -n '__fish_lvsctl_import_is keepalived' -F
