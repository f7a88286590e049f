#!/bin/sh
# install-deps.sh: installs the Debian 12 packages lathe needs to build and test,
# then the Node packages, each pinned in its package-lock.json, with `npm ci`:
# lib/console (uPlot, built into lathe's web console), tests/serve/client
# (OpenAI's own client) and tests/ui (playwright-core, which drives Debian's
# chromium in the console's browser test). Idempotent: packages already present
# are left alone, and npm runs only where node_modules is missing or older than
# the lock file. As root it runs apt-get; otherwise it prints the exact command
# to run.
#
#   scripts/install-deps.sh            build + test dependencies (and npm ci)
#   scripts/install-deps.sh --torch    also python3-torch (PyTorch reference tests)
set -eu

PKGS="build-essential cmake pkg-config git ca-certificates
libyaml-dev libjansson-dev libsqlite3-dev libmicrohttpd-dev libcurl4-openssl-dev libssl-dev
libopenblas-openmp-dev libcmocka-dev libutf8proc-dev
python3-yaml python3-jsonschema openssl
clang libclang-rt-14-dev python3
prometheus chromium fonts-dejavu-core curl
slurmctld slurmd slurm-client slurmdbd munge mariadb-server"

# Slurm 22.05 (slurmctld, slurmd, the clients, slurmdbd with MariaDB for
# accounting) and munge: tests/slurm run lathe's Slurm executor against a
# real cluster that ../shared/tools/slurm-local starts in a folder of its
# own (docs/slurm.md); the packages' own daemons are not started here.
# kubectl drives the Kubernetes API double in tests/k8s. Debian's
# kubernetes-client provides it; a machine that already has a kubectl (from
# another package) keeps its own, as the two packages conflict.
command -v kubectl >/dev/null 2>&1 || PKGS="$PKGS kubernetes-client"
# Node (18 in Debian 12) and npm run tests/serve's OpenAI client and
# tests/ui's playwright-core, and fetch uPlot for the web console; chromium is
# the browser tests/ui drives (headless), with a font for its screenshots;
# prometheus gives promtool, which checks lathe serve's /metrics and lathe's
# alert rules; the shell tests talk HTTP with curl. A machine with another Node (NodeSource's bundles npm and
# conflicts with Debian's npm) keeps it.
command -v node >/dev/null 2>&1 || PKGS="$PKGS nodejs"
command -v npm >/dev/null 2>&1 || PKGS="$PKGS npm"

for arg in "$@"; do
  case "$arg" in
    --torch) PKGS="$PKGS python3-torch python3-numpy" ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "install-deps.sh: unknown option '$arg' (try --help)" >&2; exit 1 ;;
  esac
done

missing=""
for p in $PKGS; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done

# `npm ci` in each folder with a package-lock.json, when its node_modules is
# missing or older than the lock file (npm ci writes
# node_modules/.package-lock.json last)
node_packages() {
  root="$(cd "$(dirname "$0")/.." && pwd)"
  for sub in lib/console tests/serve/client tests/ui; do
    dir="$root/$sub"
    stamp="$dir/node_modules/.package-lock.json"
    if [ -f "$stamp" ] && [ ! "$dir/package-lock.json" -nt "$stamp" ]; then
      echo "install-deps.sh: $sub/node_modules is up to date"
      continue
    fi
    echo "install-deps.sh: npm ci in $sub"
    (cd "$dir" && npm ci --no-audit --no-fund) || return 1
  done
}

if [ -z "$missing" ]; then
  echo "install-deps.sh: all packages present"
  node_packages
  exit 0
fi

cmd="apt-get install -y --no-install-recommends$missing"
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps.sh: missing:$missing"
  echo "run as root:  apt-get update && $cmd"
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# keep the packages' init scripts from starting system-wide daemons
# (munge, mariadb, slurm): the tests start their own
made_policy=0
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
  chmod 755 /usr/sbin/policy-rc.d
  made_policy=1
fi
# shellcheck disable=SC2086
rc=0; $cmd || rc=$?
[ "$made_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
[ "$rc" = 0 ] || exit "$rc"
node_packages
