# Every handler setting can be set on a deployed app (faults/terraform_settings_test.go
# checks the module's source against config.Names()): the settings a settings
# review found unwired (MIRROR_FOLLOW, MIRROR_MAX_BACKLOG_AGE,
# MIRROR_MAX_PAUSE_AGE, KAFKA_TLS_CERT_WARN_DAYS and the cut-over's CUTOVER_*)
# with their variables' defaults, values and validation; additional_app_settings
# refuses every handler setting, EVENTHUBS included.

mock_provider "azurerm" {
  source = "./tests/mocks"
}

mock_provider "time" {}

variables {
  # Alerts notify someone (check.alert_targets).
  alert_action_group_ids = ["/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ops/providers/Microsoft.Insights/actionGroups/ag-ops"]
  location               = "westeurope"
  name_suffix            = "t09"
  kafka_brokers          = ["broker-0.kafka.example.com:9093"]
  kafka_sasl_username    = "mirror-user"
  kafka_sasl_password    = "not-a-real-password"
  deployer_object_ids    = ["00000000-0000-0000-0000-0000000000de"]
}

run "new_settings_default_to_the_handlers_defaults" {
  command = plan

  assert {
    condition = (
      azurerm_linux_function_app.this[0].app_settings["MIRROR_FOLLOW"] == "true" &&
      azurerm_linux_function_app.this[0].app_settings["MIRROR_MAX_BACKLOG_AGE"] == "2m" &&
      azurerm_linux_function_app.this[0].app_settings["MIRROR_MAX_PAUSE_AGE"] == "24h" &&
      azurerm_linux_function_app.this[0].app_settings["KAFKA_TLS_CERT_WARN_DAYS"] == "14"
    )
    error_message = "By default MIRROR_FOLLOW=true, MIRROR_MAX_BACKLOG_AGE=2m, MIRROR_MAX_PAUSE_AGE=24h and KAFKA_TLS_CERT_WARN_DAYS=14 (the handler's defaults)."
  }

  assert {
    condition     = length([for k in keys(azurerm_linux_function_app.this[0].app_settings) : k if startswith(k, "CUTOVER_")]) == 0 && length(azurerm_key_vault_secret.cutover) == 0
    error_message = "Without cutover_* variables no CUTOVER_* setting is written and no cut-over secret exists (a request names the storage)."
  }
}

run "new_settings_follow_their_variables_on_every_app" {
  variables {
    instances                        = 2
    mirror_follow                    = false
    mirror_max_backlog_age           = "1h30m"
    mirror_max_pause_age             = "0"
    kafka_tls_cert_warn_days         = 0
    cutover_storage_blob_service_uri = "https://stconsumers.blob.core.windows.net"
    cutover_container                = "checkpoints"
  }

  assert {
    condition = alltrue([
      for app in azurerm_linux_function_app.this :
      app.app_settings["MIRROR_FOLLOW"] == "false" &&
      app.app_settings["MIRROR_MAX_BACKLOG_AGE"] == "1h30m" &&
      app.app_settings["MIRROR_MAX_PAUSE_AGE"] == "0" &&
      app.app_settings["KAFKA_TLS_CERT_WARN_DAYS"] == "0" &&
      app.app_settings["CUTOVER_STORAGE__blobServiceUri"] == "https://stconsumers.blob.core.windows.net" &&
      app.app_settings["CUTOVER_CONTAINER"] == "checkpoints" &&
      !contains(keys(app.app_settings), "CUTOVER_STORAGE")
    ])
    error_message = "Every app's MIRROR_FOLLOW, MIRROR_MAX_BACKLOG_AGE, MIRROR_MAX_PAUSE_AGE, KAFKA_TLS_CERT_WARN_DAYS and CUTOVER_* settings must follow the variables."
  }
}

run "cutover_connection_string_is_a_key_vault_reference" {
  variables {
    cutover_storage_connection_string = "DefaultEndpointsProtocol=https;AccountName=stconsumers;AccountKey=Y3V0b3Zlci1rZXktZG8tbm90LWxlYWs=;EndpointSuffix=core.windows.net"
    cutover_container                 = "checkpoints"
  }

  assert {
    condition = (
      azurerm_linux_function_app.this[0].app_settings["CUTOVER_STORAGE"] == "@Microsoft.KeyVault(SecretUri=${azurerm_key_vault_secret.cutover["CUTOVER_STORAGE"].versionless_id}/)" &&
      azurerm_key_vault_secret.cutover["CUTOVER_STORAGE"].name == "cutover-storage" &&
      azurerm_key_vault_secret.cutover["CUTOVER_STORAGE"].value == null &&
      azurerm_key_vault_secret.cutover["CUTOVER_STORAGE"].key_vault_id == azurerm_key_vault.this.id
    )
    error_message = "CUTOVER_STORAGE must be a versionless Key Vault reference to the write-only secret cutover-storage in the mirror's vault."
  }

  assert {
    condition     = alltrue([for v in values(azurerm_linux_function_app.this[0].app_settings) : !strcontains(v, "Y3V0b3Zlci1rZXktZG8tbm90LWxlYWs=") && !strcontains(v, "AccountKey")])
    error_message = "The cut-over connection string must not appear in any app setting."
  }
}

