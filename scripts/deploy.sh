#!/usr/bin/env bash
# Deploy the mirror to Azure: terraform apply (infra/), upload the function
# package built by `make package` to its blob (terraform output
# function_package), restart every function app (the module's `instances`,
# terraform output function_apps) so that it runs that package, wait until
# each app is ready, then enable that app's timer.
#
# Usage: bash scripts/deploy.sh [--yes|-y] [--backend-config=FILE|KEY=VALUE]…
#                               [--local-state] [terraform apply arguments…]
#
# State: infra/ has a partial `backend "azurerm" {}` (infra/backend.tf). Its
# settings (state storage account, container, key) come from
# --backend-config (repeatable; a file such as infra/backend.hcl, copied from
# infra/backend.hcl.example, or KEY=VALUE) or from TF_BACKEND_CONFIG (a
# file), passed to `terraform init -backend-config=…`. --local-state keeps
# the state in infra/terraform.tfstate instead (writes
# infra/backend_override.tf; one machine only, never in a pipeline). With
# neither, the script stops before terraform.
#
# Prerequisites (see the README's "Deploying to Azure"):
#   * az CLI logged in (`az login`, or `az login --service-principal` in CI),
#     the target subscription selected (`az account set --subscription <id>`)
#     or ARM_SUBSCRIPTION_ID set;
#   * terraform >= 1.6 with registry access (hashicorp/azurerm ~> 5.2,
#     hashicorp/time);
#   * infra/terraform.tfvars (copy of infra/terraform.tfvars.example), Kafka
#     secrets in TF_VAR_kafka_sasl_username / TF_VAR_kafka_sasl_password
#     (kafka_sasl_mechanism plain or scram-*; oauthbearer and aws-msk-iam
#     take theirs, if any, in TF_VAR_kafka_oauth_client_secret or
#     TF_VAR_kafka_aws_secret_access_key);
#   * dist/ehmirror-functionapp.zip from `make package`;
#   * curl and jq.
#
# Package: the apps have no Azure Files content share (infra/storage.tf):
# each runs the blob in WEBSITE_RUN_FROM_PACKAGE, read with its identity, so
# no restart and no unmounted share can lose it. The upload uses the az
# login's Entra ID identity (az storage blob upload --auth-mode login; no
# key, no publishing credentials): it must be one of the module's
# deployer_object_ids (Storage Blob Data Contributor on the container,
# retried for DEPLOY_UPLOAD_TIMEOUT seconds, default 600, while that role
# propagates) and needs Website Contributor (or Contributor) on the apps to
# restart them.
#
# Private networking: the first apply that creates the apps keeps the
# vault's and the storage accounts' firewalls open
# (-var=network_firewall_open_for_create=true); when the module says
# restrict_public_network_access, a second apply closes them before the
# upload.
#
# Azure CLI login: a federated (OIDC) login cannot be renewed by az, and a
# long run outlives its token (AADSTS700024). Before the upload and each
# readiness round the script checks the login; when it expires within
# DEPLOY_LOGIN_MARGIN seconds (default 300) or has expired, it runs
# DEPLOY_AZ_LOGIN (a command that logs in again, e.g. with a fresh OIDC
# token; see infra/examples/github-actions-deploy.yml) if set, else it stops
# with one line saying so.
#
# Readiness: a new app starts with its timer disabled
# (AzureWebJobs.MirrorTimer.Disabled=true, infra/functionapp.tf), because its
# role assignments can take up to 30 minutes to take effect. After the zip
# deployments the script polls each app's /api/status every
# DEPLOY_POLL_INTERVAL seconds (default 30), for at most DEPLOY_READY_TIMEOUT
# seconds (default 1800) in all:
#   * Key Vault references the platform could not resolve (the identity's
#     role was not effective yet at the app's start) are named and the app
#     is restarted, at most every DEPLOY_RESTART_INTERVAL seconds (default
#     300), so that it resolves them again;
#   * while the settings are valid and Kafka is readable (status 200) but no
#     clean drain is reported, it starts a short catch-up (POST /api/catchup,
#     one minute), which reads Kafka and sends to the hubs that have records,
#     and then reads the status by the catch-up's run id, which every
#     instance answers;
#   * once an app's status says ok with a drain reported or the catch-up
#     caught up, and no catch-up runs (the setting change restarts the app),
#     it sets that app's AzureWebJobs.MirrorTimer.Disabled=false and prints
#     its status.
# Apps not ready in time keep their timers disabled and the script fails
# with one line naming each and its reason; run it again to retry.
#
# Interactive by default: terraform shows the plan and asks before applying.
# Without a terminal (a pipeline, `make deploy` from a script) it cannot ask:
# pass --yes, or run with CI=true (set by most CI systems), to apply without
# asking (terraform apply -auto-approve). Without either, and without a
# terminal, the script stops before terraform instead of failing half-way
# with "error asking for approval: EOF". Other arguments go to
# `terraform apply` (e.g. -var-file=prod.tfvars).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PACKAGE=$ROOT/dist/ehmirror-functionapp.zip

