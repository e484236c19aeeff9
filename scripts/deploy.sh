#!/usr/bin/env bash
# Deploy the mirror to Azure: terraform apply (infra/), then zip-deploy the
# function package built by `make package`.
#
# Usage: bash scripts/deploy.sh [--yes|-y] [terraform apply arguments…]
#
# Prerequisites (see the README's "Deploying to Azure"):
#   * az CLI logged in (`az login`, or `az login --service-principal` in CI),
#     the target subscription selected (`az account set --subscription <id>`)
#     or ARM_SUBSCRIPTION_ID set;
#   * terraform >= 1.6 with registry access (hashicorp/azurerm ~> 5.2,
#     hashicorp/time);
#   * infra/terraform.tfvars (copy of infra/terraform.tfvars.example), Kafka
#     secrets in TF_VAR_kafka_sasl_username / TF_VAR_kafka_sasl_password;
#   * dist/ehmirror-functionapp.zip from `make package`.
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
for arg in "$@"; do
	case $arg in
	--yes | -y) AUTO_APPROVE=1 ;;
	-auto-approve | --auto-approve) AUTO_APPROVE=1 ;;
	*) APPLY_ARGS+=("$arg") ;;
	esac
done
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
terraform -chdir="$ROOT/infra" init -input=false
terraform -chdir="$ROOT/infra" apply -input=false ${APPLY_ARGS[@]+"${APPLY_ARGS[@]}"}

APP=$(terraform -chdir="$ROOT/infra" output -raw function_app_name)
RG=$(terraform -chdir="$ROOT/infra" output -raw resource_group_name)

echo "==> zip deploy $PACKAGE to $APP ($RG)"
az functionapp deployment source config-zip \
	--resource-group "$RG" \
	--name "$APP" \
	--src "$PACKAGE"

echo "==> deployed: https://$(terraform -chdir="$ROOT/infra" output -raw function_app_default_hostname)"
