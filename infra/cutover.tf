# The consumer cut-over (POST /api/cutover, docs/cutover.md) writes the Event
# Hubs consumers' checkpoints into their Blob container. Its settings are
# optional: unset, a request names the blob service URI and container
# itself. Preferred is the app's identity (CUTOVER_STORAGE__blobServiceUri):
# grant the function app's identity (output function_app_principal_id)
# Storage Blob Data Contributor on that container yourself; the module does
# not manage the consumers' storage account. A connection string
# (CUTOVER_STORAGE) is a secret: a Key Vault secret, referenced from the app
# setting like the Kafka credentials.

variable "cutover_storage_blob_service_uri" {
  description = "CUTOVER_STORAGE__blobServiceUri: blob endpoint of the consumers' checkpoint storage account, https://ACCOUNT.blob.core.windows.net, used with the app's identity (grant it Storage Blob Data Contributor there). Null: not written (a cut-over request names it)."
  type        = string
  default     = null

  validation {
    condition     = var.cutover_storage_blob_service_uri == null || can(regex("^https?://[^/?#\\s]+", coalesce(var.cutover_storage_blob_service_uri, "-")))
    error_message = "cutover_storage_blob_service_uri must be null or the account's blob endpoint, https://<account>.blob.core.windows.net."
  }
}

variable "cutover_storage_connection_string" {
  description = "CUTOVER_STORAGE: connection string of the consumers' checkpoint storage account instead of cutover_storage_blob_service_uri. Stored as a Key Vault secret and referenced from the app setting. Pass it through TF_VAR_cutover_storage_connection_string. Null: not written."
  type        = string
  default     = null
  sensitive   = true

  validation {
    condition = var.cutover_storage_connection_string == null || (
      can(regex("(?i)(^|;)\\s*(AccountName|BlobEndpoint)=", coalesce(var.cutover_storage_connection_string, "-"))) &&
      !can(regex("(?i)^\\s*UseDevelopmentStorage=", coalesce(var.cutover_storage_connection_string, "-")))
    )
    error_message = "cutover_storage_connection_string must be null or a storage account connection string with AccountName or BlobEndpoint (UseDevelopmentStorage is not supported by the Blob client)."
  }
}

variable "cutover_container" {
  description = "CUTOVER_CONTAINER: the consumers' checkpoint container (it must exist). Null: not written (a cut-over request names it)."
  type        = string
  default     = null

  validation {
    condition     = var.cutover_container == null || (can(regex("^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$", coalesce(var.cutover_container, "-"))) && !strcontains(coalesce(var.cutover_container, "-"), "--"))
    error_message = "cutover_container must be null or a blob container name: 3-63 lower-case letters, digits and single hyphens, beginning and ending with a letter or digit."
  }
}

locals {
  # Only whether the secret is set decides whether it exists (for_each keys
  # known at plan time, no secret in them).
  cutover_secret_names = nonsensitive(var.cutover_storage_connection_string != null) ? { CUTOVER_STORAGE = "cutover-storage" } : {}

  # Merged into the function app's settings (functionapp.tf).
  cutover_app_settings = merge(
    var.cutover_storage_blob_service_uri != null ? { CUTOVER_STORAGE__blobServiceUri = var.cutover_storage_blob_service_uri } : {},
    var.cutover_container != null ? { CUTOVER_CONTAINER = var.cutover_container } : {},
    {
      for setting, secret in azurerm_key_vault_secret.cutover :
      setting => "@Microsoft.KeyVault(SecretUri=${secret.versionless_id}/)"
    },
  )
}

resource "azurerm_key_vault_secret" "cutover" {
  for_each = local.cutover_secret_names

  name         = each.value
  key_vault_id = azurerm_key_vault.this.id
  # Write-only (keyvault.tf): in neither the state nor the plan.
  value_wo         = var.cutover_storage_connection_string
  value_wo_version = var.key_vault_secrets_version
  content_type     = "text/plain"

  tags = local.tags

  # Written only once the deployer's role has propagated (keyvault.tf).
  depends_on = [time_sleep.deployer_key_vault_secrets]

  lifecycle {
    precondition {
      condition     = var.cutover_storage_blob_service_uri == null
      error_message = "cutover_storage_connection_string and cutover_storage_blob_service_uri are both set; set one (the handler refuses CUTOVER_STORAGE with CUTOVER_STORAGE__blobServiceUri)."
    }
  }
}
