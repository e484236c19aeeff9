terraform {
  # Plans and applies need Terraform >= 1.6. The offline tests in tests/ use
  # mock providers and overrides, which need Terraform >= 1.7
  # (scripts/terraform-check.sh runs them with a suitable version).
  required_version = ">= 1.6"

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
