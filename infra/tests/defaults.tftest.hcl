# The default configuration, applied against a mocked azurerm provider (real
# provider schema and validation, no Azure calls).

mock_provider "azurerm" {
  source = "./tests/mocks"
}

# time_sleep really sleeps; the mock keeps the tests fast (its schema is real).
mock_provider "time" {}

# Known, distinct values where assertions compare identities and accounts.
override_resource {
  target = azurerm_storage_account.capture
  values = {
    id                 = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ehmirror-test/providers/Microsoft.Storage/storageAccounts/stcapture"
    primary_access_key = "Y2FwdHVyZS1rZXk="
  }
}

override_resource {
  target = azurerm_storage_account.function
  values = {
    id                 = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ehmirror-test/providers/Microsoft.Storage/storageAccounts/stfunction"
    primary_access_key = "ZnVuY3Rpb24ta2V5"
  }
}

override_resource {
  target = azurerm_eventhub_namespace.this
  values = {
    id = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ehmirror-test/providers/Microsoft.EventHub/namespaces/evhns-ehmirror-test"
    identity = {
      principal_id = "00000000-0000-0000-0000-0000000000e1"
      tenant_id    = "00000000-0000-0000-0000-0000000000aa"
    }
  }
}

override_resource {
  target = azurerm_linux_function_app.this
  values = {
    id               = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ehmirror-test/providers/Microsoft.Web/sites/func-ehmirror-test"
    default_hostname = "func-ehmirror-test.azurewebsites.net"
  }
}

# The app's user-assigned identity (principal ...f1, client ...c2).
override_resource {
  target = azurerm_user_assigned_identity.function_app
  values = {
    id           = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ehmirror-test/providers/Microsoft.ManagedIdentity/userAssignedIdentities/id-ehmirror-prod"
    principal_id = "00000000-0000-0000-0000-0000000000f1"
    client_id    = "00000000-0000-0000-0000-0000000000c2"
  }
}

# Distinct IDs, so that the waits can be checked against the roles they wait for.
override_resource {
  target = azurerm_role_assignment.deployer_key_vault_secrets
  values = {
    id = "/subscriptions/00000000-0000-0000-0000-000000000005/providers/Microsoft.Authorization/roleAssignments/deployer-kv"
  }
}

override_resource {
  target = azurerm_role_assignment.deployer_capture_blob
  values = {
    id = "/subscriptions/00000000-0000-0000-0000-000000000005/providers/Microsoft.Authorization/roleAssignments/deployer-capture"
  }
}

override_resource {
  target = azurerm_role_assignment.namespace_capture_blob
  values = {
    id = "/subscriptions/00000000-0000-0000-0000-000000000005/providers/Microsoft.Authorization/roleAssignments/namespace-capture"
  }
}

variables {
  # Alerts notify someone (check.alert_targets; monitoring.tftest.hcl
  # tests the warning without a target).
  alert_action_group_ids = ["/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ops/providers/Microsoft.Insights/actionGroups/ag-ops"]
  location               = "westeurope"
  name_suffix            = "t01"
  kafka_brokers          = ["broker-0.kafka.example.com:9093", "broker-1.kafka.example.com:9093"]
  kafka_sasl_username    = "mirror-user"
  kafka_sasl_password    = "s3cr3t-Pa55word-do-not-leak"
  # The deployers (Key Vault, package and Capture roles), independent of
  # the caller (the mock client config's object ID ends in "de").
  deployer_object_ids = ["00000000-0000-0000-0000-0000000000de"]
}

run "event_hubs_default_to_one_day_retention" {
  assert {
    condition     = sort(keys(azurerm_eventhub.this)) == tolist(["prod.test1", "prod.test2", "prod.test3", "prod.test4", "prod.test5"])
    error_message = "The default hubs must be prod.test1 .. prod.test5."
  }

  assert {
    condition     = alltrue([for hub in azurerm_eventhub.this : hub.message_retention == 1])
    error_message = "Every hub must keep messages for 1 day by default."
  }

  assert {
    condition     = alltrue([for hub in azurerm_eventhub.this : hub.partition_count == 4])
    error_message = "Every hub must have 4 partitions by default."
  }

  assert {
    condition     = alltrue([for name, hub in azurerm_eventhub.this : hub.name == name && hub.namespace_id == azurerm_eventhub_namespace.this.id])
    error_message = "Every hub must be named after its key and live in the mirror's namespace."
  }

  assert {
    condition     = length(azurerm_eventhub_consumer_group.this) == 0
    error_message = "No extra consumer groups are created by default."
  }
}

