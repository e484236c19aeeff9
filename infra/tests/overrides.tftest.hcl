# Non-default inputs: per-hub overrides, tiers, Kafka without SASL, a CA
# bundle, an existing resource group and VNet integration.

mock_provider "azurerm" {
  source = "./tests/mocks"
}

mock_provider "time" {}

override_resource {
  target = azurerm_storage_account.capture
  values = {
    id = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ehmirror-test/providers/Microsoft.Storage/storageAccounts/stcapture"
  }
}

override_resource {
  target = azurerm_storage_account.function
  values = {
    id = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ehmirror-test/providers/Microsoft.Storage/storageAccounts/stfunction"
  }
}

variables {
  # Alerts notify someone (check.alert_targets; monitoring.tftest.hcl
  # tests the warning without a target).
  alert_action_group_ids = ["/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ops/providers/Microsoft.Insights/actionGroups/ag-ops"]
  location               = "westeurope"
  name_suffix            = "t02"
  kafka_brokers          = ["10.0.0.4:9092"]
  kafka_sasl_username    = "mirror-user"
  kafka_sasl_password    = "another-secret"
  # The deployers (Key Vault, package and Capture roles), independent of
  # the caller (the mock client config's object ID ends in "de").
  deployer_object_ids = ["00000000-0000-0000-0000-0000000000de"]
}

run "retention_and_partitions_can_be_overridden_per_hub" {
  variables {
    event_hubs = {
      "prod.orders"   = { message_retention = 7, partition_count = 32, consumer_groups = ["analytics", "audit"] }
      "prod.payments" = { partition_count = 1 }
      "prod.audit"    = {}
    }
  }

  assert {
    condition     = azurerm_eventhub.this["prod.orders"].message_retention == 7 && azurerm_eventhub.this["prod.orders"].partition_count == 32
    error_message = "A hub's retention and partition count must follow its overrides."
  }

  assert {
    condition     = azurerm_eventhub.this["prod.payments"].message_retention == 1 && azurerm_eventhub.this["prod.audit"].message_retention == 1
    error_message = "Hubs without an override must keep the 1-day retention."
  }

  assert {
    condition     = azurerm_eventhub.this["prod.payments"].partition_count == 1 && azurerm_eventhub.this["prod.audit"].partition_count == 4
    error_message = "Partition counts must follow the map (default 4)."
  }

  assert {
    condition     = sort(keys(azurerm_eventhub_consumer_group.this)) == tolist(["prod.orders/analytics", "prod.orders/audit"])
    error_message = "Consumer groups must be created per hub as listed."
  }

  assert {
    condition     = alltrue([for cg in azurerm_eventhub_consumer_group.this : cg.eventhub_name == "prod.orders" && cg.namespace_name == azurerm_eventhub_namespace.this.name])
    error_message = "Consumer groups must belong to their hub in the mirror's namespace."
  }

  assert {
    condition     = alltrue([for hub in azurerm_eventhub.this : hub.capture_description[0].enabled])
    error_message = "Capture must stay enabled on every hub."
  }
}

run "capture_windows_follow_variables" {
  variables {
    capture_interval_in_seconds = 60
    capture_size_limit_in_bytes = 10485760
    capture_skip_empty_archives = false
    capture_container_name      = "eh-archive"
    capture_archive_name_format = "{EventHub}/{Year}-{Month}-{Day}/{Hour}{Minute}{Second}-{Namespace}-{PartitionId}"
  }

  assert {
    condition = alltrue([
      for hub in azurerm_eventhub.this :
      hub.capture_description[0].interval_in_seconds == 60 &&
      hub.capture_description[0].size_limit_in_bytes == 10485760 &&
      !hub.capture_description[0].skip_empty_archives &&
      hub.capture_description[0].destination[0].blob_container_name == "eh-archive" &&
      hub.capture_description[0].destination[0].archive_name_format == "{EventHub}/{Year}-{Month}-{Day}/{Hour}{Minute}{Second}-{Namespace}-{PartitionId}"
    ])
    error_message = "Capture settings must follow the variables."
  }
}

run "premium_namespace_allows_longer_retention" {
  variables {
    eventhubs_sku      = "Premium"
    eventhubs_capacity = 2
    event_hubs         = { "prod.long" = { message_retention = 30 } }
  }

  assert {
    condition     = azurerm_eventhub_namespace.this.sku == "Premium" && azurerm_eventhub_namespace.this.capacity == 2
    error_message = "Premium tier and processing units must follow the variables."
  }

  assert {
    condition     = azurerm_eventhub.this["prod.long"].message_retention == 30
    error_message = "Premium allows retention beyond 7 days."
  }
}

