# shellcheck shell=bash
# Shared by the image build scripts (sourced, not run): the machine's Debian mirrors, read from
# its apt sources. Nothing here names a host.

# Prints "main|security <TAB> uri <TAB> suite <TAB> file" for every enabled `deb` source of a
# Debian suite with the main component, in the order apt reads them (sources.list, then
# sources.list.d/ by name), from one-line *.list files and deb822 *.sources files alike.
# Sources signed by a keyring file that is not Debian's are third-party repositories.
apt_debian_sources() {
  local files=() f
  [ -f /etc/apt/sources.list ] && files+=(/etc/apt/sources.list)
  for f in /etc/apt/sources.list.d/*; do
    case "$f" in *.list|*.sources) [ -f "$f" ] && files+=("$f") ;; esac
  done
  [ "${#files[@]}" -gt 0 ] || return 0
  LC_ALL=C awk '
    function trim(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
    function consider(types, uris, suites, comps, signed, enabled,   nu, ns, i, j, U, S, base, kind, key) {
      if (tolower(enabled) == "no") return
      if ((" " types " ") !~ /[ \t]deb[ \t]/) return
      if ((" " comps " ") !~ /[ \t]main[ \t]/) return
      key = signed; sub(/.*\//, "", key)
      if (signed ~ /^\// && key !~ /debian/) return
      nu = split(uris, U, /[ \t]+/); ns = split(suites, S, /[ \t]+/)
      for (i = 1; i <= nu; i++) {
        if (U[i] !~ /^https?:\/\/[^ \t]+$/) continue
        sub(/\/+$/, "", U[i])
        for (j = 1; j <= ns; j++) {
          base = S[j]; kind = "main"
          if (base ~ /-security$/ || base ~ /\/updates$/) kind = "security"
          sub(/(-security|\/updates|-updates|-backports|-backports-sloppy|-proposed-updates)$/, "", base)
          if (base !~ /^(buster|bullseye|bookworm|trixie|forky|duke|sid|stable|testing|unstable|oldstable|oldoldstable)$/) continue
          print kind "\t" U[i] "\t" S[j] "\t" FILENAME
        }
      }
    }
    function flush() {
      if (P["uris"] != "") consider(P["types"], P["uris"], P["suites"], P["components"], P["signed-by"], P["enabled"])
      split("", P); field = ""
    }
    FNR == 1 { flush(); deb822 = (FILENAME ~ /\.sources$/) }
    # deb822: paragraphs of "Field: value"; a line starting with white space continues a value.
    deb822 && /^#/ { next }
    deb822 && /^[ \t]*$/ { flush(); next }
    deb822 && /^[ \t]/ { if (field != "") P[field] = P[field] " " trim($0); next }
    deb822 {
      field = tolower($0); sub(/:.*/, "", field); field = trim(field)
      value = $0; sub(/^[^:]*:/, "", value); P[field] = trim(value)
      next
    }
    # One-line: deb [ options ] uri suite component...
    {
      line = $0; sub(/#.*/, "", line); line = trim(line)
      if (line !~ /^deb[ \t]/) next
      sub(/^deb[ \t]+/, "", line)
      opts = ""
      if (line ~ /^\[/) { opts = line; sub(/\].*/, "", opts); sub(/^\[/, "", opts); sub(/^[^]]*\][ \t]*/, "", line) }
      s = ""
      if (match(opts, /signed-by=[^ \t]+/)) s = substr(opts, RSTART + 10, RLENGTH - 10)
      n = split(line, F, /[ \t]+/)
      c = ""; for (k = 3; k <= n; k++) c = c " " F[k]
      consider("deb", F[1], F[2], c, s, "")
    }
    END { flush() }
  ' "${files[@]}"
}