run "capture_is_enabled_on_every_hub" {
  assert {
    condition = alltrue([
      for hub in azurerm_eventhub.this :
      length(hub.capture_description) == 1 && hub.capture_description[0].enabled && hub.capture_description[0].encoding == "Avro"
    ])
    error_message = "Capture (Avro) must be enabled on every hub."
  }

  assert {
    condition = alltrue([
      for hub in azurerm_eventhub.this :
      hub.capture_description[0].destination[0].blob_container_name == azurerm_storage_container.capture.name &&
      hub.capture_description[0].destination[0].storage_account_id == azurerm_storage_account.capture.id &&
      hub.capture_description[0].destination[0].name == "EventHubArchive.AzureBlockBlob"
    ])
    error_message = "Every hub's Capture must point at the capture container of the capture storage account."
  }

  assert {
    condition     = azurerm_storage_container.capture.name == "capture" && azurerm_storage_container.capture.storage_account_id == azurerm_storage_account.capture.id
    error_message = "The capture container must be named \"capture\" and live in the capture storage account."
  }

  assert {
    condition = alltrue([
      for hub in azurerm_eventhub.this :
      hub.capture_description[0].destination[0].archive_name_format == "{Namespace}/{EventHub}/{PartitionId}/{Year}/{Month}/{Day}/{Hour}/{Minute}/{Second}"
    ])
    error_message = "Capture must use the archive name format with all nine tokens."
  }

  assert {
    condition = alltrue([
      for hub in azurerm_eventhub.this :
      hub.capture_description[0].interval_in_seconds == 300 && hub.capture_description[0].size_limit_in_bytes == 314572800 && hub.capture_description[0].skip_empty_archives
    ])
    error_message = "Capture windows must default to 300 s / 300 MiB and skip empty archives."
  }

  assert {
    condition     = alltrue([for hub in azurerm_eventhub.this : hub.capture_description[0].destination[0].storage_authentication_type == "SystemAssigned"])
    error_message = "Capture must authenticate to storage with the namespace's system-assigned identity, not SAS."
  }

  assert {
    condition = (
      azurerm_role_assignment.namespace_capture_blob.scope == azurerm_storage_account.capture.id &&
      azurerm_role_assignment.namespace_capture_blob.role_definition_name == "Storage Blob Data Contributor" &&
      azurerm_role_assignment.namespace_capture_blob.principal_id == "00000000-0000-0000-0000-0000000000e1"
    )
    error_message = "The namespace identity must hold Storage Blob Data Contributor on the capture storage account."
  }

  assert {
    condition     = azurerm_storage_account.capture.account_tier == "Standard" && !azurerm_storage_account.capture.allow_nested_items_to_be_public
    error_message = "Capture storage must be Standard tier (Premium is unsupported) and private."
  }
}

run "namespace_is_standard_tls12_without_keys" {
  assert {
    condition     = azurerm_eventhub_namespace.this.sku == "Standard" && azurerm_eventhub_namespace.this.capacity == 1
    error_message = "The namespace must default to Standard with 1 throughput unit."
  }

  assert {
    condition     = azurerm_eventhub_namespace.this.minimum_tls_version == "1.2"
    error_message = "The namespace must require TLS 1.2."
  }

  assert {
    condition     = !azurerm_eventhub_namespace.this.local_authentication_enabled
    error_message = "SAS (local) authentication must be off by default: everything uses managed identities."
  }

  assert {
    condition     = !azurerm_eventhub_namespace.this.auto_inflate_enabled && azurerm_eventhub_namespace.this.maximum_throughput_units == null
    error_message = "Auto-inflate must be off by default, without a maximum."
  }

  assert {
    condition     = azurerm_eventhub_namespace.this.identity[0].type == "SystemAssigned"
    error_message = "The namespace needs a system-assigned identity for Capture."
  }

  assert {
    condition     = azurerm_eventhub_namespace.this.name == "evhns-ehmirror-prod-t01"
    error_message = "Namespace name must follow evhns-<prefix>-<env>-<suffix>."
  }
}

