# The function apps' own storage without a key in any app setting (issue 24,
# item 7).
#
# AzureWebJobsStorage: identity-based. The provider writes
# AzureWebJobsStorage__accountName (storage_uses_managed_identity); the app
# has only a user-assigned identity, so the host also needs the credential
# type and that identity's client ID. Its roles on this account are in
# functionapp.tf (host_storage_*), waited for with the app's other roles.
#
# Content share (WEBSITE_CONTENTAZUREFILECONNECTIONSTRING): Elastic Premium
# mounts it over SMB with the account key; Azure Files does not support a
# managed identity there. The connection string is a Key Vault secret and
# the setting a Key Vault reference resolved with the app's identity. The
# platform cannot validate a reference when the setting is written, so
# WEBSITE_SKIP_CONTENTSHARE_VALIDATION is on and the module creates each
# app's share itself (one per app: apps must not share a content share).

resource "azurerm_key_vault_secret" "function_content_connection" {
  name         = "function-content-connection-string"
  key_vault_id = azurerm_key_vault.this.id
  value        = azurerm_storage_account.function.primary_connection_string
  content_type = "text/plain"

  tags = local.tags

  depends_on = [time_sleep.deployer_key_vault_secrets]
}

resource "azurerm_storage_share" "content" {
  count = var.instances

  name               = local.function_app_names[count.index]
  storage_account_id = azurerm_storage_account.function.id
  quota              = 50 # GiB; the package and the host's files need far less
}

locals {
  host_storage_app_settings = merge(
    {
      AzureWebJobsStorage__credential = "managedidentity"
      AzureWebJobsStorage__clientId   = azurerm_user_assigned_identity.function_app.client_id

      WEBSITE_CONTENTAZUREFILECONNECTIONSTRING = "@Microsoft.KeyVault(SecretUri=${azurerm_key_vault_secret.function_content_connection.versionless_id}/)"
      WEBSITE_SKIP_CONTENTSHARE_VALIDATION     = "1"
    },
    # Storage without public access (network.tf): the share is mounted
    # through the VNet integration and the file private endpoint.
    var.restrict_public_network_access ? { WEBSITE_CONTENTOVERVNET = "1" } : {},
  )
}
