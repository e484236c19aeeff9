terraform {
  # Plans and applies need Terraform >= 1.11 (write-only Key Vault secret
  # values, keyvault.tf). The offline tests in tests/ use
  # mock providers and overrides, which need Terraform >= 1.7
  # (scripts/terraform-check.sh runs them with a suitable version).
  required_version = ">= 1.11"

  required_providers {
    azurerm = {
      source  = "hashicorp/azurerm"
      version = "~> 5.2"
    }
    # time_sleep: waits for role assignments to propagate.
    time = {
      source  = "hashicorp/time"
      version = "~> 0.13"
    }
  }
}
