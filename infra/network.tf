# Private networking (issue 24, item 9; issue 44, items 3, 4, 6, 9), off by
# default: private endpoints registered in privatelink DNS zones (passed in,
# or created only when asked), public access to the vault and the storage
# accounts restricted to trusted services, the namespace private too.

locals {
  private_endpoints_enabled = var.private_endpoint_subnet_id != null

  # The privatelink zone and service DNS suffixes of each Azure cloud.
  cloud_dns = {
    public = {
      servicebus = "servicebus.windows.net"
      zones = {
        namespace = "privatelink.servicebus.windows.net"
        vault     = "privatelink.vaultcore.azure.net"
        blob      = "privatelink.blob.core.windows.net"
        queue     = "privatelink.queue.core.windows.net"
        table     = "privatelink.table.core.windows.net"
      }
    }
    usgovernment = {
      servicebus = "servicebus.usgovcloudapi.net"
      zones = {
        namespace = "privatelink.servicebus.usgovcloudapi.net"
        vault     = "privatelink.vaultcore.usgovcloudapi.net"
        blob      = "privatelink.blob.core.usgovcloudapi.net"
        queue     = "privatelink.queue.core.usgovcloudapi.net"
        table     = "privatelink.table.core.usgovcloudapi.net"
      }
    }
    china = {
      servicebus = "servicebus.chinacloudapi.cn"
      zones = {
        namespace = "privatelink.servicebus.chinacloudapi.cn"
        vault     = "privatelink.vaultcore.azure.cn"
        blob      = "privatelink.blob.core.chinacloudapi.cn"
        queue     = "privatelink.queue.core.chinacloudapi.cn"
        table     = "privatelink.table.core.chinacloudapi.cn"
      }
    }
  }
  zones = local.cloud_dns[var.azure_cloud].zones

  # One private endpoint per resource and sub-resource, with its zone. No
  # file endpoint: the app has no Azure Files content share (storage.tf).
  private_endpoints = local.private_endpoints_enabled ? {
    eventhubs      = { resource_id = azurerm_eventhub_namespace.this.id, subresource = "namespace", zone = local.zones.namespace }
    key_vault      = { resource_id = azurerm_key_vault.this.id, subresource = "vault", zone = local.zones.vault }
    function_blob  = { resource_id = azurerm_storage_account.function.id, subresource = "blob", zone = local.zones.blob }
    function_queue = { resource_id = azurerm_storage_account.function.id, subresource = "queue", zone = local.zones.queue }
    function_table = { resource_id = azurerm_storage_account.function.id, subresource = "table", zone = local.zones.table }
    capture_blob   = { resource_id = azurerm_storage_account.capture.id, subresource = "blob", zone = local.zones.blob }
  } : {}

  # Zones only from non-secret, plan-time values (for_each keys). A zone
  # is created only with create_private_dns_zones: Azure refuses a second
  # link of the same zone name to one network, so a second environment or
  # a spoke already linked to the hub's zones must pass them in.
  private_dns_zones_needed  = toset([for pe in values(local.private_endpoints) : pe.zone])
  private_dns_zones_missing = setsubtract(local.private_dns_zones_needed, keys(var.private_dns_zone_ids))
  private_dns_zones_created = var.create_private_dns_zones ? local.private_dns_zones_missing : toset([])

  private_dns_zone_ids = merge(
    { for zone, z in azurerm_private_dns_zone.this : zone => z.id },
    var.private_dns_zone_ids,
  )

  # Closed firewalls on the vault and the storage accounts: restricted mode,
  # but not while scripts/deploy.sh's first step creates the apps
  # (network_firewall_open_for_create); its second apply closes them.
  firewall_closed = var.restrict_public_network_access && !var.network_firewall_open_for_create

  # network_rules / network_acls of the Key Vault and the storage accounts.
  public_network_rules = var.restrict_public_network_access ? [{
    default_action = local.firewall_closed ? "Deny" : "Allow"
    bypass         = ["AzureServices"] # Event Hubs Capture, a trusted service
    ip_rules       = var.network_allowed_ip_ranges
  }] : []

  # The namespace follows restricted mode unless set explicitly.
  eventhubs_public_network_access_enabled = coalesce(var.eventhubs_public_network_access_enabled, !var.restrict_public_network_access)
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
      error_message = "private_dns_zone_vnet_id is needed to link the private DNS zone ${each.key} that create_private_dns_zones creates (or pass the zone in private_dns_zone_ids)."
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
    private_dns_zone_ids = [lookup(local.private_dns_zone_ids, each.value.zone, "")]
  }

  tags = local.tags

  lifecycle {
    precondition {
      condition     = contains(keys(local.private_dns_zone_ids), each.value.zone)
      error_message = "The private endpoint ${each.key} needs the private DNS zone ${each.value.zone}: pass its ID in private_dns_zone_ids (e.g. the hub's central zone; Azure refuses a second link of one zone name to a network), or set create_private_dns_zones = true with private_dns_zone_vnet_id to create and link it here."
    }
  }
}