run "function_app_may_only_send" {
  assert {
    condition = (
      azurerm_linux_function_app.this[0].identity[0].type == "UserAssigned" &&
      tolist(azurerm_linux_function_app.this[0].identity[0].identity_ids) == tolist([azurerm_user_assigned_identity.function_app.id])
    )
    error_message = "The function app must run with the module's user-assigned identity (created, with its roles, before the app)."
  }

  assert {
    condition     = azurerm_linux_function_app.this[0].key_vault_reference_identity_id == azurerm_user_assigned_identity.function_app.id
    error_message = "Key Vault references must be resolved with the user-assigned identity (key_vault_reference_identity_id)."
  }

  assert {
    condition     = alltrue([for ra in azurerm_role_assignment.function_app : ra.principal_id == azurerm_user_assigned_identity.function_app.principal_id])
    error_message = "The app's roles must be granted to its user-assigned identity."
  }

  assert {
    condition     = output.function_app_principal_id == "00000000-0000-0000-0000-0000000000f1" && output.function_app_identity_client_id == "00000000-0000-0000-0000-0000000000c2"
    error_message = "The identity outputs must name the app's user-assigned identity."
  }

  assert {
    condition = (
      azurerm_role_assignment.function_app["eventhubs_sender"].role_definition_name == "Azure Event Hubs Data Sender" &&
      azurerm_role_assignment.function_app["eventhubs_sender"].scope == azurerm_eventhub_namespace.this.id &&
      azurerm_role_assignment.function_app["eventhubs_sender"].principal_id == "00000000-0000-0000-0000-0000000000f1"
    )
    error_message = "Azure Event Hubs Data Sender must be assigned on the namespace to the function app's principal."
  }

  # All roles of the app's principal, across every role assignment in the
  # configuration: exactly Data Sender on the namespace, Key Vault Secrets
  # User on the vault (needed for the Key Vault references) and the
  # Functions host's roles on the app's own storage - nothing broader.
  assert {
    condition = toset([
      for ra in concat(
        values(azurerm_role_assignment.function_app),
        [azurerm_role_assignment.namespace_capture_blob],
        values(azurerm_role_assignment.deployer_capture_blob),
        values(azurerm_role_assignment.deployer_key_vault_secrets),
        values(azurerm_role_assignment.deployer_packages),
      ) : "${ra.role_definition_name}@${ra.scope}" if ra.principal_id == "00000000-0000-0000-0000-0000000000f1"
      ]) == toset([
      "Azure Event Hubs Data Sender@${azurerm_eventhub_namespace.this.id}",
      "Key Vault Secrets User@${azurerm_key_vault.this.id}",
      "Storage Blob Data Owner@${azurerm_storage_account.function.id}",
      "Storage Queue Data Contributor@${azurerm_storage_account.function.id}",
      "Storage Table Data Contributor@${azurerm_storage_account.function.id}",
    ])
    error_message = "The function app's principal must hold exactly Data Sender on the namespace, Key Vault Secrets User on the vault and the host's storage roles on its own storage account."
  }

  assert {
    condition     = alltrue([for ra in azurerm_role_assignment.function_app : ra.principal_type == "ServicePrincipal"])
    error_message = "The function app's role assignments must be typed ServicePrincipal (no AAD replication race)."
  }

  assert {
    condition = alltrue([
      for ra in azurerm_role_assignment.function_app :
      !contains(["Owner", "Contributor", "Azure Event Hubs Data Owner", "Azure Event Hubs Data Receiver", "Key Vault Secrets Officer", "Key Vault Administrator"], ra.role_definition_name)
    ])
    error_message = "The function app must hold no Owner/Contributor/Data Owner/Receiver/vault-admin role."
  }

  assert {
    condition = (
      azurerm_role_assignment.deployer_capture_blob["00000000-0000-0000-0000-0000000000de"].principal_id == "00000000-0000-0000-0000-0000000000de" &&
      azurerm_role_assignment.deployer_key_vault_secrets["00000000-0000-0000-0000-0000000000de"].principal_id == "00000000-0000-0000-0000-0000000000de" &&
      azurerm_role_assignment.deployer_key_vault_secrets["00000000-0000-0000-0000-0000000000de"].role_definition_name == "Key Vault Secrets Officer" &&
      azurerm_role_assignment.deployer_key_vault_secrets["00000000-0000-0000-0000-0000000000de"].scope == azurerm_key_vault.this.id &&
      azurerm_role_assignment.deployer_packages["00000000-0000-0000-0000-0000000000de"].role_definition_name == "Storage Blob Data Contributor" &&
      azurerm_role_assignment.deployer_packages["00000000-0000-0000-0000-0000000000de"].scope == azurerm_storage_container.packages.id
    )
    error_message = "The deployer (not the app) gets the write roles it needs for Capture, the secrets and the package."
  }
}

