# The function apps' own storage without a key anywhere (issue 24, item 7;
# issue 44, item 1).
#
# AzureWebJobsStorage: identity-based. The provider writes
# AzureWebJobsStorage__accountName (storage_uses_managed_identity); the app
# has only a user-assigned identity, so the host also needs the credential
# type and that identity's client ID. Its roles on this account are in
# functionapp.tf (host_storage_*), waited for with the app's other roles.
#
# No Azure Files content share ("Create an app without Azure Files",
# Microsoft Learn, storage-considerations): an Elastic Premium app whose
# WEBSITE_RUN_FROM_PACKAGE is a blob URL runs that package, read with its
# identity (WEBSITE_RUN_FROM_PACKAGE_BLOB_MI_RESOURCE_ID, Storage Blob Data
# Owner on this account covers the documented Storage Blob Data Reader).
# scripts/deploy.sh uploads the package to that blob and restarts the apps.
# So the package lives in the blob, not in a file system that a restart or
# an unmounted share could lose; there is no connection string with the
# account key, no Key Vault reference the platform must resolve when the
# app is created (error 04603), and Shared Key is off on this account.

resource "azurerm_storage_container" "packages" {
  name                  = "function-packages"
  storage_account_id    = azurerm_storage_account.function.id
  container_access_type = "private"
}

# scripts/deploy.sh uploads the package as each of deployer_object_ids
# (az storage blob upload --auth-mode login), on this container only.
resource "azurerm_role_assignment" "deployer_packages" {
  for_each = toset(var.deployer_object_ids)

  scope                = azurerm_storage_container.packages.id
  role_definition_name = "Storage Blob Data Contributor"
  principal_id         = each.value
  description          = "ehmirror deployer (deployer_object_ids) uploads the function package."
}

locals {
  # The one package every app runs (deploy.sh uploads it here).
  function_package_blob = "ehmirror-functionapp.zip"
  function_package_url  = "${azurerm_storage_account.function.primary_blob_endpoint}${azurerm_storage_container.packages.name}/${local.function_package_blob}"

  host_storage_app_settings = {
    AzureWebJobsStorage__credential = "managedidentity"
    AzureWebJobsStorage__clientId   = azurerm_user_assigned_identity.function_app.client_id

    WEBSITE_RUN_FROM_PACKAGE                     = local.function_package_url
    WEBSITE_RUN_FROM_PACKAGE_BLOB_MI_RESOURCE_ID = azurerm_user_assigned_identity.function_app.id
  }
}
