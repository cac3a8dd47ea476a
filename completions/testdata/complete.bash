# Drives a bash completion function the way readline does, for the tests.
# usage: bash complete.bash BASH_COMPLETION_OR_EMPTY SCRIPT_DIR < lines
# For each input line (the command line up to the cursor) it sets COMP_LINE,
# COMP_POINT, COMP_WORDS and COMP_CWORD as bash would (COMP_WORDBREAKS
# characters ':' and '=' become words of their own), calls the function
# registered for the command and prints COMPREPLY, one candidate a line,
# followed by a line "<<END>>".
[[ -n $1 ]] && source "$1"
for script in "$2"/*; do
    source "$script"
done
while IFS= read -r COMP_LINE; do
    COMP_POINT=${#COMP_LINE}
    COMP_WORDS=()
    rest=$COMP_LINE
    while [[ -n $rest ]]; do
        if [[ $rest =~ ^[[:space:]]+ ]]; then
            rest=${rest:${#BASH_REMATCH[0]}}
        elif [[ $rest =~ ^[:=]+ ]] || [[ $rest =~ ^[^[:space:]:=]+ ]]; then
            COMP_WORDS+=("${BASH_REMATCH[0]}")
            rest=${rest:${#BASH_REMATCH[0]}}
        fi
    done
    [[ -z $COMP_LINE || $COMP_LINE == *[[:space:]:=] ]] && COMP_WORDS+=('')
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMPREPLY=()
    spec=$(complete -p "${COMP_WORDS[0]}" 2>/dev/null)
    func=${spec#*-F }
    func=${func%% *}
    "$func" "${COMP_WORDS[0]}" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
    ((${#COMPREPLY[@]})) && printf '%s\n' "${COMPREPLY[@]}"
    echo '<<END>>'
done