run "function_app_runs_the_custom_handler_on_ep1" {
  assert {
    condition     = azurerm_service_plan.this.sku_name == "EP1" && azurerm_service_plan.this.os_type == "Linux"
    error_message = "The plan must be Linux Elastic Premium EP1."
  }

  assert {
    condition     = azurerm_service_plan.this.maximum_elastic_worker_count == 3
    error_message = "The plan's maximum burst must come from function_maximum_elastic_worker_count (default 3)."
  }

  assert {
    condition     = azurerm_linux_function_app.this[0].service_plan_id == azurerm_service_plan.this.id
    error_message = "The function app must run on the Elastic Premium plan."
  }

  assert {
    condition     = azurerm_linux_function_app.this[0].site_config[0].application_stack[0].use_custom_runtime
    error_message = "The function app must use the custom runtime (Go custom handler)."
  }

  assert {
    condition     = azurerm_linux_function_app.this[0].https_only && azurerm_linux_function_app.this[0].site_config[0].minimum_tls_version == "1.2" && azurerm_linux_function_app.this[0].site_config[0].ftps_state == "Disabled"
    error_message = "The function app must be HTTPS-only with TLS 1.2 and no FTP."
  }

  assert {
    condition     = !azurerm_linux_function_app.this[0].builtin_logging_enabled && !contains(keys(azurerm_linux_function_app.this[0].app_settings), "AzureWebJobsDashboard")
    error_message = "Built-in logging (the legacy AzureWebJobsDashboard setting) must be off; logs go to Application Insights."
  }

  assert {
    condition     = azurerm_linux_function_app.this[0].functions_extension_version == "~4"
    error_message = "The function app must run Functions runtime ~4."
  }

  assert {
    condition = (
      azurerm_linux_function_app.this[0].storage_account_name == azurerm_storage_account.function.name &&
      azurerm_linux_function_app.this[0].storage_uses_managed_identity &&
      azurerm_linux_function_app.this[0].storage_account_access_key == null &&
      azurerm_storage_account.function.name != azurerm_storage_account.capture.name
    )
    error_message = "AzureWebJobsStorage must be the function app's own storage account, not the capture account."
  }

  assert {
    condition     = azurerm_linux_function_app.this[0].virtual_network_subnet_id == null && !azurerm_linux_function_app.this[0].site_config[0].vnet_route_all_enabled
    error_message = "VNet integration must be off by default."
  }
}

# Issue 24, item 8: no publishing credentials (basic authentication) for
# FTP or the SCM site; scripts/deploy.sh deploys with an Entra ID token.
run "function_app_has_no_basic_auth_publishing" {
  assert {
    condition     = azurerm_linux_function_app.this[0].ftp_publish_basic_authentication_enabled == false && azurerm_linux_function_app.this[0].webdeploy_publish_basic_authentication_enabled == false
    error_message = "FTP and SCM/WebDeploy basic authentication must be off."
  }
}

# Issue 24, item 3: a new app's timer starts disabled; scripts/deploy.sh
# enables it once /api/status shows the roles took effect.
run "timer_starts_disabled_until_deploy_enables_it" {
  assert {
    condition     = azurerm_linux_function_app.this[0].app_settings["AzureWebJobs.MirrorTimer.Disabled"] == "true"
    error_message = "A new app must start with AzureWebJobs.MirrorTimer.Disabled = true (scripts/deploy.sh enables the timer when the app is ready)."
  }
}