run "auto_inflate_sets_the_maximum" {
  variables {
    eventhubs_capacity                     = 2
    eventhubs_auto_inflate_enabled         = true
    eventhubs_maximum_throughput_units     = 8
    eventhubs_local_authentication_enabled = true
  }

  assert {
    condition     = azurerm_eventhub_namespace.this.auto_inflate_enabled && azurerm_eventhub_namespace.this.maximum_throughput_units == 8
    error_message = "Auto-inflate and its maximum must follow the variables."
  }

  assert {
    condition     = azurerm_eventhub_namespace.this.local_authentication_enabled
    error_message = "Local authentication must be switchable back on."
  }
}

run "kafka_without_sasl_has_no_credential_secrets" {
  variables {
    kafka_sasl_mechanism          = "none"
    kafka_sasl_username           = null
    kafka_sasl_password           = null
    kafka_tls                     = false
    kafka_start_offset            = "latest"
    kafka_session_timeout_seconds = 6
  }

  assert {
    condition     = length(azurerm_key_vault_secret.kafka) == 0
    error_message = "Without SASL no credential secrets are stored."
  }

  assert {
    condition = (
      !contains(keys(azurerm_linux_function_app.this[0].app_settings), "KAFKA_SASL_USERNAME") &&
      !contains(keys(azurerm_linux_function_app.this[0].app_settings), "KAFKA_SASL_PASSWORD") &&
      azurerm_linux_function_app.this[0].app_settings["KAFKA_SASL_MECHANISM"] == "none" &&
      azurerm_linux_function_app.this[0].app_settings["KAFKA_TLS"] == "false" &&
      azurerm_linux_function_app.this[0].app_settings["KAFKA_START_OFFSET"] == "latest" &&
      azurerm_linux_function_app.this[0].app_settings["KAFKA_SESSION_TIMEOUT"] == "6s"
    )
    error_message = "Without SASL the credential settings are absent and the other Kafka settings follow the variables."
  }
}

run "ca_bundle_is_a_key_vault_reference" {
  variables {
    kafka_sasl_mechanism = "scram-sha-256"
    kafka_tls_ca_pem     = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUEXAMPLE\n-----END CERTIFICATE-----\n"
  }

  assert {
    condition     = startswith(azurerm_linux_function_app.this[0].app_settings["KAFKA_TLS_CA_PEM"], "@Microsoft.KeyVault(SecretUri=")
    error_message = "KAFKA_TLS_CA_PEM must be a Key Vault reference."
  }

  assert {
    condition     = azurerm_linux_function_app.this[0].app_settings["KAFKA_TLS_CA_PEM"] == "@Microsoft.KeyVault(SecretUri=${azurerm_key_vault_secret.kafka["KAFKA_TLS_CA_PEM"].versionless_id}/)"
    error_message = "KAFKA_TLS_CA_PEM must reference the kafka-tls-ca-pem secret."
  }

  assert {
    condition     = azurerm_key_vault_secret.kafka["KAFKA_TLS_CA_PEM"].name == "kafka-tls-ca-pem"
    error_message = "The CA bundle must be stored as the kafka-tls-ca-pem secret."
  }

  assert {
    condition = alltrue([
      for k in ["KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD", "KAFKA_TLS_CA_PEM"] :
      startswith(azurerm_linux_function_app.this[0].app_settings[k], "@Microsoft.KeyVault(")
    ])
    error_message = "Every Kafka secret setting must be a Key Vault reference."
  }

  assert {
    condition     = alltrue([for v in values(azurerm_linux_function_app.this[0].app_settings) : !strcontains(v, "BEGIN CERTIFICATE") && !strcontains(v, "another-secret")])
    error_message = "No Kafka secret may appear as a plain app setting value."
  }
}

