# The test command's arguments for one of its runs (scripts/test.sh).

# The arguments after $1 with a --reporter-outfile=F.xml written to F.$1.xml instead, NUL-separated.
# Nothing to pass stays nothing: an empty argument would make `bun test ""` run every file.
args_for() {
  local a out=()
  for a in "${@:2}"; do
    [[ $a == --reporter-outfile=* ]] && a="${a%.xml}.$1.xml"
    out+=("$a")
  done
  ((${#out[@]} == 0)) || printf '%s\0' "${out[@]}"
}
