# Private networking (issue 24, item 9), off by default: private endpoints
# with their private DNS zones (variables_network.tf), public access to the
# vault and the storage accounts restricted to trusted services.

locals {
  private_endpoints_enabled = var.private_endpoint_subnet_id != null

  # One private endpoint per resource and sub-resource, with its zone.
  private_endpoints = local.private_endpoints_enabled ? {
    eventhubs      = { resource_id = azurerm_eventhub_namespace.this.id, subresource = "namespace", zone = "privatelink.servicebus.windows.net" }
    key_vault      = { resource_id = azurerm_key_vault.this.id, subresource = "vault", zone = "privatelink.vaultcore.azure.net" }
    function_blob  = { resource_id = azurerm_storage_account.function.id, subresource = "blob", zone = "privatelink.blob.core.windows.net" }
    function_file  = { resource_id = azurerm_storage_account.function.id, subresource = "file", zone = "privatelink.file.core.windows.net" }
    function_queue = { resource_id = azurerm_storage_account.function.id, subresource = "queue", zone = "privatelink.queue.core.windows.net" }
    function_table = { resource_id = azurerm_storage_account.function.id, subresource = "table", zone = "privatelink.table.core.windows.net" }
    capture_blob   = { resource_id = azurerm_storage_account.capture.id, subresource = "blob", zone = "privatelink.blob.core.windows.net" }
  } : {}

  # Zones only from non-secret, plan-time values (for_each keys).
  private_dns_zones_needed  = toset([for pe in values(local.private_endpoints) : pe.zone])
  private_dns_zones_created = setsubtract(local.private_dns_zones_needed, keys(var.private_dns_zone_ids))

  private_dns_zone_ids = merge(
    { for zone, z in azurerm_private_dns_zone.this : zone => z.id },
    var.private_dns_zone_ids,
  )

  # network_rules / network_acls of the Key Vault and the storage accounts.
  public_network_rules = var.restrict_public_network_access ? [{
    default_action = "Deny"
    bypass         = ["AzureServices"] # Event Hubs Capture, a trusted service
    ip_rules       = var.network_allowed_ip_ranges
  }] : []
}

resource "azurerm_private_dns_zone" "this" {
  for_each = local.private_dns_zones_created

  name                = each.key
  resource_group_name = local.resource_group.name

  tags = local.tags
}

resource "azurerm_private_dns_zone_virtual_network_link" "this" {
  for_each = local.private_dns_zones_created

  name                = "link-${local.base}"
  private_dns_zone_id = azurerm_private_dns_zone.this[each.key].id
  virtual_network_id  = var.private_dns_zone_vnet_id

  tags = local.tags

  lifecycle {
    precondition {
      condition     = var.private_dns_zone_vnet_id != null
      error_message = "private_dns_zone_vnet_id is needed to link the private DNS zone ${each.key} (or pass the zone in private_dns_zone_ids)."
    }
  }
}

resource "azurerm_private_endpoint" "this" {
  for_each = local.private_endpoints

  name                          = "pe-${local.base}-${replace(each.key, "_", "-")}"
  resource_group_name           = local.resource_group.name
  location                      = var.location
  subnet_id                     = var.private_endpoint_subnet_id
  custom_network_interface_name = "nic-pe-${local.base}-${replace(each.key, "_", "-")}"

  private_service_connection {
    name                           = "psc-${replace(each.key, "_", "-")}"
    private_connection_resource_id = each.value.resource_id
    subresource_names              = [each.value.subresource]
    is_manual_connection           = false
  }

  private_dns_zone_group {
    name                 = "default"
    private_dns_zone_ids = [local.private_dns_zone_ids[each.value.zone]]
  }

  tags = local.tags
}
