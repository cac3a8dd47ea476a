# Asks fish for the completions of each argument, for the tests.
# usage: fish -N complete.fish SCRIPT_DIR LINE...
# Prints the candidates of each LINE (without descriptions), then "<<END>>".
for script in $argv[1]/*.fish
    source $script
end
for line in $argv[2..-1]
    complete -C $line | string replace -r -- '\t.*' ''
    echo '<<END>>'
end
