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
readonly ROOT_MODULE_PATH=github.com/dlockio/dlock

# What a module requires of a sibling before the siblings' first release:
# the zero pseudo-version, which no server has. A workspace does not stand
# its modules in for every version that is required of them (the go
# command still reads the go.mod of each required version), so every
# go.work of the repository replaces this one version of each module with
# its directory.
readonly PLACEHOLDER_VERSION=v0.0.0-00010101000000-000000000000

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

# module_requires DIR prints the module paths that DIR/go.mod requires, in
# a require block or on a require line of their own.
module_requires() {
  awk '
    $1 == "require" && $2 == "(" { block = 1; next }
    block && $1 == ")" { block = 0; next }
    block && $1 !~ "^//" { print $1; next }
    $1 == "require" && $2 != "(" { print $2 }
  ' "$1/go.mod"
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
# each taken from this checkout, with their placeholder versions replaced
# as in the committed go.work. The go.work, and the go.work.sum that the go
# command may write next to it, live in a temporary directory that is
# removed afterwards; the committed go.work is not read.
in_module() {
  local dir=$1
  shift
  local top
  top=$(pwd)
  (
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    {
      # The committed go.work's go line: the one the workspace is
      # developed under.
      awk '$1 == "go" { print; exit }' "$top/go.work"
      echo "use ("
      local -a mods
      mapfile -t mods < <(module_closure "$dir")
      for mod in "${mods[@]}"; do echo "	$(module_abs "$top" "$mod")"; done
      echo ")"
      for mod in "${mods[@]}"; do
        echo "replace $(module_path "$mod") $PLACEHOLDER_VERSION => $(module_abs "$top" "$mod")"
      done
    } >"$work/go.work"
    cd "$dir"
    GOWORK="$work/go.work" "$@"
  )
}
