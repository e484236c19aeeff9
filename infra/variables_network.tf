###############################################################################
# Private networking (issue 24, item 9; network.tf). Everything is off by
# default: public endpoints, Azure AD/RBAC for every data access.
###############################################################################

variable "private_endpoint_subnet_id" {
  description = "Resource ID of a subnet for private endpoints of the Event Hubs namespace, the Key Vault, the function storage account (blob, file, queue, table) and the Capture account (blob). Null creates none."
  type        = string
  default     = null

  validation {
    condition     = var.private_endpoint_subnet_id == null || can(regex("^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft.Network/virtualNetworks/[^/]+/subnets/[^/]+$", var.private_endpoint_subnet_id))
    error_message = "private_endpoint_subnet_id must be null or a subnet resource ID: /subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Network/virtualNetworks/<vnet>/subnets/<subnet>."
  }
}

variable "private_dns_zone_ids" {
  description = "Existing private DNS zones for the private endpoints, by zone name (privatelink.servicebus.windows.net, privatelink.vaultcore.azure.net, privatelink.blob.core.windows.net, privatelink.file.core.windows.net, privatelink.queue.core.windows.net, privatelink.table.core.windows.net) => zone resource ID. A zone not listed is created in the resource group and linked to private_dns_zone_vnet_id."
  type        = map(string)
  default     = {}

  validation {
    condition = alltrue([
      for zone, id in var.private_dns_zone_ids :
      contains(["privatelink.servicebus.windows.net", "privatelink.vaultcore.azure.net", "privatelink.blob.core.windows.net", "privatelink.file.core.windows.net", "privatelink.queue.core.windows.net", "privatelink.table.core.windows.net"], zone) &&
      can(regex("^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft.Network/privateDnsZones/${replace(zone, ".", "\\.")}$", id))
    ])
    error_message = "private_dns_zone_ids keys must be privatelink zone names this module uses, each mapped to that zone's resource ID (/subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Network/privateDnsZones/<zone>)."
  }
}

variable "private_dns_zone_vnet_id" {
  description = "Resource ID of the virtual network the private DNS zones this module creates are linked to (the VNet of vnet_integration_subnet_id, so that the app resolves the private endpoints). Needed when private endpoints are on and a zone is not in private_dns_zone_ids."
  type        = string
  default     = null

  validation {
    condition     = var.private_dns_zone_vnet_id == null || can(regex("^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft.Network/virtualNetworks/[^/]+$", var.private_dns_zone_vnet_id))
    error_message = "private_dns_zone_vnet_id must be null or a virtual network resource ID: /subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Network/virtualNetworks/<vnet>."
  }
}

variable "restrict_public_network_access" {
  description = "Deny public network access to the Key Vault and both storage accounts, except trusted Azure services (Event Hubs Capture writes with the namespace's identity) and network_allowed_ip_ranges. Needs private endpoints (private_endpoint_subnet_id) and VNet integration (vnet_integration_subnet_id): the app then reaches them, and its content share (WEBSITE_CONTENTOVERVNET), through the VNet. The namespace has its own switch, eventhubs_public_network_access_enabled."
  type        = bool
  default     = false
}

variable "network_allowed_ip_ranges" {
  description = "Public IP addresses or CIDR ranges still allowed on the Key Vault and the storage accounts with restrict_public_network_access, e.g. the deployer's egress: Terraform writes the Key Vault secrets through the vault's data plane."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for r in var.network_allowed_ip_ranges : can(cidrhost(strcontains(r, "/") ? r : "${r}/32", 0))])
    error_message = "network_allowed_ip_ranges must hold IPv4 addresses or CIDR ranges, e.g. \"203.0.113.7\" or \"203.0.113.0/24\"."
  }
}

variable "capture_shared_access_key_enabled" {
  description = "Allow Shared Key (account key and SAS) authorization on the Capture storage account. Capture writes with the namespace's identity and the module creates the container through Azure Resource Manager, so the default is false; set true only for readers that still use the account key."
  type        = bool
  default     = false
}