run "app_settings_wire_every_handler_setting" {
  assert {
    condition = alltrue([
      for k in [
        "KAFKA_BROKERS", "KAFKA_GROUP", "KAFKA_TOPICS_INCLUDE", "KAFKA_TOPICS_EXCLUDE", "KAFKA_SASL_MECHANISM",
        "KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD", "KAFKA_TLS", "KAFKA_TLS_INSECURE_SKIP_VERIFY", "KAFKA_START_OFFSET",
        "KAFKA_SESSION_TIMEOUT", "EVENTHUBS__fullyQualifiedNamespace", "EVENTHUBS__clientId",
        "MIRROR_SCHEDULE", "MIRROR_MAX_RECORDS", "MIRROR_MAX_BYTES", "MIRROR_MAX_DURATION", "MIRROR_PARTITIONING",
        "MIRROR_INFLIGHT_BYTES", "MIRROR_ROUTES", "MIRROR_GAP_POLICY", "MIRROR_OVERSIZE_POLICY", "MIRROR_CATCHUP_MAX_DURATION",
        "MIRROR_DEDUPLICATE", "MIRROR_FOLLOW", "MIRROR_MAX_BACKLOG_AGE", "MIRROR_MAX_PAUSE_AGE", "KAFKA_TLS_CERT_WARN_DAYS",
      ] : contains(keys(azurerm_linux_function_app.this[0].app_settings), k)
    ])
    error_message = "Every setting the handler reads must be an app setting (the optional ones, e.g. CUTOVER_*, only when set: settings.tftest.hcl; faults/terraform_settings_test.go checks config.Names())."
  }

  assert {
    condition = (
      azurerm_linux_function_app.this[0].app_settings["KAFKA_BROKERS"] == "broker-0.kafka.example.com:9093,broker-1.kafka.example.com:9093" &&
      azurerm_linux_function_app.this[0].app_settings["KAFKA_GROUP"] == "ehmirror" &&
      azurerm_linux_function_app.this[0].app_settings["KAFKA_TOPICS_INCLUDE"] == "^prod\\..*" &&
      azurerm_linux_function_app.this[0].app_settings["KAFKA_TOPICS_EXCLUDE"] == "" &&
      azurerm_linux_function_app.this[0].app_settings["KAFKA_SASL_MECHANISM"] == "scram-sha-512" &&
      azurerm_linux_function_app.this[0].app_settings["KAFKA_TLS"] == "true" &&
      azurerm_linux_function_app.this[0].app_settings["KAFKA_TLS_INSECURE_SKIP_VERIFY"] == "false" &&
      azurerm_linux_function_app.this[0].app_settings["KAFKA_START_OFFSET"] == "earliest" &&
      azurerm_linux_function_app.this[0].app_settings["KAFKA_SESSION_TIMEOUT"] == "30s"
    )
    error_message = "Kafka settings must carry the variables' defaults."
  }

  assert {
    condition = (
      azurerm_linux_function_app.this[0].app_settings["MIRROR_SCHEDULE"] == "0 */1 * * * *" &&
      azurerm_linux_function_app.this[0].app_settings["MIRROR_MAX_DURATION"] == "4m" &&
      azurerm_linux_function_app.this[0].app_settings["MIRROR_MAX_RECORDS"] == "1000000" &&
      azurerm_linux_function_app.this[0].app_settings["MIRROR_MAX_BYTES"] == "536870912" &&
      azurerm_linux_function_app.this[0].app_settings["MIRROR_INFLIGHT_BYTES"] == "67108864" &&
      azurerm_linux_function_app.this[0].app_settings["MIRROR_CATCHUP_MAX_DURATION"] == "10m" &&
      azurerm_linux_function_app.this[0].app_settings["MIRROR_PARTITIONING"] == "hash" &&
      azurerm_linux_function_app.this[0].app_settings["MIRROR_ROUTES"] == "" &&
      azurerm_linux_function_app.this[0].app_settings["MIRROR_GAP_POLICY"] == "fail" &&
      azurerm_linux_function_app.this[0].app_settings["MIRROR_OVERSIZE_POLICY"] == "fail"
    )
    error_message = "Mirror settings must carry the variables' defaults."
  }

  assert {
    condition     = azurerm_linux_function_app.this[0].app_settings["EVENTHUBS__fullyQualifiedNamespace"] == "evhns-ehmirror-prod-t01.servicebus.windows.net" && azurerm_linux_function_app.this[0].app_settings["EVENTHUBS__clientId"] == "00000000-0000-0000-0000-0000000000c2"
    error_message = "Event Hubs must be reached through the identity-based EVENTHUBS__fullyQualifiedNamespace convention with the client ID of the identity attached to the app."
  }

  assert {
    condition = alltrue([
      for k, v in azurerm_linux_function_app.this[0].app_settings :
      !strcontains(v, "SharedAccessKey") && !strcontains(v, "Endpoint=sb://") && (!can(regex("(?i)connectionstring", k)) || startswith(v, "@Microsoft.KeyVault("))
    ])
    error_message = "No Event Hubs key or connection string may appear in the app settings (a connection string setting must be a Key Vault reference)."
  }

  assert {
    condition     = !contains(keys(azurerm_linux_function_app.this[0].app_settings), "FUNCTIONS_WORKER_RUNTIME")
    error_message = "FUNCTIONS_WORKER_RUNTIME must not be in app_settings (use_custom_runtime sets it)."
  }

  assert {
    condition     = azurerm_linux_function_app.this[0].site_config[0].application_insights_connection_string == azurerm_application_insights.this.connection_string
    error_message = "Application Insights must be connected to the function app."
  }
}

