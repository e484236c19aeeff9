#!/usr/bin/env bash
# Offline checks for infra/: terraform fmt, validate and test (mock providers)
# against the real hashicorp/azurerm 5.2.0 and hashicorp/time 0.14.2 schemas,
# then the KQL of the alerts and the dashboard through the Kusto language
# service (needs node and npm).
#
# Works on a fresh machine that has only Go:
#   * terraform: the one on PATH, which must be >= 1.11 (mock providers, and
#     the write-only Key Vault secret values of infra/keyvault.tf). go install
#     cannot build it (see TERRAFORM_MIN): without it the run fails;
#   * azurerm: no registry access here, so the provider is built from the Go
#     module proxy once (about 20 minutes) and cached outside the repository in
#     ${EHMIRROR_CACHE:-$HOME/.cache/ehmirror}, then used via dev_overrides.
# Anything missing or broken fails the run; nothing is skipped.
set -euo pipefail

AZURERM_MODULE=github.com/hashicorp/terraform-provider-azurerm
AZURERM_VERSION=v1.44.1-0.20260824201233-fae580791926 # commit fae580791926 = azurerm v5.2.0
AZURERM_COMMIT=fae580791926
# hashicorp/time (time_sleep: waits for role assignments to propagate).
TIME_MODULE=github.com/hashicorp/terraform-provider-time
TIME_VERSION=v0.14.2
# The oldest terraform the module runs on (infra/versions.tf: write-only
# arguments). No fallback build: 1.8.5 is the newest release `go install`
# can build (from 1.9 on, terraform's go.mod has replace directives to
# nested modules, missing from the module zip), and it is too old.
TERRAFORM_MIN=1.11.0

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
INFRA=$ROOT/infra
CACHE=${EHMIRROR_CACHE:-$HOME/.cache/ehmirror}
PROVIDER_DIR=$CACHE/terraform-provider-azurerm/$AZURERM_COMMIT
PROVIDER_BIN=$PROVIDER_DIR/terraform-provider-azurerm
# A build started by hand earlier (same module version) may already be here.
PREBUILT_PROVIDER=$CACHE/tfprovider-build/terraform-provider-azurerm
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

# is_expected_provider FILE [MODULE VERSION]: a complete Go binary built from
# the pinned module version (azurerm by default).
is_expected_provider() {
	local module=${2:-$AZURERM_MODULE} version=${3:-$AZURERM_VERSION}
	[[ -x $1 ]] && go version -m "$1" 2>/dev/null | grep -Eq "^[[:space:]]+mod[[:space:]]+$module[[:space:]]+$version([[:space:]]|\$)"
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
	[[ -n $v ]] || return 1
	# write-only arguments (value_wo) need >= 1.11; mock_provider >= 1.7
	[[ $(printf '%s\n' "$TERRAFORM_MIN" "$v" | sort -V | head -n1) == "$TERRAFORM_MIN" ]]
}

TERRAFORM=$(command -v terraform || true)
[[ -n $TERRAFORM ]] || die "terraform is not on PATH: install terraform >= $TERRAFORM_MIN (the release binary; go install cannot build it)."
terraform_ok "$TERRAFORM" || die "$TERRAFORM does not work or is older than $TERRAFORM_MIN (infra/keyvault.tf writes the secrets write-only, value_wo): install terraform >= $TERRAFORM_MIN."
say "terraform: $TERRAFORM ($("$TERRAFORM" version | head -n1))"

# --- azurerm provider -----------------------------------------------------------
if ! is_expected_provider "$PROVIDER_BIN"; then
	mkdir -p "$PROVIDER_DIR"
	# A build of the same version already running into $PREBUILT_PROVIDER's
	# directory (started by hand): wait for it rather than build twice.
	start=$SECONDS next=60 waiting=
	while ! is_expected_provider "$PREBUILT_PROVIDER" &&
		pgrep -f "go install $AZURERM_MODULE@$AZURERM_VERSION" >/dev/null 2>&1; do
		if [[ -z $waiting ]]; then
			say "an azurerm provider build is already running; waiting for it (about 20 minutes in all)…"
			waiting=1
		fi
		sleep 5
		if ((SECONDS - start >= next)); then
			say "still waiting for the running azurerm provider build… $(((SECONDS - start) / 60)) min elapsed"
			next=$((next + 60))
		fi
	done
	if is_expected_provider "$PREBUILT_PROVIDER"; then
		say "reusing the azurerm provider built in $PREBUILT_PROVIDER"
		cp "$PREBUILT_PROVIDER" "$PROVIDER_BIN.tmp.$$"
	else
		say "building azurerm provider $AZURERM_VERSION (azurerm 5.2.0) from the Go module proxy (about 20 minutes)…"
		say "it is cached in $PROVIDER_DIR, so this happens once per machine"
		go_install "$AZURERM_MODULE@$AZURERM_VERSION" "$WORK" "azurerm provider"
		cp "$WORK/terraform-provider-azurerm" "$PROVIDER_BIN.tmp.$$"
	fi
	chmod +x "$PROVIDER_BIN.tmp.$$"
	mv -f "$PROVIDER_BIN.tmp.$$" "$PROVIDER_BIN"
	is_expected_provider "$PROVIDER_BIN" || die "$PROVIDER_BIN is not a build of $AZURERM_MODULE@$AZURERM_VERSION."
fi
say "azurerm provider: $PROVIDER_BIN"

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
