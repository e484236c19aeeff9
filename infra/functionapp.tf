# Storage of the function app itself: AzureWebJobsStorage (host keys, timer
# schedule status, the timer's singleton lock) and the function package,
# both through the app's identity (storage.tf): no content share, no key.
resource "azurerm_storage_account" "function" {
  name                     = local.names.function_storage_account
  resource_group_name      = local.resource_group.name
  location                 = var.location
  account_kind             = "StorageV2"
  account_tier             = "Standard"
  account_replication_type = var.function_storage_replication_type

  min_tls_version                 = "TLS1_2"
  https_traffic_only_enabled      = true
  allow_nested_items_to_be_public = false

  # Nothing uses the account key: the host and the package read through
  # the app's identity, deploy.sh uploads with Entra ID (storage.tf).
  shared_access_key_enabled = false

  # Private networking (network.tf): no public access but trusted services
  # and the given IP ranges; the app reaches it through private endpoints.
  dynamic "network_rules" {
    for_each = local.public_network_rules
    content {
      default_action = network_rules.value.default_action
      bypass         = network_rules.value.bypass
      ip_rules       = network_rules.value.ip_rules
    }
  }

  tags = local.tags
}

resource "azurerm_service_plan" "this" {
  name                         = local.names.service_plan
  resource_group_name          = local.resource_group.name
  location                     = var.location
  os_type                      = "Linux"
  sku_name                     = var.function_plan_sku
  maximum_elastic_worker_count = var.function_maximum_elastic_worker_count

  tags = local.tags
}

locals {
  # Every setting the handler reads (faults/terraform_settings_test.go
  # checks config.Names()), but EVENTHUBS: a connection string, where the
  # app uses its identity. Secrets appear only as Key Vault references; FUNCTIONS_WORKER_RUNTIME comes from use_custom_runtime and
  # AzureWebJobsStorage__accountName from storage_account_name with
  # storage_uses_managed_identity (storage.tf adds its identity settings and
  # the package's). A reference
  # without a version ("<versionless id>/") follows rotation: the platform
  # picks up a new secret version within a day, or at the next restart.
  kafka_secret_references = {
    for setting, secret in azurerm_key_vault_secret.kafka :
    setting => "@Microsoft.KeyVault(SecretUri=${secret.versionless_id}/)"
  }

  # The prebuilt package runs from its blob (storage.tf), no remote (Oryx)
  # build.
  #
  # The timer starts disabled on a new app: scripts/deploy.sh enables it once
  # /api/status shows that the app reads Kafka and sends to the hubs (role
  # assignments can take up to 30 minutes to take effect). Terraform ignores
  # later changes to it (lifecycle below), and an existing app keeps its
  # timer running.
  platform_app_settings = {
    SCM_DO_BUILD_DURING_DEPLOYMENT = "false"

    "AzureWebJobs.MirrorTimer.Disabled" = "true"
  }

  handler_app_settings = merge(
    {
      KAFKA_BROKERS        = join(",", var.kafka_brokers)
      KAFKA_GROUP          = var.kafka_group
      KAFKA_TOPICS_INCLUDE = var.kafka_topics_include
      KAFKA_TOPICS_EXCLUDE = var.kafka_topics_exclude
      KAFKA_SASL_MECHANISM = var.kafka_sasl_mechanism
      KAFKA_TLS            = tostring(var.kafka_tls)

      KAFKA_TLS_INSECURE_SKIP_VERIFY = tostring(var.kafka_tls_insecure_skip_verify)
      KAFKA_START_OFFSET             = var.kafka_start_offset
      KAFKA_SESSION_TIMEOUT          = "${var.kafka_session_timeout_seconds}s"
      KAFKA_TLS_CERT_WARN_DAYS       = tostring(var.kafka_tls_cert_warn_days)

      # Identity-based connection "EVENTHUBS": no key, no connection string.
      EVENTHUBS__fullyQualifiedNamespace = local.eventhubs_fqdn
      EVENTHUBS__clientId                = azurerm_user_assigned_identity.function_app.client_id

      MIRROR_SCHEDULE        = var.mirror_schedule
      MIRROR_MAX_RECORDS     = tostring(var.mirror_max_records)
      MIRROR_MAX_BYTES       = tostring(var.mirror_max_bytes)
      MIRROR_MAX_DURATION    = var.mirror_max_duration
      MIRROR_INFLIGHT_BYTES  = tostring(var.mirror_inflight_bytes)
      MIRROR_PARTITIONING    = var.mirror_partitioning
      MIRROR_ROUTES          = var.mirror_routes
      MIRROR_GAP_POLICY      = var.mirror_gap_policy
      MIRROR_OVERSIZE_POLICY = var.mirror_oversize_policy

      MIRROR_CATCHUP_MAX_DURATION = var.mirror_catchup_max_duration
      MIRROR_DEDUPLICATE          = tostring(var.mirror_deduplicate)
      MIRROR_FOLLOW               = tostring(var.mirror_follow)
      MIRROR_MAX_BACKLOG_AGE      = var.mirror_max_backlog_age
      MIRROR_MAX_PAUSE_AGE        = var.mirror_max_pause_age
    },
    # KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD, KAFKA_TLS_CA_PEM
    local.kafka_secret_references,
    # KAFKA_TLS_CERT_PEM, KAFKA_TLS_KEY_PEM, KAFKA_TLS_KEY_PASSWORD (kafka_tls.tf)
    local.kafka_tls_client_secret_references,
    # OAUTHBEARER / AWS_MSK_IAM settings and secret references (kafka_sasl.tf)
    local.kafka_sasl_token_app_settings,
    # CUTOVER_STORAGE__blobServiceUri, CUTOVER_CONTAINER, CUTOVER_STORAGE (cutover.tf)
    local.cutover_app_settings,
    # MIRROR_HTTP_DEADLINE only when set: otherwise each route keeps its own deadline.
    var.mirror_http_deadline != null ? { MIRROR_HTTP_DEADLINE = var.mirror_http_deadline } : {},
  )
}