run "kafka_secrets_are_key_vault_references_only" {
  assert {
    condition = alltrue([
      for k in ["KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD"] :
      startswith(azurerm_linux_function_app.this[0].app_settings[k], "@Microsoft.KeyVault(")
    ])
    error_message = "Kafka credentials must be Key Vault references (@Microsoft.KeyVault(...)) in the app settings."
  }

  assert {
    condition = alltrue([
      for k in ["KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD"] :
      azurerm_linux_function_app.this[0].app_settings[k] == "@Microsoft.KeyVault(SecretUri=${azurerm_key_vault_secret.kafka[k].versionless_id}/)"
    ])
    error_message = "Each Kafka credential setting must reference its own Key Vault secret without a version (\"<versionless id>/\"), so that rotation is picked up."
  }

  assert {
    condition     = alltrue([for v in values(azurerm_linux_function_app.this[0].app_settings) : !startswith(v, "@Microsoft.KeyVault(") || can(regex("^@Microsoft\\.KeyVault\\(SecretUri=https://[^/]+/secrets/[^/]+/\\)$", v))])
    error_message = "Every Key Vault reference must name a secret without a version (\"…/secrets/<name>/\"), so that rotation is picked up."
  }

  assert {
    condition     = alltrue([for v in values(azurerm_linux_function_app.this[0].app_settings) : !strcontains(v, "s3cr3t-Pa55word-do-not-leak") && v != "mirror-user"])
    error_message = "No Kafka secret may appear as a plain app setting value."
  }

  assert {
    condition     = !contains(keys(azurerm_linux_function_app.this[0].app_settings), "KAFKA_TLS_CA_PEM") && !contains(keys(azurerm_key_vault_secret.kafka), "KAFKA_TLS_CA_PEM")
    error_message = "Without a CA PEM there is no KAFKA_TLS_CA_PEM secret or setting (system roots)."
  }

  assert {
    condition = (
      azurerm_key_vault_secret.kafka["KAFKA_SASL_USERNAME"].name == "kafka-sasl-username" &&
      azurerm_key_vault_secret.kafka["KAFKA_SASL_PASSWORD"].name == "kafka-sasl-password" &&
      alltrue([for s in azurerm_key_vault_secret.kafka : s.value == null && s.value_wo_version == 1]) &&
      alltrue([for s in azurerm_key_vault_secret.kafka : s.key_vault_id == azurerm_key_vault.this.id])
    )
    error_message = "The Kafka credentials must be stored as write-only secrets (value_wo: never in the state) in the mirror's Key Vault, written again when key_vault_secrets_version changes."
  }

  assert {
    condition     = azurerm_key_vault.this.rbac_authorization_enabled && azurerm_key_vault.this.tenant_id == "00000000-0000-0000-0000-0000000000aa"
    error_message = "The Key Vault must use Azure RBAC (the app gets Key Vault Secrets User)."
  }
}

