#!/usr/bin/env bash
# Offline checks for infra/: terraform fmt, validate and test (mock providers)
# against the real hashicorp/azurerm 5.2.0 and hashicorp/time 0.14.2 schemas,
# then the KQL of the alerts and the dashboard through the Kusto language
# service (needs node and npm).
#
# Works on a machine that has Go and git:
#   * terraform: the one on PATH if it is >= 1.7 (mock providers), otherwise
#     built with `go install github.com/hashicorp/terraform@v1.8.5`;
#   * azurerm: no registry access here, so the provider is built once (20–35
#     minutes) from the released commit of tag v5.2.0 (8d8282ef5bee; its
#     dependencies from the Go module proxy, checked against its go.sum) and
#     cached outside the
#     repository in ${EHMIRROR_CACHE:-$HOME/.cache/ehmirror}, keyed by commit,
#     then used via dev_overrides. The Go module proxy does not serve that
#     commit (403 for its pseudo-version), so the source comes from git:
#     AZURERM_GIT names a git repository (a local git directory or a URL) that
#     holds the commit; default https://github.com/hashicorp/terraform-provider-azurerm.git.
#     The checked-out commit is verified against the full hash below.
# Anything missing or broken fails the run; nothing is skipped.
set -euo pipefail

AZURERM_MODULE=github.com/hashicorp/terraform-provider-azurerm
AZURERM_TAG=v5.2.0
AZURERM_FULL_COMMIT=8d8282ef5bee6861b43a9532e948498e3355c0cb # = tag v5.2.0
AZURERM_COMMIT=${AZURERM_FULL_COMMIT:0:12}
AZURERM_GIT=${AZURERM_GIT:-https://github.com/hashicorp/terraform-provider-azurerm.git}
# hashicorp/time (time_sleep: waits for role assignments to propagate).
TIME_MODULE=github.com/hashicorp/terraform-provider-time
TIME_VERSION=v0.14.2
TERRAFORM_MODULE=github.com/hashicorp/terraform
# Fallback when no terraform >= 1.7 is on PATH. 1.8.5 is the newest release
# that `go install` can build: from 1.9 on, terraform's go.mod has replace
# directives to nested modules (missing from the module zip), and go install
# of e.g. v1.13.3 fails.
TERRAFORM_VERSION=v1.8.5

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
INFRA=$ROOT/infra
CACHE=${EHMIRROR_CACHE:-$HOME/.cache/ehmirror}
PROVIDER_DIR=$CACHE/terraform-provider-azurerm/$AZURERM_COMMIT
PROVIDER_BIN=$PROVIDER_DIR/terraform-provider-azurerm
# Written after a successful build: the commit and the binary's sha256.
PROVIDER_STAMP=$PROVIDER_DIR/BUILT_FROM
TIME_PROVIDER_DIR=$CACHE/terraform-provider-time/$TIME_VERSION
TIME_PROVIDER_BIN=$TIME_PROVIDER_DIR/terraform-provider-time

say() { printf '==> %s\n' "$*"; }
die() {
	printf 'terraform-check: FAILED: %s\n' "$*" >&2
	exit 1
}

command -v go >/dev/null 2>&1 || die "go is not on PATH; it is needed to build terraform and the azurerm provider."

WORK=$(mktemp -d)
BUILD_PID=
cleanup() {
	if [[ -n $BUILD_PID ]] && kill -0 "$BUILD_PID" 2>/dev/null; then
		kill "$BUILD_PID" 2>/dev/null || true
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT

# go_install MODULE@VERSION GOBIN WHAT: go install with a heartbeat each minute.
go_install() {
	local target=$1 gobin=$2 what=$3 log=$WORK/go-install.log start=$SECONDS next=60
	GOBIN=$gobin go install "$target" >"$log" 2>&1 &
	BUILD_PID=$!
	while kill -0 "$BUILD_PID" 2>/dev/null; do
		sleep 5
		if ((SECONDS - start >= next)); then
			say "still building $what… $(((SECONDS - start) / 60)) min elapsed"
			next=$((next + 60))
		fi
	done
	if ! wait "$BUILD_PID"; then
		BUILD_PID=
		tail -n 40 "$log" >&2
		die "go install $target failed (log above)."
	fi
	BUILD_PID=
	say "built $what in $(((SECONDS - start) / 60)) min $(((SECONDS - start) % 60)) s"
}

# go_build DIR OUT WHAT: go build of the main package in DIR (dependencies
# from the Go module proxy, checked against DIR's go.sum), with a heartbeat
# each minute.
go_build() {
	local dir=$1 out=$2 what=$3 log=$WORK/go-build.log start=$SECONDS next=60
	go -C "$dir" build -mod=readonly -trimpath -o "$out" . >"$log" 2>&1 &
	BUILD_PID=$!
	while kill -0 "$BUILD_PID" 2>/dev/null; do
		sleep 5
		if ((SECONDS - start >= next)); then
			say "still building $what… $(((SECONDS - start) / 60)) min elapsed"
			next=$((next + 60))
		fi
	done
	if ! wait "$BUILD_PID"; then
		BUILD_PID=
		tail -n 40 "$log" >&2
		die "go build of $what failed (log above)."
	fi
	BUILD_PID=
	say "built $what in $(((SECONDS - start) / 60)) min $(((SECONDS - start) % 60)) s"
}

# is_expected_provider FILE MODULE VERSION: a complete Go binary built from
# the pinned module version (the time provider).
is_expected_provider() {
	local module=$2 version=$3
	[[ -x $1 ]] && go version -m "$1" 2>/dev/null | grep -Eq "^[[:space:]]+mod[[:space:]]+$module[[:space:]]+$version([[:space:]]|\$)"
}

# azurerm_stamp: what $PROVIDER_STAMP says about a build of the pinned commit.
azurerm_stamp() {
	printf 'commit %s\nsha256 %s\n' "$AZURERM_FULL_COMMIT" "$(sha256sum "$PROVIDER_BIN" | cut -d' ' -f1)"
}

# is_expected_azurerm: the cached azurerm binary is a Go build of the
# provider's main package from the pinned commit, unchanged since.
is_expected_azurerm() {
	[[ -x $PROVIDER_BIN && -f $PROVIDER_STAMP ]] &&
		go version -m "$PROVIDER_BIN" 2>/dev/null | grep -Eq "^[[:space:]]+path[[:space:]]+$AZURERM_MODULE\$" &&
		[[ $(cat "$PROVIDER_STAMP") == "$(azurerm_stamp)" ]]
}

# azurerm_source DIR: the provider's source at the pinned commit into DIR.
azurerm_source() {
	local dir=$1 gitdir
	mkdir -p "$dir"
	if [[ -d $AZURERM_GIT ]]; then
		gitdir=$AZURERM_GIT
	else
		say "cloning $AZURERM_GIT at $AZURERM_TAG (shallow)…"
		git clone --quiet --bare --depth 1 --branch "$AZURERM_TAG" "$AZURERM_GIT" "$WORK/azurerm.git" ||
			die "git clone of $AZURERM_GIT at $AZURERM_TAG failed (set AZURERM_GIT to a git repository that holds commit $AZURERM_FULL_COMMIT)."
		gitdir=$WORK/azurerm.git
	fi
	[[ $(git --git-dir="$gitdir" rev-parse --verify --quiet "$AZURERM_FULL_COMMIT^{commit}") == "$AZURERM_FULL_COMMIT" ]] ||
		die "$AZURERM_GIT does not hold commit $AZURERM_FULL_COMMIT (azurerm $AZURERM_TAG); set AZURERM_GIT to a git repository that does."
	# Without vendor/: go fetches the dependencies at the versions of the
	# commit's go.mod and checks them against its go.sum (a snapshot of the
	# repository may lack vendor/'s largest files).
	git --git-dir="$gitdir" archive "$AZURERM_FULL_COMMIT" -- . ':(exclude)vendor' | tar -x -C "$dir" ||
		die "git archive of $AZURERM_FULL_COMMIT from $gitdir failed."
}

# --- terraform CLI configuration: use the local provider, never the registry ---
# (written first, so no terraform call reads a user's or a broken CLI config)
cat >"$WORK/terraformrc" <<EOF
provider_installation {
  dev_overrides {
    "hashicorp/azurerm" = "$PROVIDER_DIR"
    "hashicorp/time"    = "$TIME_PROVIDER_DIR"
  }
  direct {}
}
EOF
export TF_CLI_CONFIG_FILE=$WORK/terraformrc
export TF_IN_AUTOMATION=1 TF_INPUT=0 CHECKPOINT_DISABLE=1
# Keep the checks away from infra/.terraform of a real deployment.
export TF_DATA_DIR=$WORK/tfdata
unset TF_WORKSPACE TF_CLI_ARGS TF_CLI_ARGS_fmt TF_CLI_ARGS_test TF_CLI_ARGS_validate

# --- terraform ----------------------------------------------------------------
terraform_ok() {
	local v
	v=$("$1" version -json 2>/dev/null | sed -n 's/.*"terraform_version": *"\([0-9][0-9.]*\).*/\1/p')
	[[ -n $v ]] || return 1 # "1.8.5-dev" (a go install build) counts as 1.8.5
	# mock_provider / override_* in terraform test need >= 1.7
	[[ $(printf '%s\n' "1.7.0" "$v" | sort -V | head -n1) == "1.7.0" ]]
}

TERRAFORM=$(command -v terraform || true)
if [[ -z $TERRAFORM ]] || ! terraform_ok "$TERRAFORM"; then
	TF_BIN_DIR=$CACHE/terraform/$TERRAFORM_VERSION
	TERRAFORM=$TF_BIN_DIR/terraform
	if [[ ! -x $TERRAFORM ]]; then
		say "terraform >= 1.7 not found on PATH; building $TERRAFORM_MODULE@$TERRAFORM_VERSION (a few minutes)…"
		mkdir -p "$TF_BIN_DIR"
		go_install "$TERRAFORM_MODULE@$TERRAFORM_VERSION" "$TF_BIN_DIR" terraform
	fi
	terraform_ok "$TERRAFORM" || die "$TERRAFORM does not work or is older than 1.7."
fi
say "terraform: $TERRAFORM ($("$TERRAFORM" version | head -n1))"

# --- azurerm provider -----------------------------------------------------------
if ! is_expected_azurerm; then
	command -v git >/dev/null 2>&1 || die "git is not on PATH; it is needed to fetch the azurerm $AZURERM_TAG source."
	# Only one provider build at a time on a shared machine: a run that finds
	# the lock taken waits for that build (it leaves the stamped binary).
	mkdir -p "$CACHE"
	exec 9>"$CACHE/azurerm-build.lock"
	if ! flock -n 9; then
		say "an azurerm provider build is already running on this machine; waiting for it…"
		flock 9
	fi
fi
if ! is_expected_azurerm; then
	mkdir -p "$PROVIDER_DIR"
	say "building azurerm provider $AZURERM_TAG (commit $AZURERM_COMMIT) from git source (20–35 minutes)…"
	say "it is cached in $PROVIDER_DIR, so this happens once per machine"
	azurerm_source "$WORK/azurerm-src"
	go_build "$WORK/azurerm-src" "$WORK/terraform-provider-azurerm" "azurerm provider"
	cp "$WORK/terraform-provider-azurerm" "$PROVIDER_BIN.tmp.$$"
	chmod +x "$PROVIDER_BIN.tmp.$$"
	mv -f "$PROVIDER_BIN.tmp.$$" "$PROVIDER_BIN"
	azurerm_stamp >"$PROVIDER_STAMP"
	is_expected_azurerm || die "$PROVIDER_BIN is not a build of $AZURERM_MODULE at $AZURERM_FULL_COMMIT."
fi
exec 9>&- # release the build lock (if taken)
say "azurerm provider: $PROVIDER_BIN ($AZURERM_TAG, commit $AZURERM_COMMIT)"

# --- time provider (small: a minute or two to build) ------------------------------
if ! is_expected_provider "$TIME_PROVIDER_BIN" "$TIME_MODULE" "$TIME_VERSION"; then
	mkdir -p "$TIME_PROVIDER_DIR"
	say "building time provider $TIME_VERSION from the Go module proxy…"
	go_install "$TIME_MODULE@$TIME_VERSION" "$WORK" "time provider"
	cp "$WORK/terraform-provider-time" "$TIME_PROVIDER_BIN.tmp.$$"
	chmod +x "$TIME_PROVIDER_BIN.tmp.$$"
	mv -f "$TIME_PROVIDER_BIN.tmp.$$" "$TIME_PROVIDER_BIN"
	is_expected_provider "$TIME_PROVIDER_BIN" "$TIME_MODULE" "$TIME_VERSION" || die "$TIME_PROVIDER_BIN is not a build of $TIME_MODULE@$TIME_VERSION."
fi
say "time provider: $TIME_PROVIDER_BIN"

cd "$INFRA"

say "terraform fmt -check -recursive"
"$TERRAFORM" fmt -check -recursive -diff || die "terraform fmt found unformatted files (run: terraform -chdir=infra fmt -recursive)."

# With dev_overrides no `terraform init` is needed (and none could reach the
# registry): validate and test load the provider from $PROVIDER_DIR directly.
say "terraform validate"
"$TERRAFORM" validate -no-color || die "terraform validate failed."

say "terraform test"
set +e
"$TERRAFORM" test -no-color 2>&1 | tee "$WORK/test.log"
status=${PIPESTATUS[0]}
set -e

summary=$(grep -Eo '[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?' "$WORK/test.log" | tail -n1 || true)
[[ -n $summary ]] || die "terraform test printed no summary (exit status $status)."
echo "terraform: $summary"
passed=${summary%% passed*}
((status == 0)) || die "terraform test failed ($summary)."
((passed > 0)) || die "terraform test ran no tests."

# --- KQL of the alerts and the dashboard ------------------------------------------
# Azure rejects an alert rule whose query does not compile, and terraform test
# cannot see that: parse and analyse every query with Microsoft's Kusto
# language service (npm @kusto/language-service-next, installed once into the
# cache, keyed by scripts/kqlcheck/package.json).
say "KQL check (Kusto language service)"
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 ||
	die "node and npm are needed for the KQL check: apt-get install -y nodejs npm"
KQL_DIR=$CACHE/kqlcheck/$(sha256sum "$ROOT/scripts/kqlcheck/package.json" | cut -c1-12)
if [[ ! -f $KQL_DIR/node_modules/@kusto/language-service-next/Kusto.Language.Bridge.js ]]; then
	mkdir -p "$KQL_DIR"
	cp "$ROOT/scripts/kqlcheck/package.json" "$KQL_DIR/"
	say "installing the Kusto language service into $KQL_DIR"
	npm install --prefix "$KQL_DIR" --no-package-lock --no-audit --no-fund --loglevel=error >"$WORK/npm.log" 2>&1 ||
		{ tail -n 20 "$WORK/npm.log" >&2; die "npm install of scripts/kqlcheck/package.json failed (log above)."; }
fi
NODE_PATH=$KQL_DIR/node_modules node "$ROOT/scripts/kqlcheck/check.js" "$INFRA" || die "the alerts' or dashboard's KQL does not compile (above)."