run "cutover_connection_string_and_uri_together_fail" {
  command = plan

  variables {
    cutover_storage_connection_string = "AccountName=stconsumers;AccountKey=a2V5"
    cutover_storage_blob_service_uri  = "https://stconsumers.blob.core.windows.net"
  }

  expect_failures = [azurerm_key_vault_secret.cutover]
}

run "new_settings_accept_their_boundaries" {
  command = plan

  variables {
    mirror_max_backlog_age            = "0.5s"
    mirror_max_pause_age              = "1ms"
    kafka_tls_cert_warn_days          = 3650
    cutover_storage_connection_string = "BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;AccountName=devstoreaccount1;AccountKey=a2V5"
    cutover_container                 = "abc"
  }
}

run "mirror_max_backlog_age_rejects_zero" {
  command = plan
  variables {
    mirror_max_backlog_age = "0s"
  }
  expect_failures = [var.mirror_max_backlog_age]
}

run "mirror_max_backlog_age_rejects_a_number_without_unit" {
  command = plan
  variables {
    mirror_max_backlog_age = "120"
  }
  expect_failures = [var.mirror_max_backlog_age]
}

run "mirror_max_pause_age_rejects_0s" {
  # The handler turns the check off only for exactly "0"; "0s" is not a
  # positive duration.
  command = plan
  variables {
    mirror_max_pause_age = "0s"
  }
  expect_failures = [var.mirror_max_pause_age]
}

run "mirror_max_pause_age_rejects_words" {
  command = plan
  variables {
    mirror_max_pause_age = "off"
  }
  expect_failures = [var.mirror_max_pause_age]
}

run "kafka_tls_cert_warn_days_rejects_negative" {
  command = plan
  variables {
    kafka_tls_cert_warn_days = -1
  }
  expect_failures = [var.kafka_tls_cert_warn_days]
}

run "kafka_tls_cert_warn_days_rejects_fractions" {
  command = plan
  variables {
    kafka_tls_cert_warn_days = 1.5
  }
  expect_failures = [var.kafka_tls_cert_warn_days]
}

run "cutover_storage_blob_service_uri_rejects_a_bare_host" {
  command = plan
  variables {
    cutover_storage_blob_service_uri = "stconsumers.blob.core.windows.net"
  }
  expect_failures = [var.cutover_storage_blob_service_uri]
}

run "cutover_storage_connection_string_rejects_development_storage" {
  command = plan
  variables {
    cutover_storage_connection_string = "UseDevelopmentStorage=true"
  }
  expect_failures = [var.cutover_storage_connection_string]
}

run "cutover_storage_connection_string_rejects_other_text" {
  command = plan
  variables {
    cutover_storage_connection_string = "https://stconsumers.blob.core.windows.net"
  }
  expect_failures = [var.cutover_storage_connection_string]
}

run "cutover_container_rejects_upper_case" {
  command = plan
  variables {
    cutover_container = "Checkpoints"
  }
  expect_failures = [var.cutover_container]
}

run "additional_app_settings_rejects_handler_settings" {
  command = plan
  variables {
    additional_app_settings = { MIRROR_FOLLOW = "false" }
  }
  expect_failures = [var.additional_app_settings]
}

run "additional_app_settings_rejects_an_eventhubs_connection_string" {
  command = plan
  variables {
    additional_app_settings = { EVENTHUBS = "Endpoint=sb://x.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=v" }
  }
  expect_failures = [var.additional_app_settings]
}

run "additional_app_settings_rejects_a_plain_cutover_connection_string" {
  command = plan
  variables {
    additional_app_settings = { CUTOVER_STORAGE = "AccountName=stconsumers;AccountKey=a2V5" }
  }
  expect_failures = [var.additional_app_settings]
}

run "additional_app_settings_passes_other_settings" {
  command = plan
  variables {
    additional_app_settings = { OTEL_EXPORTER_OTLP_ENDPOINT = "https://otel.example.com:4318" }
  }

  assert {
    condition     = azurerm_linux_function_app.this[0].app_settings["OTEL_EXPORTER_OTLP_ENDPOINT"] == "https://otel.example.com:4318"
    error_message = "additional_app_settings must still pass settings the module does not own."
  }
}

run "mirror_http_deadline_is_written_only_when_set" {
  variables {
    mirror_http_deadline = "90s"
  }

  assert {
    condition     = azurerm_linux_function_app.this[0].app_settings["MIRROR_HTTP_DEADLINE"] == "90s"
    error_message = "mirror_http_deadline = \"90s\" writes MIRROR_HTTP_DEADLINE=90s."
  }
}

run "mirror_http_deadline_is_absent_by_default" {
  assert {
    condition     = !contains(keys(azurerm_linux_function_app.this[0].app_settings), "MIRROR_HTTP_DEADLINE")
    error_message = "Without mirror_http_deadline no MIRROR_HTTP_DEADLINE is written (each route keeps its own deadline)."
  }
}

run "mirror_http_deadline_rejects_more_than_200s" {
  command = plan
  variables {
    mirror_http_deadline = "230s"
  }
  expect_failures = [var.mirror_http_deadline]
}

run "mirror_http_deadline_rejects_minutes" {
  command = plan
  variables {
    mirror_http_deadline = "2m"
  }
  expect_failures = [var.mirror_http_deadline]
}
