# Sourced by build-lammps.sh and check-otf-kk-compile.sh: one file from Debian's package pool,
# downloaded once into a cache folder and checked against its pinned sha256.
#
# fetch_from_debian_pool <log function> <pool folder, e.g. l/lammps> <file> <sha256> <folder>
# Returns 1 (after saying why through the log function) when the file cannot be had.
fetch_from_debian_pool() {
  local log=$1 folder=$2 file=$3 sha256=$4 sources=$5
  mkdir -p "$sources"
  if echo "$sha256  $sources/$file" | sha256sum --check --status 2>/dev/null; then return 0; fi
  "$log" "downloading $file from Debian's pool"
  curl -fsSL --retry 3 -o "$sources/$file.part" "http://deb.debian.org/debian/pool/main/$folder/$file" ||
    { "$log" "$file is not in Debian's pool (any more): update its pinned version"; return 1; }
  echo "$sha256  $sources/$file.part" | sha256sum --check --status ||
    { "$log" "$file does not match its pinned sha256"; rm -f "$sources/$file.part"; return 1; }
  mv "$sources/$file.part" "$sources/$file"
}
