data "azurerm_client_config" "current" {}

locals {
  # --- naming ----------------------------------------------------------------
  # <prefix>-<environment> for names that only need to be unique in the
  # resource group; globally unique names also carry the suffix.
  base = "${var.name_prefix}-${var.environment}"

  resource_group_name = coalesce(var.existing_resource_group_name, "rg-${local.base}")

  # Stable per subscription + resource group when name_suffix is empty.
  suffix = var.name_suffix != "" ? var.name_suffix : substr(sha256("${data.azurerm_client_config.current.subscription_id}/${local.resource_group_name}"), 0, 6)

  # Storage accounts and key vaults allow only short (<= 24) names; storage
  # accounts no hyphens at all.
  compact = substr(replace("${var.name_prefix}${var.environment}", "-", ""), 0, 12)

  names = {
    eventhub_namespace       = "evhns-${local.base}-${local.suffix}"
    capture_storage_account  = "stc${local.compact}${local.suffix}"
    function_storage_account = "stf${local.compact}${local.suffix}"
    key_vault                = "kv-${local.compact}-${local.suffix}"
    service_plan             = "asp-${local.base}"
    function_app             = "func-${local.base}-${local.suffix}"
    function_identity        = "id-${local.base}"
    log_analytics_workspace  = "log-${local.base}"
    application_insights     = "appi-${local.base}"
    action_group             = "ag-${local.base}"
  }

  tags = merge(var.tags, {
    application = "ehmirror"
    environment = var.environment
    managed-by  = "terraform"
  })

  # Resource providers used by this configuration (see providers.tf);
  # faults/terraform_providers_test.go checks that every resource type's
  # namespace is here and in both READMEs.
  resource_providers = [
    "Microsoft.EventHub",
    "Microsoft.Insights",
    "Microsoft.KeyVault",
    "Microsoft.ManagedIdentity", # the app's user-assigned identity
    "Microsoft.Network",         # private endpoints and DNS zones (network.tf)
    "Microsoft.OperationalInsights",
    "Microsoft.Storage",
    "Microsoft.Web",
  ]

  # A positive Go duration (time.ParseDuration) as the handler's duration
  # settings take it, e.g. "4m", "90s" or "1h30m"; the validations also ask
  # for a non-zero digit.
  go_duration = "^([0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"

  # --- event hubs ------------------------------------------------------------
  # The DNS suffix of var.azure_cloud (network.tf).
  eventhubs_fqdn = "${azurerm_eventhub_namespace.this.name}.${local.cloud_dns[var.azure_cloud].servicebus}"

  consumer_groups = merge([
    for hub_name, hub in var.event_hubs : {
      for cg in hub.consumer_groups : "${hub_name}/${cg}" => {
        eventhub_name = hub_name
        name          = cg
      }
    }
  ]...)

  # --- key vault secrets -----------------------------------------------------
  # Mechanisms with a user name and password (the token-based ones:
  # kafka_sasl.tf).
  kafka_sasl_user_password = contains(["plain", "scram-sha-256", "scram-sha-512"], var.kafka_sasl_mechanism)

  # Only non-secret flags decide which secrets exist, so for_each keys stay
  # known at plan time while the (sensitive) values stay out of them.
  kafka_secret_names = merge(
    local.kafka_sasl_user_password ? {
      KAFKA_SASL_USERNAME = "kafka-sasl-username"
      KAFKA_SASL_PASSWORD = "kafka-sasl-password"
    } : {},
    nonsensitive(var.kafka_tls_ca_pem != null) ? {
      KAFKA_TLS_CA_PEM = "kafka-tls-ca-pem"
    } : {},
  )
}
