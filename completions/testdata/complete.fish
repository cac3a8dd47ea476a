# Asks fish for the completions of each argument, for the tests.
# usage: fish -N complete.fish SCRIPT LINE...
# Prints the candidates of each LINE (without descriptions), then "<<END>>".
source $argv[1]
for line in $argv[2..-1]
    complete -C $line | string replace -r -- '\t.*' ''
    echo '<<END>>'
end