run "monitoring_and_outputs" {
  assert {
    condition     = azurerm_application_insights.this.workspace_id == azurerm_log_analytics_workspace.this.id
    error_message = "Application Insights must be workspace-based."
  }

  assert {
    condition     = output.eventhubs_namespace_fqdn == "evhns-ehmirror-prod-t01.servicebus.windows.net"
    error_message = "eventhubs_namespace_fqdn output is wrong."
  }

  assert {
    condition     = output.event_hub_names == tolist(["prod.test1", "prod.test2", "prod.test3", "prod.test4", "prod.test5"])
    error_message = "event_hub_names output is wrong."
  }

  assert {
    condition     = output.function_app_name == "func-ehmirror-prod-t01" && output.function_app_default_hostname == "func-ehmirror-test.azurewebsites.net"
    error_message = "function app outputs are wrong."
  }

  assert {
    condition     = output.capture_container_name == "capture" && output.resource_group_name == "rg-ehmirror-prod"
    error_message = "capture container / resource group outputs are wrong."
  }

  assert {
    condition = (
      azurerm_storage_account.capture.name == "stcehmirrorprodt01" &&
      azurerm_storage_account.function.name == "stfehmirrorprodt01" &&
      azurerm_key_vault.this.name == "kv-ehmirrorprod-t01"
    )
    error_message = "Globally unique names must follow the prefix/environment/suffix scheme."
  }

  assert {
    condition     = azurerm_eventhub_namespace.this.tags["managed-by"] == "terraform" && azurerm_linux_function_app.this[0].tags["environment"] == "prod"
    error_message = "Resources must carry the standard tags."
  }

  # Issue 24, item 9: the addresses a Kafka firewall must allow.
  assert {
    condition     = alltrue([for ip in azurerm_linux_function_app.this[0].possible_outbound_ip_address_list : contains(output.function_app_possible_outbound_ip_addresses, ip)])
    error_message = "The app's possible outbound IP addresses must be an output (Kafka allowlists)."
  }
}

# Role assignments take minutes to propagate and the provider does not retry
# a 403: each use of a new role waits (the dependencies themselves are checked
# by faults/TestTerraformRolesPropagateBeforeUse).
run "role_assignments_propagate_before_use" {
  assert {
    condition = (
      time_sleep.deployer_key_vault_secrets.create_duration == "120s" &&
      time_sleep.capture_roles.create_duration == "120s" &&
      time_sleep.function_app_roles.create_duration == "120s"
    )
    error_message = "Every wait for role propagation must last role_propagation_wait (default 120s)."
  }

  assert {
    condition     = time_sleep.deployer_key_vault_secrets.triggers["role_assignment_ids"] == azurerm_role_assignment.deployer_key_vault_secrets["00000000-0000-0000-0000-0000000000de"].id
    error_message = "The secrets' wait must follow the deployer's Key Vault Secrets Officer assignment."
  }

  assert {
    condition     = time_sleep.capture_roles.triggers["role_assignment_ids"] == "${azurerm_role_assignment.namespace_capture_blob.id},${azurerm_role_assignment.deployer_capture_blob["00000000-0000-0000-0000-0000000000de"].id}"
    error_message = "Capture's wait must follow both Storage Blob Data Contributor assignments (namespace and deployer)."
  }

  assert {
    condition     = time_sleep.function_app_roles.triggers == tomap({ for k, ra in azurerm_role_assignment.function_app : k => ra.id })
    error_message = "The app's wait must follow every role of its identity."
  }
}

# Issue 44, item 5: the deployers' roles follow deployer_object_ids, not the
# principal that runs this plan. A person deploys first, then the pipeline's
# service principal runs the plan: both already hold their roles, and the
# pipeline's run changes none of them.
run "deployer_roles_follow_the_variable_not_the_caller" {
  override_data {
    target = data.azurerm_client_config.current
    values = {
      object_id       = "00000000-0000-0000-0000-0000000000b2" # the pipeline
      tenant_id       = "00000000-0000-0000-0000-0000000000aa"
      subscription_id = "00000000-0000-0000-0000-000000000005"
    }
  }

  variables {
    deployer_object_ids = ["00000000-0000-0000-0000-0000000000a1", "00000000-0000-0000-0000-0000000000b2"]
  }

  assert {
    condition = (
      keys(azurerm_role_assignment.deployer_key_vault_secrets) == ["00000000-0000-0000-0000-0000000000a1", "00000000-0000-0000-0000-0000000000b2"] &&
      keys(azurerm_role_assignment.deployer_packages) == ["00000000-0000-0000-0000-0000000000a1", "00000000-0000-0000-0000-0000000000b2"] &&
      keys(azurerm_role_assignment.deployer_capture_blob) == ["00000000-0000-0000-0000-0000000000a1", "00000000-0000-0000-0000-0000000000b2"] &&
      alltrue([for id, ra in azurerm_role_assignment.deployer_key_vault_secrets : ra.principal_id == id])
    )
    error_message = "Every principal of deployer_object_ids, and no other, must hold the deployer's roles (Key Vault Secrets Officer, the package container, Capture)."
  }
}

run "deployers_are_required" {
  command = plan

  variables {
    deployer_object_ids = []
  }

  expect_failures = [var.deployer_object_ids]
}
