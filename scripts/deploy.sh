#!/usr/bin/env bash
# Deploy the mirror to Azure: terraform apply (infra/), then zip-deploy the
# function package built by `make package`.
#
# Prerequisites (see infra/README.md):
#   * az CLI logged in (`az login`), the target subscription selected
#     (`az account set --subscription <id>`);
#   * terraform >= 1.6 with registry access (hashicorp/azurerm ~> 5.2);
#   * infra/terraform.tfvars (copy of infra/terraform.tfvars.example), Kafka
#     secrets in TF_VAR_kafka_sasl_username / TF_VAR_kafka_sasl_password;
#   * dist/ehmirror-functionapp.zip from `make package`.
# Extra arguments are passed to `terraform apply` (e.g. -auto-approve).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PACKAGE=$ROOT/dist/ehmirror-functionapp.zip

die() {
	printf 'deploy: %s\n' "$*" >&2
	exit 1
}

command -v az >/dev/null 2>&1 || die "the Azure CLI (az) is not installed."
command -v terraform >/dev/null 2>&1 || die "terraform is not installed."
az account show >/dev/null 2>&1 || die "not logged in to Azure: run 'az login' (and 'az account set --subscription <id>')."
[[ -f $PACKAGE ]] || die "$PACKAGE is missing: run 'make package' first."
[[ -f $ROOT/infra/terraform.tfvars ]] || die "infra/terraform.tfvars is missing: copy infra/terraform.tfvars.example and edit it."

# The azurerm provider needs the subscription explicitly; default to az's.
ARM_SUBSCRIPTION_ID=${ARM_SUBSCRIPTION_ID:-$(az account show --query id -o tsv)}
export ARM_SUBSCRIPTION_ID
echo "==> subscription $ARM_SUBSCRIPTION_ID"

echo "==> terraform apply"
terraform -chdir="$ROOT/infra" init -input=false
terraform -chdir="$ROOT/infra" apply -input=false "$@"

APP=$(terraform -chdir="$ROOT/infra" output -raw function_app_name)
RG=$(terraform -chdir="$ROOT/infra" output -raw resource_group_name)

echo "==> zip deploy $PACKAGE to $APP ($RG)"
az functionapp deployment source config-zip \
	--resource-group "$RG" \
	--name "$APP" \
	--src "$PACKAGE"

echo "==> deployed: https://$(terraform -chdir="$ROOT/infra" output -raw function_app_default_hostname)"
