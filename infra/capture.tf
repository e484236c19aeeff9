# Storage for Event Hubs Capture (Avro files of every hub).
resource "azurerm_storage_account" "capture" {
  name                     = local.names.capture_storage_account
  resource_group_name      = local.resource_group.name
  location                 = var.location
  account_kind             = "StorageV2"
  account_tier             = "Standard" # Capture does not support Premium storage.
  account_replication_type = var.capture_storage_replication_type

  min_tls_version                 = "TLS1_2"
  https_traffic_only_enabled      = true
  allow_nested_items_to_be_public = false

  # Capture writes with the namespace's identity, and the container below is
  # created through Azure Resource Manager (storage_account_id), so no key is
  # needed: Shared Key is off unless a reader still needs it.
  shared_access_key_enabled = var.capture_shared_access_key_enabled

  # Private networking (network.tf): Capture is a trusted service and keeps
  # writing through the AzureServices bypass.
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

resource "azurerm_storage_container" "capture" {
  name                  = var.capture_container_name
  storage_account_id    = azurerm_storage_account.capture.id
  container_access_type = "private"
}

# Capture authenticates with the namespace's system-assigned identity.
resource "azurerm_role_assignment" "namespace_capture_blob" {
  scope                = azurerm_storage_account.capture.id
  role_definition_name = "Storage Blob Data Contributor"
  principal_id         = azurerm_eventhub_namespace.this.identity[0].principal_id
  principal_type       = "ServicePrincipal"
  description          = "Event Hubs Capture writes Avro files of every hub."
}

# Enabling or updating Capture checks that the caller may write the
# destination container: every deployer (deployer_object_ids), whoever runs
# this apply, so that the pipeline can update a hub a person created.
resource "azurerm_role_assignment" "deployer_capture_blob" {
  for_each = var.grant_deployer_capture_access ? toset(var.deployer_object_ids) : toset([])

  scope                = azurerm_storage_account.capture.id
  role_definition_name = "Storage Blob Data Contributor"
  principal_id         = each.value
  description          = "ehmirror deployer (deployer_object_ids) may enable and update Capture to this account."
}

# Enabling Capture checks the namespace identity's and the caller's access to
# the container; the provider does not retry a 403, so the hubs are created
# only after the roles above had time to propagate.
resource "time_sleep" "capture_roles" {
  create_duration = var.role_propagation_wait

  triggers = {
    role_assignment_ids = join(",", concat(
      [azurerm_role_assignment.namespace_capture_blob.id],
      [for ra in azurerm_role_assignment.deployer_capture_blob : ra.id],
    ))
  }
}
