# Kafka mutual TLS (kafka_tls.tf): the client certificate, its key and the
# key's password become Key Vault secrets, and the app settings
# KAFKA_TLS_CERT_PEM, KAFKA_TLS_KEY_PEM and KAFKA_TLS_KEY_PASSWORD reference
# them; nothing of the key reaches a plain app setting. Usable with SASL or
# alone. Bad combinations fail the plan with a message naming the variable.

mock_provider "azurerm" {
  source = "./tests/mocks"
}

mock_provider "time" {}

variables {
  # Alerts notify someone (check.alert_targets; monitoring.tftest.hcl
  # tests the warning without a target).
  alert_action_group_ids = ["/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ops/providers/Microsoft.Insights/actionGroups/ag-ops"]
  location               = "westeurope"
  name_suffix            = "t04"
  kafka_brokers          = ["broker-0.kafka.example.com:9093"]
  kafka_sasl_username    = "mirror-user"
  kafka_sasl_password    = "not-a-real-password"
  # The deployers (Key Vault, package and Capture roles), independent of
  # the caller (the mock client config's object ID ends in "de").
  deployer_object_ids = ["00000000-0000-0000-0000-0000000000de"]
}

run "no_client_certificate_by_default" {
  assert {
    condition     = length(azurerm_key_vault_secret.kafka_tls_client) == 0
    error_message = "Without kafka_tls_cert_pem there are no client certificate secrets."
  }

  assert {
    condition = alltrue([
      for k in ["KAFKA_TLS_CERT_PEM", "KAFKA_TLS_KEY_PEM", "KAFKA_TLS_KEY_PASSWORD"] :
      !contains(keys(azurerm_linux_function_app.this[0].app_settings), k)
    ])
    error_message = "Without a client certificate the KAFKA_TLS_CERT_PEM/KEY_PEM/KEY_PASSWORD settings are absent."
  }
}

run "client_certificate_with_sasl_is_key_vault_references" {
  variables {
    kafka_tls_cert_pem     = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUCLIENTCERT\n-----END CERTIFICATE-----\n"
    kafka_tls_key_pem      = "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIHsMFcGCSqGSIb3DQEFDTBKCLIENTKEY\n-----END ENCRYPTED PRIVATE KEY-----\n"
    kafka_tls_key_password = "key-pa55word-do-not-leak"
  }

  assert {
    condition = alltrue([
      for k, name in {
        KAFKA_TLS_CERT_PEM     = "kafka-tls-cert-pem"
        KAFKA_TLS_KEY_PEM      = "kafka-tls-key-pem"
        KAFKA_TLS_KEY_PASSWORD = "kafka-tls-key-password"
      } :
      azurerm_key_vault_secret.kafka_tls_client[k].name == name &&
      azurerm_key_vault_secret.kafka_tls_client[k].key_vault_id == azurerm_key_vault.this.id &&
      azurerm_linux_function_app.this[0].app_settings[k] == "@Microsoft.KeyVault(SecretUri=${azurerm_key_vault_secret.kafka_tls_client[k].versionless_id}/)"
    ])
    error_message = "Certificate, key and password must be Key Vault secrets in the vault, each referenced (versionless) by its app setting."
  }

  assert {
    condition     = startswith(azurerm_linux_function_app.this[0].app_settings["KAFKA_SASL_PASSWORD"], "@Microsoft.KeyVault(") && azurerm_linux_function_app.this[0].app_settings["KAFKA_SASL_MECHANISM"] == "scram-sha-512"
    error_message = "Mutual TLS goes together with SASL: the SASL settings stay."
  }

  assert {
    condition     = alltrue([for v in values(azurerm_linux_function_app.this[0].app_settings) : !strcontains(v, "PRIVATE KEY") && !strcontains(v, "CLIENTKEY") && !strcontains(v, "key-pa55word") && !strcontains(v, "BEGIN CERTIFICATE")])
    error_message = "No part of the certificate, key or password may appear as a plain app setting value."
  }

  assert {
    condition     = azurerm_key_vault_secret.kafka_tls_client["KAFKA_TLS_KEY_PEM"].content_type == "application/x-pem-file" && azurerm_key_vault_secret.kafka_tls_client["KAFKA_TLS_KEY_PASSWORD"].content_type == "text/plain"
    error_message = "PEM secrets are application/x-pem-file, the password text/plain."
  }
}

