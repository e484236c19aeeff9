# Kafka credentials live in Key Vault; app settings only hold
# @Microsoft.KeyVault(SecretUri=...) references that the platform resolves
# with the function app's identity.
resource "azurerm_key_vault" "this" {
  name                       = local.names.key_vault
  resource_group_name        = local.resource_group.name
  location                   = var.location
  tenant_id                  = data.azurerm_client_config.current.tenant_id
  sku_name                   = "standard"
  rbac_authorization_enabled = true
  purge_protection_enabled   = var.key_vault_purge_protection_enabled
  soft_delete_retention_days = 7

  # Private networking (network.tf): trusted services and the given IP
  # ranges only; the app resolves its references through a private endpoint.
  dynamic "network_acls" {
    for_each = local.public_network_rules
    content {
      default_action = network_acls.value.default_action
      bypass         = "AzureServices"
      ip_rules       = network_acls.value.ip_rules
    }
  }

  tags = local.tags

  lifecycle {
    precondition {
      condition     = !var.restrict_public_network_access || (var.private_endpoint_subnet_id != null && var.vnet_integration_subnet_id != null && var.vnet_route_all_enabled)
      error_message = "restrict_public_network_access needs private_endpoint_subnet_id, vnet_integration_subnet_id and vnet_route_all_enabled: the app then reaches the vault and its storage only through the VNet."
    }
    # Every plan refreshes each azurerm_key_vault_secret through the vault's
    # data plane (GetSecret; write-only values do not avoid the read), and
    # deploy.sh uploads the package to the function storage: behind closed
    # firewalls that works only from inside the network or a fixed address.
    precondition {
      condition     = !var.restrict_public_network_access || var.deployer_inside_network || length(var.network_allowed_ip_ranges) > 0
      error_message = "restrict_public_network_access needs a deployer that reaches the vault and the function storage: every plan reads each Key Vault secret through the vault's data plane, and a hosted runner's changing address gets 403 on every run. Run terraform and scripts/deploy.sh from inside the VNet (a self-hosted runner) and set deployer_inside_network = true, or put the runner's fixed egress address in network_allowed_ip_ranges."
    }
  }
}

# Every principal of deployer_object_ids may write the Kafka secrets (and
# every plan reads them through the vault's data plane): the roles do not
# follow whoever runs terraform, so a pipeline's principal that takes over
# from a person already holds its role before its first plan.
resource "azurerm_role_assignment" "deployer_key_vault_secrets" {
  for_each = var.grant_deployer_key_vault_access ? toset(var.deployer_object_ids) : toset([])

  scope                = azurerm_key_vault.this.id
  role_definition_name = "Key Vault Secrets Officer"
  principal_id         = each.value
  description          = "ehmirror deployer (deployer_object_ids) writes and reads the Kafka secrets."
}

# Azure RBAC is eventually consistent and the provider does not retry a 403:
# the secrets are written only after this wait for the roles above (and
# again after one is added or replaced).
resource "time_sleep" "deployer_key_vault_secrets" {
  create_duration = var.role_propagation_wait

  triggers = {
    role_assignment_ids = join(",", [for ra in azurerm_role_assignment.deployer_key_vault_secrets : ra.id])
  }
}

resource "azurerm_key_vault_secret" "kafka" {
  for_each = local.kafka_secret_names

  name         = each.value
  key_vault_id = azurerm_key_vault.this.id
  # Write-only: the value is sent to Key Vault and kept in neither the
  # state nor the plan; key_vault_secrets_version says when to write again.
  value_wo = lookup({
    KAFKA_SASL_USERNAME = var.kafka_sasl_username
    KAFKA_SASL_PASSWORD = var.kafka_sasl_password
    KAFKA_TLS_CA_PEM    = var.kafka_tls_ca_pem
  }, each.key)
  value_wo_version = var.key_vault_secrets_version
  content_type     = each.key == "KAFKA_TLS_CA_PEM" ? "application/x-pem-file" : "text/plain"

  tags = local.tags

  depends_on = [time_sleep.deployer_key_vault_secrets]

  lifecycle {
    precondition {
      condition     = !local.kafka_sasl_user_password || (nonsensitive(var.kafka_sasl_username != null && var.kafka_sasl_username != "") && nonsensitive(var.kafka_sasl_password != null && var.kafka_sasl_password != ""))
      error_message = "kafka_sasl_mechanism = \"${var.kafka_sasl_mechanism}\" needs kafka_sasl_username and kafka_sasl_password (oauthbearer, aws-msk-iam and none need neither)."
    }
  }
}
