# Kafka mutual TLS: a client certificate and its private key (optionally an
# encrypted PKCS#8 key and its password) for clusters that authenticate
# clients by certificate (ssl.client.auth=required), alone or with SASL.
# Like the SASL credentials, each is a Key Vault secret; the app settings
# KAFKA_TLS_CERT_PEM, KAFKA_TLS_KEY_PEM and KAFKA_TLS_KEY_PASSWORD hold only
# @Microsoft.KeyVault(SecretUri=...) references, resolved with the function
# app's identity (its "Key Vault Secrets User" role on the vault).

variable "kafka_tls_cert_pem" {
  description = "Optional PEM client certificate for Kafka mutual TLS (the client certificate first, then any intermediates). Stored as a Key Vault secret and referenced from KAFKA_TLS_CERT_PEM. Needs kafka_tls = true and kafka_tls_key_pem."
  type        = string
  default     = null

  validation {
    condition     = var.kafka_tls_cert_pem == null || strcontains(coalesce(var.kafka_tls_cert_pem, "-"), "-----BEGIN CERTIFICATE-----")
    error_message = "kafka_tls_cert_pem must be null or PEM containing at least one -----BEGIN CERTIFICATE----- block."
  }

  validation {
    condition     = var.kafka_tls_cert_pem == null || !strcontains(coalesce(var.kafka_tls_cert_pem, "-"), "PRIVATE KEY-----")
    error_message = "kafka_tls_cert_pem holds a private key; put only certificates there and the key in kafka_tls_key_pem (a sensitive variable)."
  }
}

variable "kafka_tls_key_pem" {
  description = "Private key of kafka_tls_cert_pem, in PEM: PKCS#8, PKCS#1 (RSA), SEC 1 (EC), or encrypted PKCS#8 (PBES2) with kafka_tls_key_password. Stored as a Key Vault secret and referenced from KAFKA_TLS_KEY_PEM. Pass it through TF_VAR_kafka_tls_key_pem, not a file in the repository."
  type        = string
  default     = null
  sensitive   = true

  validation {
    condition     = var.kafka_tls_key_pem == null || strcontains(coalesce(var.kafka_tls_key_pem, "-"), "PRIVATE KEY-----")
    error_message = "kafka_tls_key_pem must be null or a PEM private key (-----BEGIN PRIVATE KEY-----, RSA, EC or ENCRYPTED PRIVATE KEY)."
  }
}

variable "kafka_tls_key_password" {
  description = "Password of an encrypted kafka_tls_key_pem (ENCRYPTED PRIVATE KEY). Stored as a Key Vault secret and referenced from KAFKA_TLS_KEY_PASSWORD. Null for an unencrypted key."
  type        = string
  default     = null
  sensitive   = true
}

locals {
  # Only whether a value is set decides which secrets exist, so the
  # for_each keys are known at plan time and hold no secret.
  kafka_tls_client_secret_names = merge(
    var.kafka_tls_cert_pem != null || nonsensitive(var.kafka_tls_key_pem != null) ? {
      KAFKA_TLS_CERT_PEM = "kafka-tls-cert-pem"
      KAFKA_TLS_KEY_PEM  = "kafka-tls-key-pem"
    } : {},
    nonsensitive(var.kafka_tls_key_password != null) ? {
      KAFKA_TLS_KEY_PASSWORD = "kafka-tls-key-password"
    } : {},
  )

  # Merged into the function app's settings (functionapp.tf).
  kafka_tls_client_secret_references = {
    for setting, secret in azurerm_key_vault_secret.kafka_tls_client :
    setting => "@Microsoft.KeyVault(SecretUri=${secret.versionless_id}/)"
  }
}

resource "azurerm_key_vault_secret" "kafka_tls_client" {
  for_each = local.kafka_tls_client_secret_names

  name         = each.value
  key_vault_id = azurerm_key_vault.this.id
  # Write-only (keyvault.tf): in neither the state nor the plan.
  value_wo = lookup({
    KAFKA_TLS_CERT_PEM     = var.kafka_tls_cert_pem
    KAFKA_TLS_KEY_PEM      = var.kafka_tls_key_pem
    KAFKA_TLS_KEY_PASSWORD = var.kafka_tls_key_password
  }, each.key)
  value_wo_version = var.key_vault_secrets_version
  content_type     = each.key == "KAFKA_TLS_KEY_PASSWORD" ? "text/plain" : "application/x-pem-file"

  tags = local.tags

  # Written only once the deployer's role has propagated (keyvault.tf).
  depends_on = [time_sleep.deployer_key_vault_secrets]

  lifecycle {
    precondition {
      condition     = (var.kafka_tls_cert_pem == null) == nonsensitive(var.kafka_tls_key_pem == null)
      error_message = "kafka_tls_cert_pem and kafka_tls_key_pem go together: set both (a client certificate and its key) or neither."
    }
    precondition {
      condition     = var.kafka_tls
      error_message = "kafka_tls_cert_pem is set but kafka_tls is false; a client certificate needs TLS."
    }
    precondition {
      condition     = nonsensitive(var.kafka_tls_key_password == null) || nonsensitive(var.kafka_tls_key_pem != null && strcontains(coalesce(var.kafka_tls_key_pem, "-"), "ENCRYPTED PRIVATE KEY"))
      error_message = "kafka_tls_key_password is set but kafka_tls_key_pem is not an encrypted key (-----BEGIN ENCRYPTED PRIVATE KEY-----); leave the password null."
    }
  }
}
