# State in an Azure Storage blob, so that every run (a pipeline's included)
# finds the state of the last one. Partial: the settings come from
# `terraform init -backend-config=…` (scripts/deploy.sh --backend-config or
# TF_BACKEND_CONFIG; see backend.hcl.example), so no account name or key is
# committed. scripts/deploy.sh --local-state replaces it with a local state
# (backend_override.tf) for a one-machine trial.
terraform {
  backend "azurerm" {}
}