# var.instances apps (default 1) on one plan and one Kafka consumer group:
# the group spreads the partitions over their drains, and each app's timer
# is a singleton of its own (instances.tf).
resource "azurerm_linux_function_app" "this" {
  count = var.instances

  name                = local.function_app_names[count.index]
  resource_group_name = local.resource_group.name
  location            = var.location
  service_plan_id     = azurerm_service_plan.this.id

  # AzureWebJobsStorage through the app's identity (no account key): the
  # provider writes AzureWebJobsStorage__accountName, storage.tf the
  # credential and client ID.
  storage_account_name          = azurerm_storage_account.function.name
  storage_uses_managed_identity = true

  # No Azure Files content share: the app runs its package from a blob
  # (storage.tf). The provider adds no WEBSITE_CONTENT* setting with an
  # identity; this says so for every later version too.
  content_share_force_disabled = true

  functions_extension_version = "~4"
  https_only                  = true

  # No basic authentication (publishing credentials) at all: scripts/deploy.sh
  # uploads the package to its blob with Entra ID; FTP and SCM are not used.
  ftp_publish_basic_authentication_enabled       = false
  webdeploy_publish_basic_authentication_enabled = false

  virtual_network_subnet_id = var.vnet_integration_subnet_id

  # One user-assigned identity, created (with its roles, see below) before
  # the app: Key Vault references resolve on the app's first start, and
  # EVENTHUBS__clientId names the same identity for Event Hubs.
  identity {
    type         = "UserAssigned"
    identity_ids = [azurerm_user_assigned_identity.function_app.id]
  }
  key_vault_reference_identity_id = azurerm_user_assigned_identity.function_app.id

  # Off: the legacy AzureWebJobsDashboard setting; logs go to Application
  # Insights only.
  builtin_logging_enabled = false

  site_config {
    application_stack {
      use_custom_runtime = true
    }

    minimum_tls_version                    = "1.2"
    scm_minimum_tls_version                = "1.2"
    ftps_state                             = "Disabled"
    http2_enabled                          = true
    vnet_route_all_enabled                 = var.vnet_integration_subnet_id != null && var.vnet_route_all_enabled
    application_insights_connection_string = azurerm_application_insights.this.connection_string
  }

  app_settings = merge(
    var.additional_app_settings,
    local.platform_app_settings,
    local.handler_app_settings,
    local.host_storage_app_settings,
    local.per_instance_app_settings[count.index],
  )

  tags = local.tags

  # The identity's roles exist, and had time to propagate, before the app
  # starts and resolves its Key Vault references. With private endpoints,
  # the app starts only once they and the DNS links that resolve them
  # exist, so that its first start reaches the vault, its storage and the
  # namespace privately (network.tf).
  depends_on = [
    time_sleep.function_app_roles,
    azurerm_private_endpoint.this,
    azurerm_private_dns_zone_virtual_network_link.this,
  ]

  lifecycle {
    # Set by scripts/deploy.sh once the app is ready (see platform_app_settings).
    ignore_changes = [app_settings["AzureWebJobs.MirrorTimer.Disabled"]]

    precondition {
      condition     = var.kafka_tls || nonsensitive(var.kafka_tls_ca_pem == null)
      error_message = "kafka_tls_ca_pem is set but kafka_tls is false; the handler uses the CA only over TLS."
    }
    precondition {
      condition     = length(distinct(local.function_host_ids)) == var.instances
      error_message = "Two function apps would share a Functions host ID (the first 32 characters of the name): shorten name_prefix, environment or name_suffix."
    }
  }
}