die() {
	printf 'deploy: %s\n' "$*" >&2
	exit 1
}

# --- options --------------------------------------------------------------------
AUTO_APPROVE=
APPLY_ARGS=()
INIT_ARGS=()
LOCAL_STATE=
for arg in "$@"; do
	case $arg in
	--yes | -y) AUTO_APPROVE=1 ;;
	-auto-approve | --auto-approve) AUTO_APPROVE=1 ;;
	--backend-config=* | -backend-config=*) INIT_ARGS+=("-backend-config=${arg#*=}") ;;
	--local-state) LOCAL_STATE=1 ;;
	*) APPLY_ARGS+=("$arg") ;;
	esac
done
if [[ -n ${TF_BACKEND_CONFIG:-} ]]; then
	INIT_ARGS+=("-backend-config=$TF_BACKEND_CONFIG")
fi
OVERRIDE=$ROOT/infra/backend_override.tf
if [[ -n $LOCAL_STATE && ${#INIT_ARGS[@]} -gt 0 ]]; then
	die "--local-state and a backend configuration (--backend-config or TF_BACKEND_CONFIG) exclude each other."
fi
if [[ -z $LOCAL_STATE && ${#INIT_ARGS[@]} -eq 0 ]]; then
	die "no Terraform state backend: pass --backend-config=infra/backend.hcl (copy infra/backend.hcl.example) or set TF_BACKEND_CONFIG; --local-state keeps the state on this machine only."
fi
if [[ -z $LOCAL_STATE && -f $OVERRIDE ]]; then
	die "infra/backend_override.tf (from --local-state) is present: remove it and move the state with 'terraform -chdir=infra init -migrate-state ${INIT_ARGS[*]}'."
fi
case ${CI:-} in
"" | 0 | false | FALSE | False | no) ;;
*) AUTO_APPROVE=1 ;;
esac
if [[ -z $AUTO_APPROVE && ! -t 0 ]]; then
	die "no terminal to confirm the Terraform plan: run 'bash scripts/deploy.sh --yes' (or set CI=true) to apply without asking."
fi
if [[ -n $AUTO_APPROVE ]]; then
	APPLY_ARGS=(-auto-approve "${APPLY_ARGS[@]}")
fi

command -v az >/dev/null 2>&1 || die "the Azure CLI (az) is not installed."
command -v terraform >/dev/null 2>&1 || die "terraform is not installed."
command -v curl >/dev/null 2>&1 || die "curl is not installed."
command -v jq >/dev/null 2>&1 || die "jq is not installed."
az account show >/dev/null 2>&1 || die "not logged in to Azure: run 'az login' (and 'az account set --subscription <id>')."
[[ -f $PACKAGE ]] || die "$PACKAGE is missing: run 'make package' first."
[[ -f $ROOT/infra/terraform.tfvars ]] || die "infra/terraform.tfvars is missing: copy infra/terraform.tfvars.example and edit it."

# The azurerm provider (v4 and later) needs the subscription explicitly; a
# by-hand `terraform apply` needs `export ARM_SUBSCRIPTION_ID=<id>` too.
# Default to the az CLI's current subscription.
ARM_SUBSCRIPTION_ID=${ARM_SUBSCRIPTION_ID:-$(az account show --query id -o tsv)}
export ARM_SUBSCRIPTION_ID
echo "==> subscription $ARM_SUBSCRIPTION_ID"

echo "==> terraform apply${AUTO_APPROVE:+ (no confirmation: --yes or CI)}"
if [[ -n $LOCAL_STATE ]]; then
	echo "==> state in infra/terraform.tfstate (--local-state: this machine only)"
	printf '# Written by scripts/deploy.sh --local-state: state on this machine only.\nterraform {\n  backend "local" {}\n}\n' >"$OVERRIDE"
fi
terraform -chdir="$ROOT/infra" init -input=false ${INIT_ARGS[@]+"${INIT_ARGS[@]}"}
# A deployment that creates the apps keeps the firewalls open while they are
# created (network_firewall_open_for_create); a second apply closes them.
if terraform -chdir="$ROOT/infra" output -json function_apps 2>/dev/null | jq -e 'length > 0' >/dev/null 2>&1; then
	terraform -chdir="$ROOT/infra" apply -input=false ${APPLY_ARGS[@]+"${APPLY_ARGS[@]}"}
else
	terraform -chdir="$ROOT/infra" apply -input=false -var=network_firewall_open_for_create=true ${APPLY_ARGS[@]+"${APPLY_ARGS[@]}"}
	if [[ $(terraform -chdir="$ROOT/infra" output -raw restrict_public_network_access) == true ]]; then
		echo "==> apps created with the firewalls open; closing them (restrict_public_network_access, second apply)"
		terraform -chdir="$ROOT/infra" apply -input=false ${APPLY_ARGS[@]+"${APPLY_ARGS[@]}"}
	fi
fi

RG=$(terraform -chdir="$ROOT/infra" output -raw resource_group_name)
# Every app of the module's `instances` (one Kafka consumer group), as
# "name host" lines.
mapfile -t APP_LINES < <(terraform -chdir="$ROOT/infra" output -json function_apps | jq -r '.[] | "\(.name) \(.default_hostname)"')
((${#APP_LINES[@]} > 0)) || die "terraform output function_apps lists no function app."
APPS=() HOSTS=()
for line in "${APP_LINES[@]}"; do
	APPS+=("${line%% *}")
	HOSTS+=("${line#* }")
done

read -r PKG_ACCOUNT PKG_CONTAINER PKG_BLOB < <(terraform -chdir="$ROOT/infra" output -json function_package | jq -r '"\(.storage_account_name) \(.container_name) \(.blob_name)"')
[[ -n ${PKG_BLOB:-} ]] || die "terraform output function_package names no blob for the package."

READY_TIMEOUT=${DEPLOY_READY_TIMEOUT:-1800}
POLL_INTERVAL=${DEPLOY_POLL_INTERVAL:-30}
RESTART_INTERVAL=${DEPLOY_RESTART_INTERVAL:-300}
UPLOAD_TIMEOUT=${DEPLOY_UPLOAD_TIMEOUT:-600}
LOGIN_MARGIN=${DEPLOY_LOGIN_MARGIN:-300}

# Secrets (the function keys) go to curl in header files, never
# on a command line or in the output.
SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT
umask 077

# ensure_login: the az login stays valid for at least LOGIN_MARGIN seconds,
# logging in again with DEPLOY_AZ_LOGIN when it would not (a federated
# login cannot be renewed by az: AADSTS700024). Stops the script otherwise.
ensure_login() {
	local expires failed= code
	expires=$(az account get-access-token --query expires_on -o tsv 2>"$SCRATCH/login.err") || failed=1
	if [[ -z $failed ]] && { [[ ! $expires =~ ^[0-9]+$ ]] || ((expires - $(date +%s) > LOGIN_MARGIN)); }; then
		return 0 # valid for long enough (or an az without expires_on)
	fi
	if [[ -z ${DEPLOY_AZ_LOGIN:-} ]]; then
		# A person's login renews itself; only a failed token is fatal.
		[[ -z $failed ]] && return 0
		code=$(grep -o 'AADSTS[0-9]*' "$SCRATCH/login.err" | head -n1 || true)
		die "the Azure CLI login has expired${code:+ ($code)}: a federated login cannot be renewed by az (AADSTS700024): set DEPLOY_AZ_LOGIN to a command that logs in again, or run the script again; timers not yet enabled stay disabled (AzureWebJobs.MirrorTimer.Disabled=true)."
	fi
	echo "==> the Azure CLI login expires within ${LOGIN_MARGIN}s: logging in again (DEPLOY_AZ_LOGIN)"
	bash -c "$DEPLOY_AZ_LOGIN" >/dev/null 2>"$SCRATCH/login.err" ||
		die "DEPLOY_AZ_LOGIN failed: $(head -c 300 "$SCRATCH/login.err"); timers not yet enabled stay disabled (AzureWebJobs.MirrorTimer.Disabled=true)."
}

# The package goes to its blob as the az login's identity. The deployer's
# Storage Blob Data Contributor on the container may be minutes old: retry.
ensure_login
echo "==> uploading $PACKAGE to $PKG_ACCOUNT/$PKG_CONTAINER/$PKG_BLOB (Entra ID)"
upload_start=$SECONDS
until az storage blob upload --auth-mode login --account-name "$PKG_ACCOUNT" --container-name "$PKG_CONTAINER" \
	--name "$PKG_BLOB" --file "$PACKAGE" --overwrite true --only-show-errors >/dev/null 2>"$SCRATCH/upload.err"; do
	if ((SECONDS - upload_start >= UPLOAD_TIMEOUT)); then
		die "uploading the package to $PKG_ACCOUNT/$PKG_CONTAINER failed for ${UPLOAD_TIMEOUT}s: $(head -c 300 "$SCRATCH/upload.err"). The az login must be in deployer_object_ids (Storage Blob Data Contributor on the container) and reach the account (restrict_public_network_access: from inside the VNet or network_allowed_ip_ranges)."
	fi
	echo "    upload refused ($(head -c 200 "$SCRATCH/upload.err" | tr '\n' ' ')); the role may still be propagating, retrying"
	sleep "$POLL_INTERVAL"
done
# Each app loads the package at its start: restart every one.
for app in "${APPS[@]}"; do
	echo "==> restarting $app ($RG) to run the package"
	az functionapp restart --resource-group "$RG" --name "$app" >/dev/null
done

# function_key APP: the app's default host key, written to a header file.
function_key() {
	local key
	key=$(az functionapp keys list --resource-group "$RG" --name "$1" --query functionKeys.default -o tsv 2>/dev/null) || return 1
	[[ -n $key ]] || return 1
	printf 'x-functions-key: %s\n' "$key" >"$SCRATCH/key-$1"
}

# unresolved_references APP: names of the app settings whose Key Vault
# reference the platform could not resolve (empty when all resolved).
unresolved_references() {
	az rest --method get \
		--url "https://management.azure.com/subscriptions/$ARM_SUBSCRIPTION_ID/resourceGroups/$RG/providers/Microsoft.Web/sites/$1/config/configreferences/appsettings?api-version=2022-03-01" \
		--query "value[?properties.status!='Resolved'].name" -o tsv 2>/dev/null || true
}

# check_app I: one readiness check of app I. Returns 0 when its status is
# ok with a drain reported (left in $SCRATCH/status-<app>.json); otherwise
# sets REASON[I], restarts the app for unresolved Key Vault references or
# starts a short catch-up, and returns 1.
check_app() {
	local i=$1 app=${APPS[$1]} host=${HOSTS[$1]} refs code
	local status=$SCRATCH/status-$app.json
	refs=$(unresolved_references "$app")
	if [[ -n $refs ]]; then
		REASON[i]="Key Vault references not resolved: $(tr '\n' ' ' <<<"$refs")"
		if [[ -z ${LAST_RESTART[i]:-} ]] || ((SECONDS - LAST_RESTART[i] >= RESTART_INTERVAL)); then
			echo "    $app: ${REASON[i]}; restarting the app so that it resolves them again"
			az functionapp restart --resource-group "$RG" --name "$app" >/dev/null || true
			LAST_RESTART[i]=$SECONDS
		fi
		return 1
	fi
	if [[ ! -s $SCRATCH/key-$app ]] && ! function_key "$app"; then
		REASON[i]="no function key yet (the host is starting)"
		return 1
	fi
	# The readiness catch-up's status answers on every instance (the
	# instance that runs it shares it); the drains an instance reports are
	# its own, and the instance answering may not have run one.
	local url="https://$host/api/status"
	if [[ -n ${RUN[i]:-} ]]; then
		url+="?run=${RUN[i]}"
	fi
	code=$(curl -sS -o "$status" -w '%{http_code}' --max-time 60 \
		-H @"$SCRATCH/key-$app" "$url") || code=000
	# Ready: ok, a drain reported (by the instance that answered or, as
	# published, by another) or the catch-up caught up, and no catch-up
	# running (enabling the timer restarts the app, which would kill it).
	if [[ $code == 200 ]] && jq -e '.ok == true and .catch_up == null and (((.last_drains // []) | length > 0) or ([.instances[]?.last_drains[]?] | length > 0) or .run.state == "caught up")' "$status" >/dev/null 2>&1; then
		return 0
	fi
	if [[ $code == 200 || $code == 503 ]]; then
		REASON[i]=$(jq -r '.reason // .lag_error // (if .catch_up != null then "readiness catch-up running" else "no drain yet" end)' "$status" 2>/dev/null || echo "unreadable status")
	elif [[ $code == 404 && -n ${RUN[i]:-} ]]; then
		REASON[i]="readiness catch-up ${RUN[i]} unknown (its instance restarted)"
		RUN[i]=
		code=200
	else
		REASON[i]="/api/status answered HTTP $code"
	fi
	if [[ $code == 200 ]] && ! jq -e '.catch_up != null or .run.state == "running"' "$status" >/dev/null 2>&1; then
		# Settings valid, Kafka readable, no catch-up running: a short
		# catch-up reads Kafka and sends to Event Hubs (again, after an
		# unauthorized send).
		RUN[i]=$(curl -sS --max-time 60 -X POST -H @"$SCRATCH/key-$app" -H 'Content-Type: application/json' \
			--data '{"max_duration":"1m"}' "https://$host/api/catchup" | jq -r '.id // empty' 2>/dev/null) || RUN[i]=
	fi
	echo "    $app not ready: ${REASON[i]}"
	return 1
}

# Poll every app not yet ready; each app's timer is enabled as soon as its
# own status is good.
echo "==> waiting for ${APPS[*]} to read Kafka and send to Event Hubs (at most ${READY_TIMEOUT}s; each timer stays disabled until then)"
start=$SECONDS
REASON=() LAST_RESTART=() RUN=() PENDING=("${!APPS[@]}")
for i in "${PENDING[@]}"; do REASON[i]="no answer from /api/status yet"; done
while :; do
	ensure_login
	still=()
	for i in "${PENDING[@]}"; do
		if check_app "$i"; then
			app=${APPS[$i]}
			echo "==> $app: enabling the timer (AzureWebJobs.MirrorTimer.Disabled=false)"
			az functionapp config appsettings set --resource-group "$RG" --name "$app" \
				--settings AzureWebJobs.MirrorTimer.Disabled=false >/dev/null
			echo "==> $app status:"
			jq '{ok, reason, lag_total: .lag.total, last_drain: (.last_drains[0] // null | {run, records, stopped})}' "$SCRATCH/status-$app.json"
			echo "==> deployed: https://${HOSTS[$i]}"
		else
			still+=("$i")
		fi
	done
	PENDING=(${still[@]+"${still[@]}"})
	if ((${#PENDING[@]} == 0)) || ((SECONDS - start >= READY_TIMEOUT)); then
		break
	fi
	sleep "$POLL_INTERVAL"
done

if ((${#PENDING[@]} > 0)); then
	summary=
	for i in "${PENDING[@]}"; do
		summary+="${summary:+; }${APPS[$i]}: ${REASON[$i]}"
	done
	die "not ready after ${READY_TIMEOUT}s ($summary); their timers stay disabled (AzureWebJobs.MirrorTimer.Disabled=true). Fix the cause and run the script again."
fi