run "client_certificate_alone_without_sasl" {
  variables {
    kafka_sasl_mechanism = "none"
    kafka_sasl_username  = null
    kafka_sasl_password  = null
    kafka_tls_cert_pem   = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUCLIENTCERT\n-----END CERTIFICATE-----\n"
    kafka_tls_key_pem    = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49CLIENTKEY\n-----END PRIVATE KEY-----\n"
  }

  assert {
    condition     = sort(keys(azurerm_key_vault_secret.kafka_tls_client)) == tolist(["KAFKA_TLS_CERT_PEM", "KAFKA_TLS_KEY_PEM"])
    error_message = "An unencrypted key needs no password secret."
  }

  assert {
    condition     = !contains(keys(azurerm_linux_function_app.this[0].app_settings), "KAFKA_SASL_PASSWORD") && !contains(keys(azurerm_linux_function_app.this[0].app_settings), "KAFKA_TLS_KEY_PASSWORD")
    error_message = "Without SASL and with an unencrypted key there is no password setting."
  }

  assert {
    condition     = startswith(azurerm_linux_function_app.this[0].app_settings["KAFKA_TLS_KEY_PEM"], "@Microsoft.KeyVault(SecretUri=") && azurerm_linux_function_app.this[0].app_settings["KAFKA_TLS"] == "true"
    error_message = "KAFKA_TLS_KEY_PEM must be a Key Vault reference, over TLS."
  }
}

run "certificate_without_key_is_rejected" {
  command = plan

  variables {
    kafka_tls_cert_pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
  }

  expect_failures = [azurerm_key_vault_secret.kafka_tls_client]
}

run "key_without_certificate_is_rejected" {
  command = plan

  variables {
    kafka_tls_key_pem = "-----BEGIN PRIVATE KEY-----\nMIGH\n-----END PRIVATE KEY-----\n"
  }

  expect_failures = [azurerm_key_vault_secret.kafka_tls_client]
}

run "client_certificate_without_tls_is_rejected" {
  command = plan

  variables {
    kafka_tls          = false
    kafka_tls_cert_pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    kafka_tls_key_pem  = "-----BEGIN PRIVATE KEY-----\nMIGH\n-----END PRIVATE KEY-----\n"
  }

  expect_failures = [azurerm_key_vault_secret.kafka_tls_client]
}

run "password_for_an_unencrypted_key_is_rejected" {
  command = plan

  variables {
    kafka_tls_cert_pem     = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    kafka_tls_key_pem      = "-----BEGIN PRIVATE KEY-----\nMIGH\n-----END PRIVATE KEY-----\n"
    kafka_tls_key_password = "pw"
  }

  expect_failures = [azurerm_key_vault_secret.kafka_tls_client]
}

run "password_without_key_is_rejected" {
  command = plan

  variables {
    kafka_tls_key_password = "pw"
  }

  expect_failures = [azurerm_key_vault_secret.kafka_tls_client]
}

run "cert_pem_rejects_non_pem" {
  command = plan

  variables {
    kafka_tls_cert_pem = "not a certificate"
    kafka_tls_key_pem  = "-----BEGIN PRIVATE KEY-----\nMIGH\n-----END PRIVATE KEY-----\n"
  }

  expect_failures = [var.kafka_tls_cert_pem]
}

run "cert_pem_rejects_a_private_key" {
  command = plan

  variables {
    kafka_tls_cert_pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n-----BEGIN PRIVATE KEY-----\nMIGH\n-----END PRIVATE KEY-----\n"
    kafka_tls_key_pem  = "-----BEGIN PRIVATE KEY-----\nMIGH\n-----END PRIVATE KEY-----\n"
  }

  expect_failures = [var.kafka_tls_cert_pem]
}

run "key_pem_rejects_non_pem" {
  command = plan

  variables {
    kafka_tls_cert_pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    kafka_tls_key_pem  = "not a key"
  }

  expect_failures = [var.kafka_tls_key_pem]
}