# The function app's identity. It is a resource of its own so that its roles
# can be granted before the app exists (a system-assigned identity exists only
# once the app does, and the app would first start with Key Vault references
# it may not read yet).
resource "azurerm_user_assigned_identity" "function_app" {
  name                = local.names.function_identity
  resource_group_name = local.resource_group.name
  location            = var.location

  tags = local.tags
}

# Every role the function app's identity holds, and nothing broader:
# send to the namespace's hubs (no Listen, no Manage, no SAS keys), read
# the secrets behind its Key Vault references, and the host's own storage
# (storage.tf). Every app of var.instances shares this identity.
resource "azurerm_role_assignment" "function_app" {
  for_each = {
    eventhubs_sender = {
      scope       = azurerm_eventhub_namespace.this.id
      role        = "Azure Event Hubs Data Sender"
      description = "ehmirror function app sends mirrored records to the hubs of this namespace."
    }
    key_vault_secrets = {
      scope       = azurerm_key_vault.this.id
      role        = "Key Vault Secrets User"
      description = "ehmirror function app resolves the Key Vault references of its Kafka credentials."
    }
    # The Functions host's storage with an identity (AzureWebJobsStorage__*),
    # on the app's own account only: blobs for host keys, the timer's
    # schedule status and its singleton lock (blob leases), created
    # containers, and reading the package (WEBSITE_RUN_FROM_PACKAGE); queues
    # for the host's internal queues; tables for its diagnostic events.
    host_storage_blob = {
      scope       = azurerm_storage_account.function.id
      role        = "Storage Blob Data Owner"
      description = "ehmirror function app host: keys, timer schedule status and singleton locks (AzureWebJobsStorage)."
    }
    host_storage_queue = {
      scope       = azurerm_storage_account.function.id
      role        = "Storage Queue Data Contributor"
      description = "ehmirror function app host: internal queues (AzureWebJobsStorage)."
    }
    host_storage_table = {
      scope       = azurerm_storage_account.function.id
      role        = "Storage Table Data Contributor"
      description = "ehmirror function app host: diagnostic events table (AzureWebJobsStorage)."
    }
  }

  scope                = each.value.scope
  role_definition_name = each.value.role
  principal_id         = azurerm_user_assigned_identity.function_app.principal_id
  principal_type       = "ServicePrincipal"
  description          = each.value.description
}

# Only with MIRROR_DEDUPLICATE on: read events back after an unclean end
# (Listen), so that no record is published twice. Off, the app cannot read.
resource "azurerm_role_assignment" "function_app_receiver" {
  count = var.mirror_deduplicate ? 1 : 0

  scope                = azurerm_eventhub_namespace.this.id
  role_definition_name = "Azure Event Hubs Data Receiver"
  principal_id         = azurerm_user_assigned_identity.function_app.principal_id
  principal_type       = "ServicePrincipal"
  description          = "ehmirror function app reads mirrored events back to skip records already published (MIRROR_DEDUPLICATE)."
}

# Azure RBAC is eventually consistent: a new assignment can take minutes to
# take effect. The app starts only after this wait.
resource "time_sleep" "function_app_roles" {
  create_duration = var.role_propagation_wait

  triggers = merge(
    { for name, ra in azurerm_role_assignment.function_app : name => ra.id },
    { for ra in azurerm_role_assignment.function_app_receiver : "eventhubs_receiver" => ra.id },
  )
}