run "handler_settings_follow_variables" {
  variables {
    kafka_brokers                  = ["b1:9093", "b2:9093", "b3:9093"]
    kafka_group                    = "mirror-eu"
    kafka_topics_include           = "^(prod|stage)\\..*"
    kafka_topics_exclude           = "\\.dlq$"
    mirror_schedule                = "*/30 * * * * *"
    mirror_max_records             = 5000
    mirror_max_bytes               = 1048576
    mirror_max_duration            = "1m30s"
    mirror_inflight_bytes          = 16777216
    mirror_catchup_max_duration    = "1h"
    kafka_tls_insecure_skip_verify = true
    mirror_partitioning            = "preserve"
    mirror_routes                  = "prod[.]orders[.](.*)=>orders.$1; ^prod\\.(.*)$ => mirror.$${1}"
    mirror_gap_policy              = "resume-earliest"
    mirror_oversize_policy         = "skip"
    additional_app_settings = {
      WEBSITE_TIME_ZONE = "UTC"
    }
  }

  assert {
    condition = (
      azurerm_linux_function_app.this[0].app_settings["KAFKA_BROKERS"] == "b1:9093,b2:9093,b3:9093" &&
      azurerm_linux_function_app.this[0].app_settings["KAFKA_GROUP"] == "mirror-eu" &&
      azurerm_linux_function_app.this[0].app_settings["KAFKA_TOPICS_INCLUDE"] == "^(prod|stage)\\..*" &&
      azurerm_linux_function_app.this[0].app_settings["KAFKA_TOPICS_EXCLUDE"] == "\\.dlq$"
    )
    error_message = "Kafka settings must follow the variables."
  }

  assert {
    condition = (
      azurerm_linux_function_app.this[0].app_settings["MIRROR_SCHEDULE"] == "*/30 * * * * *" &&
      azurerm_linux_function_app.this[0].app_settings["MIRROR_MAX_RECORDS"] == "5000" &&
      azurerm_linux_function_app.this[0].app_settings["MIRROR_MAX_BYTES"] == "1048576" &&
      azurerm_linux_function_app.this[0].app_settings["MIRROR_MAX_DURATION"] == "1m30s" &&
      azurerm_linux_function_app.this[0].app_settings["MIRROR_INFLIGHT_BYTES"] == "16777216" &&
      azurerm_linux_function_app.this[0].app_settings["MIRROR_CATCHUP_MAX_DURATION"] == "1h" &&
      azurerm_linux_function_app.this[0].app_settings["KAFKA_TLS_INSECURE_SKIP_VERIFY"] == "true" &&
      azurerm_linux_function_app.this[0].app_settings["MIRROR_PARTITIONING"] == "preserve" &&
      azurerm_linux_function_app.this[0].app_settings["MIRROR_ROUTES"] == "prod[.]orders[.](.*)=>orders.$1; ^prod\\.(.*)$ => mirror.$${1}" &&
      azurerm_linux_function_app.this[0].app_settings["MIRROR_GAP_POLICY"] == "resume-earliest" &&
      azurerm_linux_function_app.this[0].app_settings["MIRROR_OVERSIZE_POLICY"] == "skip"
    )
    error_message = "Mirror settings must follow the variables."
  }

  assert {
    condition     = azurerm_linux_function_app.this[0].app_settings["WEBSITE_TIME_ZONE"] == "UTC"
    error_message = "additional_app_settings must be passed through."
  }
}

run "existing_resource_group_and_vnet_integration" {
  variables {
    existing_resource_group_name          = "rg-existing"
    vnet_integration_subnet_id            = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-net/providers/Microsoft.Network/virtualNetworks/vnet-kafka/subnets/snet-functions"
    function_plan_sku                     = "EP2"
    function_maximum_elastic_worker_count = 5
    grant_deployer_capture_access         = false
    grant_deployer_key_vault_access       = false
  }

  assert {
    condition     = length(azurerm_resource_group.this) == 0 && azurerm_eventhub_namespace.this.resource_group_name == "rg-existing" && azurerm_linux_function_app.this[0].resource_group_name == "rg-existing"
    error_message = "With existing_resource_group_name no group is created and everything goes into the existing one."
  }

  assert {
    condition     = azurerm_linux_function_app.this[0].virtual_network_subnet_id == "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-net/providers/Microsoft.Network/virtualNetworks/vnet-kafka/subnets/snet-functions"
    error_message = "VNet integration must use the given subnet."
  }

  assert {
    condition     = azurerm_linux_function_app.this[0].site_config[0].vnet_route_all_enabled
    error_message = "With VNet integration all outbound traffic is routed through the VNet by default."
  }

  assert {
    condition     = azurerm_service_plan.this.sku_name == "EP2" && azurerm_service_plan.this.maximum_elastic_worker_count == 5
    error_message = "Plan SKU and maximum burst must follow the variables."
  }

  assert {
    condition     = length(azurerm_role_assignment.deployer_capture_blob) == 0 && length(azurerm_role_assignment.deployer_key_vault_secrets) == 0
    error_message = "Deployer role assignments must be switchable off."
  }

  assert {
    condition     = time_sleep.deployer_key_vault_secrets.triggers["role_assignment_ids"] == "" && !strcontains(time_sleep.capture_roles.triggers["role_assignment_ids"], ",")
    error_message = "Without deployer grants the waits follow only the remaining role assignments."
  }
}

run "role_propagation_wait_follows_variable" {
  variables {
    role_propagation_wait = "5m"
  }

  assert {
    condition     = alltrue([for d in [time_sleep.deployer_key_vault_secrets.create_duration, time_sleep.capture_roles.create_duration, time_sleep.function_app_roles.create_duration] : d == "5m"])
    error_message = "Every role propagation wait must follow role_propagation_wait."
  }
}
