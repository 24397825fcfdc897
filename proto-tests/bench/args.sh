# Shared by compare.sh and lab_compare.sh (source it).

# bench_args ARGS...: --runs N, --out FILE and --no-doc into RUNS, OUT and WRITE_DOC (the
# caller sets their defaults first); -h prints the calling script's header.
bench_args() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --runs) RUNS="$2"; shift 2 ;;
      --out) OUT="$2"; shift 2 ;;
      --no-doc) WRITE_DOC=0; shift ;;
      -h|--help) sed -n '2,/^set /{/^#/p}' "$0"; exit 0 ;;
      *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
  done
}
