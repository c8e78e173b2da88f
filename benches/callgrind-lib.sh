# Shared by callgrind-stages.sh and callgrind-tx-stages.sh (sourced, not run): callgrind's
# inclusive counts by function, per packet or per write.

# cg_annotate OUT: the inclusive annotation of callgrind file OUT into OUT.ann. From a
# directory where the sources are not found, entries name their files in full and each
# function's own entry (the one with its object in brackets) is its inclusive count.
cg_annotate() {
    (cd "$(dirname "$1")" && callgrind_annotate --inclusive=yes --threshold=100 --auto=no \
        "$(basename "$1")" >"$1.ann" 2>/dev/null)
}

# cg_inc ANN NAME: the inclusive count of function NAME (its own symbol's entries; inlined
# pieces elsewhere are counted where they are inlined).
cg_inc() {
    { grep -F ":$2 [" "$1" || true; } | awk '{gsub(",", "", $1); s += $1} END {print s + 0}'
}

# cg_total ANN: everything the toggled region did.
cg_total() {
    awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}' "$1"
}

# cg_per COUNT N: COUNT / N, rounded, six wide.
cg_per() {
    awk -v a="$1" -v n="$2" 'BEGIN {printf "%6.0f", a / n}'
}
