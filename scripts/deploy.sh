#!/usr/bin/env bash
# Deploy the mirror to Azure: terraform apply (infra/), zip-deploy the
# function package built by `make package`, wait until the app is ready,
# then enable its timer.
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
#     secrets in TF_VAR_kafka_sasl_username / TF_VAR_kafka_sasl_password;
#   * dist/ehmirror-functionapp.zip from `make package`;
#   * curl and jq.
#
# The zip deployment uses an Entra ID token of the az login (the app has
# basic-auth publishing credentials off); the deployer needs Contributor or
# Website Contributor on the app.
#
# Readiness: a new app starts with its timer disabled
# (AzureWebJobs.MirrorTimer.Disabled=true, infra/functionapp.tf), because its
# role assignments can take up to 30 minutes to take effect. After the zip
# deployment the script polls /api/status every DEPLOY_POLL_INTERVAL seconds
# (default 30), for at most DEPLOY_READY_TIMEOUT seconds (default 1800):
#   * Key Vault references the platform could not resolve (the identity's
#     role was not effective yet at the app's start) are named and the app
#     is restarted, at most every DEPLOY_RESTART_INTERVAL seconds (default
#     300), so that it resolves them again;
#   * while the settings are valid and Kafka is readable (status 200) but no
#     clean drain is reported, it starts a short catch-up (POST /api/catchup,
#     one minute), which reads Kafka and sends to the hubs that have records;
#   * once status says ok with a drain reported, it sets
#     AzureWebJobs.MirrorTimer.Disabled=false and prints the status.
# If the app is not ready in time, the timer stays disabled and the script
# fails with the status' reason; run it again to retry.
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
terraform -chdir="$ROOT/infra" apply -input=false ${APPLY_ARGS[@]+"${APPLY_ARGS[@]}"}

APP=$(terraform -chdir="$ROOT/infra" output -raw function_app_name)
RG=$(terraform -chdir="$ROOT/infra" output -raw resource_group_name)
HOST=$(terraform -chdir="$ROOT/infra" output -raw function_app_default_hostname)
# The app's SCM (Kudu) site: <app>.scm.<domain>.
SCM_HOST=${HOST%%.*}.scm.${HOST#*.}

READY_TIMEOUT=${DEPLOY_READY_TIMEOUT:-1800}
POLL_INTERVAL=${DEPLOY_POLL_INTERVAL:-30}
RESTART_INTERVAL=${DEPLOY_RESTART_INTERVAL:-300}

# Secrets (the token, the function key) go to curl in header files, never
# on a command line or in the output.
SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT
umask 077

echo "==> zip deploy $PACKAGE to $APP ($RG) with an Entra ID token"
TOKEN=$(az account get-access-token --resource https://management.azure.com/ --query accessToken -o tsv) ||
	die "could not get an Entra ID token from az."
printf 'Authorization: Bearer %s\n' "$TOKEN" >"$SCRATCH/scm-auth"
unset TOKEN
code=$(curl -sS -o "$SCRATCH/zipdeploy.out" -w '%{http_code}' --max-time 1200 -X POST \
	-H @"$SCRATCH/scm-auth" -H 'Content-Type: application/zip' \
	--data-binary @"$PACKAGE" "https://$SCM_HOST/api/zipdeploy") || code=000
rm -f "$SCRATCH/scm-auth"
[[ $code == 2?? ]] || die "zip deployment to https://$SCM_HOST/api/zipdeploy failed (HTTP $code): $(head -c 300 "$SCRATCH/zipdeploy.out" 2>/dev/null)"

# function_key: the app's default host key, written to a header file.
function_key() {
	local key
	key=$(az functionapp keys list --resource-group "$RG" --name "$APP" --query functionKeys.default -o tsv 2>/dev/null) || return 1
	[[ -n $key ]] || return 1
	printf 'x-functions-key: %s\n' "$key" >"$SCRATCH/key"
}

# unresolved_references: names of app settings whose Key Vault reference
# the platform could not resolve (empty when all resolved).
unresolved_references() {
	az rest --method get \
		--url "https://management.azure.com/subscriptions/$ARM_SUBSCRIPTION_ID/resourceGroups/$RG/providers/Microsoft.Web/sites/$APP/config/configreferences/appsettings?api-version=2022-03-01" \
		--query "value[?properties.status!='Resolved'].name" -o tsv 2>/dev/null || true
}

echo "==> waiting for $APP to read Kafka and send to Event Hubs (at most ${READY_TIMEOUT}s; the timer stays disabled until then)"
start=$SECONDS
last_restart=
reason="no answer from /api/status yet"
ready=
while :; do
	refs=$(unresolved_references)
	if [[ -n $refs ]]; then
		reason="Key Vault references not resolved: $(tr '\n' ' ' <<<"$refs")"
		if [[ -z $last_restart ]] || ((SECONDS - last_restart >= RESTART_INTERVAL)); then
			echo "    $reason; restarting the app so that it resolves them again"
			az functionapp restart --resource-group "$RG" --name "$APP" >/dev/null || true
			last_restart=$SECONDS
		fi
	elif [[ -s $SCRATCH/key ]] || function_key; then
		code=$(curl -sS -o "$SCRATCH/status.json" -w '%{http_code}' --max-time 60 \
			-H @"$SCRATCH/key" "https://$HOST/api/status") || code=000
		if [[ $code == 200 ]] && jq -e '.ok == true and ((.last_drains // []) | length > 0)' "$SCRATCH/status.json" >/dev/null 2>&1; then
			ready=1
			break
		fi
		if [[ $code == 200 || $code == 503 ]]; then
			reason=$(jq -r '.reason // .lag_error // "no drain yet"' "$SCRATCH/status.json" 2>/dev/null || echo "unreadable status")
		else
			reason="/api/status answered HTTP $code"
		fi
		if [[ $code == 200 ]]; then
			# Settings valid, Kafka readable: a short catch-up reads Kafka and
			# sends to Event Hubs (again, after an unauthorized send).
			curl -sS -o /dev/null --max-time 60 -X POST -H @"$SCRATCH/key" -H 'Content-Type: application/json' \
				--data '{"max_duration":"1m"}' "https://$HOST/api/catchup" || true
		fi
		echo "    not ready: $reason"
	else
		reason="no function key yet (the host is starting)"
	fi
	if ((SECONDS - start >= READY_TIMEOUT)); then
		break
	fi
	sleep "$POLL_INTERVAL"
done

if [[ -z $ready ]]; then
	die "$APP is not ready after ${READY_TIMEOUT}s ($reason); its timer stays disabled (AzureWebJobs.MirrorTimer.Disabled=true). Fix the cause and run the script again."
fi

echo "==> enabling the timer (AzureWebJobs.MirrorTimer.Disabled=false)"
az functionapp config appsettings set --resource-group "$RG" --name "$APP" \
	--settings AzureWebJobs.MirrorTimer.Disabled=false >/dev/null
echo "==> status:"
jq '{ok, reason, lag_total: .lag.total, last_drain: (.last_drains[0] // null | {run, records, stopped})}' "$SCRATCH/status.json"
echo "==> deployed: https://$HOST"
