# Shared defaults for mock_provider "azurerm" in the offline tests.
#
# Computed values are random strings under a mock provider. Attributes the
# real provider validates (resource IDs, tenant IDs) get well-formed values
# here, so later runs in a file, which plan against the state of earlier
# ones, still pass the provider's own validation.

mock_data "azurerm_client_config" {
  defaults = {
    client_id       = "00000000-0000-0000-0000-0000000000c1"
    object_id       = "00000000-0000-0000-0000-0000000000de" # the deployer
    subscription_id = "00000000-0000-0000-0000-000000000005"
    tenant_id       = "00000000-0000-0000-0000-0000000000aa"
  }
}

mock_data "azurerm_resource_group" {
  defaults = {
    id       = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-existing"
    location = "westeurope"
  }
}

mock_resource "azurerm_resource_group" {
  defaults = {
    id = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ehmirror-test"
  }
}

mock_resource "azurerm_eventhub_namespace" {
  defaults = {
    id = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ehmirror-test/providers/Microsoft.EventHub/namespaces/evhns-ehmirror-test"
  }
}

mock_resource "azurerm_eventhub" {
  defaults = {
    id = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ehmirror-test/providers/Microsoft.EventHub/namespaces/evhns-ehmirror-test/eventhubs/hub"
  }
}

# Test files override the two storage accounts with distinct IDs.
mock_resource "azurerm_storage_account" {
  defaults = {
    id = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ehmirror-test/providers/Microsoft.Storage/storageAccounts/stmock"
  }
}

mock_resource "azurerm_service_plan" {
  defaults = {
    id = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ehmirror-test/providers/Microsoft.Web/serverFarms/asp-ehmirror-test"
  }
}

mock_resource "azurerm_key_vault" {
  defaults = {
    id        = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ehmirror-test/providers/Microsoft.KeyVault/vaults/kv-ehmirror-test"
    vault_uri = "https://kv-ehmirror-test.vault.azure.net/"
  }
}

mock_resource "azurerm_log_analytics_workspace" {
  defaults = {
    id = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ehmirror-test/providers/Microsoft.OperationalInsights/workspaces/log-ehmirror-test"
  }
}

mock_resource "azurerm_application_insights" {
  defaults = {
    id                = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ehmirror-test/providers/Microsoft.Insights/components/appi-ehmirror-test"
    connection_string = "InstrumentationKey=00000000-0000-0000-0000-0000000000a1;IngestionEndpoint=https://westeurope-0.in.applicationinsights.azure.com/"
  }
}

mock_resource "azurerm_linux_function_app" {
  defaults = {
    id               = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ehmirror-test/providers/Microsoft.Web/sites/func-ehmirror-test"
    default_hostname = "func-ehmirror-test.azurewebsites.net"
  }
}

mock_resource "azurerm_user_assigned_identity" {
  defaults = {
    id           = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ehmirror-test/providers/Microsoft.ManagedIdentity/userAssignedIdentities/id-ehmirror-test"
    principal_id = "00000000-0000-0000-0000-0000000000f1"
    client_id    = "00000000-0000-0000-0000-0000000000c2"
    tenant_id    = "00000000-0000-0000-0000-0000000000aa"
  }
}

mock_resource "azurerm_role_assignment" {
  defaults = {
    id = "/subscriptions/00000000-0000-0000-0000-000000000005/providers/Microsoft.Authorization/roleAssignments/00000000-0000-0000-0000-0000000000ra"
  }
}

mock_resource "azurerm_monitor_action_group" {
  defaults = {
    id = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ehmirror-test/providers/Microsoft.Insights/actionGroups/ag-ehmirror-test"
  }
}

mock_resource "azurerm_key_vault_secret" {
  defaults = {
    id             = "https://kv-ehmirror-test.vault.azure.net/secrets/mock/00000000000000000000000000000001"
    versionless_id = "https://kv-ehmirror-test.vault.azure.net/secrets/mock"
  }
}

mock_resource "azurerm_private_dns_zone" {
  defaults = {
    id = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ehmirror-test/providers/Microsoft.Network/privateDnsZones/privatelink.blob.core.windows.net"
  }
}

mock_resource "azurerm_storage_share" {
  defaults = {
    id = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ehmirror-test/providers/Microsoft.Storage/storageAccounts/stfunction/fileServices/default/fileshares/share"
  }
}

# The package container is the scope of the deployers' upload role.
mock_resource "azurerm_storage_container" {
  defaults = {
    id = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ehmirror-test/providers/Microsoft.Storage/storageAccounts/stmock/blobServices/default/containers/function-packages"
  }
}
