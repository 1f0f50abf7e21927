# shellcheck shell=bash
# The repository's Go modules, for the scripts that build, test or release
# them (scripts/test, .ci/run, scripts/release, scripts/release-test).
# Source it from the repository's root: every path here is relative to it.
#
# Why this exists: no go.mod has a replace directive, because a published
# go.mod must work for its users (see RELEASING.md). Between releases a
# module requires its siblings at the last released version, or at the
# placeholder v0.0.0-00010101000000-000000000000 before the first release,
# so it cannot be built on its own (GOWORK=off): the placeholder cannot be
# fetched, and the last release is not the code next to it. The committed
# go.work uses every module, but building one module under it selects the
# highest version that ANY module of the workspace requires (bench's peers
# would raise the library's dependencies). So each module is built under a
# go.work of its own, written to a temporary directory: the module and the
# repository modules it requires, directly or through each other, and no
# others. That is the build a user gets at a release (minimal version
# selection over the module and the siblings it depends on), with the
# siblings' code from this checkout.

# The module that the others are the subdirectories of.
ROOT_MODULE_PATH=github.com/dlockio/dlock

# repo_modules prints the directory of every module whose go.mod git
# tracks ("." for the root), one a line, the root first. A go.mod that is
# not committed yet is left out, like every other uncommitted file in CI.
repo_modules() {
  git ls-files -- 'go.mod' '*/go.mod' | sed -e 's#/\{0,1\}go\.mod$##' -e 's#^$#.#' | LC_ALL=C sort
}

# module_path DIR prints the module path that DIR/go.mod declares.
module_path() {
  awk '$1 == "module" { print $2; exit }' "$1/go.mod"
}

# module_requirements DIR prints "PATH VERSION" for each module that
# DIR/go.mod requires, in a require block or on a require line of its own.
module_requirements() {
  awk '
    $1 == "require" && $2 == "(" { block = 1; next }
    block && $1 == ")" { block = 0; next }
    block && $1 !~ "^//" && NF >= 2 { print $1, $2; next }
    $1 == "require" && $2 != "(" { print $2, $3 }
  ' "$1/go.mod"
}

# module_requires DIR prints the module paths that DIR/go.mod requires.
module_requires() {
  module_requirements "$1" | awk '{ print $1 }'
}

# module_dir PATH prints the directory of the repository module with that
# module path, or fails.
module_dir() {
  local dir
  for dir in $(repo_modules); do
    if [ "$(module_path "$dir")" = "$1" ]; then
      echo "$dir"
      return 0
    fi
  done
  return 1
}

# sibling_requires DIR prints the directories of the repository modules
# that DIR/go.mod requires directly.
sibling_requires() {
  local path dir
  for path in $(module_requires "$1"); do
    case "$path" in
      "$ROOT_MODULE_PATH" | "$ROOT_MODULE_PATH"/*)
        if dir=$(module_dir "$path"); then echo "$dir"; fi
        ;;
    esac
  done
}

# module_closure DIR prints DIR and the directories of every repository
# module it requires, directly or through another one, each once.
module_closure() {
  local -a todo=("$1")
  local -A seen=()
  local dir dep
  while [ ${#todo[@]} -gt 0 ]; do
    dir=${todo[0]}
    todo=("${todo[@]:1}")
    if [ -n "${seen[$dir]:-}" ]; then continue; fi
    seen[$dir]=1
    echo "$dir"
    for dep in $(sibling_requires "$dir"); do todo+=("$dep"); done
  done
}

# modules_in_order prints every repository module after the ones it
# requires: the order in which a release can tag them, since a module's
# go.sum needs the checksums of its siblings' tagged versions.
modules_in_order() {
  local -a left
  local -A done_=()
  local dir dep ready progress
  mapfile -t left < <(repo_modules)
  while [ ${#left[@]} -gt 0 ]; do
    progress=0
    local -a next=()
    for dir in "${left[@]}"; do
      ready=1
      for dep in $(sibling_requires "$dir"); do
        if [ -z "${done_[$dep]:-}" ]; then ready=0; fi
      done
      if [ $ready = 1 ]; then
        echo "$dir"
        done_[$dir]=1
        progress=1
      else
        next+=("$dir")
      fi
    done
    if [ $progress = 0 ]; then
      echo "modules_in_order: the repository's modules require each other in a cycle: ${next[*]}" >&2
      return 1
    fi
    left=("${next[@]}")
  done
}

# is_published DIR tells whether the module in DIR is released to users:
# tagged by scripts/release and fetched by scripts/release-test. The
# benchmark (bench) and the documentation's tests (docs/...) are modules
# only to keep their dependencies out of the published ones; nobody
# imports them.
is_published() {
  case "$1" in
    bench | bench/* | docs | docs/*) return 1 ;;
    *) return 0 ;;
  esac
}

# module_tag_prefix DIR prints what goes before the version in the
# module's tags: nothing for the root, "DIR/" for a subdirectory (the form
# the go command looks for).
module_tag_prefix() {
  if [ "$1" = . ]; then echo ""; else echo "$1/"; fi
}

# module_abs TOP DIR prints the absolute directory of the module in DIR,
# relative to TOP. Not "TOP/." for the root: the go command would not
# match the pattern ./... in TOP against a module used as "TOP/.".
module_abs() {
  if [ "$2" = . ]; then echo "$1"; else echo "$1/$2"; fi
}

# in_module DIR COMMAND... runs COMMAND in DIR under a go.work of its own
# (see the top of this file): DIR and the repository modules it requires,
# each taken from this checkout. A workspace does not stand its modules in
# for the versions that are required of them: the go command still reads
# the go.mod of each required version, which for the placeholder exists
# nowhere and for a release just made may not be published yet. So, like
# the committed go.work, this one replaces each version that these modules
# require of each other with the sibling's directory. The go.work, and the
# go.work.sum that the go command may write next to it, live in a
# temporary directory that is removed afterwards; the committed go.work is
# not read.
in_module() {
  local dir=$1
  shift
  local top
  top=$(pwd)
  (
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    local -a mods
    mapfile -t mods < <(module_closure "$dir")
    local -A dirs=()
    local mod path version
    for mod in "${mods[@]}"; do dirs[$(module_path "$mod")]=$(module_abs "$top" "$mod"); done
    {
      # The committed go.work's go line: the one the workspace is
      # developed under.
      awk '$1 == "go" { print; exit }' "$top/go.work"
      echo "use ("
      for mod in "${mods[@]}"; do echo "	$(module_abs "$top" "$mod")"; done
      echo ")"
      for mod in "${mods[@]}"; do
        module_requirements "$mod"
      done | LC_ALL=C sort -u | while read -r path version; do
        if [ -n "${dirs[$path]:-}" ]; then
          echo "replace $path $version => ${dirs[$path]}"
        fi
      done
    } >"$work/go.work"
    cd "$dir" || exit
    GOWORK="$work/go.work" "$@"
  )
}

# fetch_modules_from REPO MODCACHE makes the go commands of this shell
# fetch the repository's modules from the git repository REPO (a local
# clone, with release tags) instead of their public home, as the go
# command would from there: git's insteadOf points the module path at
# REPO, and GOPRIVATE keeps the proxy and the checksum database out of it,
# so a go.sum is all that checks the versions fetched. MODCACHE is a module
# cache of its own, so that no copy of a version made by an earlier run (a
# rehearsal, or an attempt that failed) is taken for this one; other
# modules come from the usual module cache first, then the usual proxy.
# It is left writable so that it can be removed.
fetch_modules_from() {
  local cache proxy
  export GOPRIVATE=github.com/dlockio
  export GIT_CONFIG_COUNT=2
  export GIT_CONFIG_KEY_0="url.file://$1.insteadOf"
  export GIT_CONFIG_VALUE_0="https://$ROOT_MODULE_PATH"
  export GIT_CONFIG_KEY_1=protocol.file.allow
  export GIT_CONFIG_VALUE_1=always
  cache=$(go env GOMODCACHE)/cache/download
  if [ -d "$cache" ]; then
    proxy=$(go env GOPROXY)
    export GOPROXY="file://$cache,$proxy"
  fi
  export GOMODCACHE="$2"
  export GOFLAGS="${GOFLAGS:-} -modcacherw"
}

# check_workspace checks that no go.mod has a replace directive (a
# published one would not work for its users, and scripts/release refuses
# it), that the committed go.work uses every module of the repository, and
# that it replaces each version that the modules require of each other
# with the module's directory (see go.work's comment); it says what is
# wrong. A module left out would build from the committed go.work with its
# siblings fetched, or not at all.
check_workspace() {
  local status=0 dir rel path version
  for dir in $(repo_modules); do
    if grep -qE '^[[:space:]]*replace([[:space:]]|\()' "$dir/go.mod"; then
      echo "$dir/go.mod has a replace directive: take the sibling from the workspace instead (RELEASING.md)" >&2
      status=1
    fi
    if [ "$dir" = . ]; then rel=./; else rel=./$dir; fi
    if ! awk -v d="${rel%/}" '
      $1 == "use" && $2 == "(" { block = 1; next }
      block && $1 == ")" { block = 0; next }
      (block && $1 == d) || ($1 == "use" && $2 == d) { found = 1 }
      END { exit !found }
    ' go.work; then
      echo "go.work does not use $rel" >&2
      status=1
    fi
  done
  for dir in $(repo_modules); do
    module_requirements "$dir"
  done | LC_ALL=C sort -u | while read -r path version; do
    if dir=$(module_dir "$path"); then
      if [ "$dir" = . ]; then rel=./; else rel=./$dir; fi
      if ! grep -qE "^[[:space:]]*(replace[[:space:]]+)?${path}[[:space:]]+${version}[[:space:]]+=>[[:space:]]+${rel}[[:space:]]*\$" go.work; then
        echo "go.work does not replace $path $version => $rel" >&2
        exit 1
      fi
    fi
  done || status=1
  return $status
}
