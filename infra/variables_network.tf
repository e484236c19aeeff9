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

variable "azure_cloud" {
  description = "The Azure cloud: public, usgovernment or china. Picks the Event Hubs DNS suffix (EVENTHUBS__fullyQualifiedNamespace) and the privatelink zone names (network.tf)."
  type        = string
  default     = "public"

  validation {
    condition     = contains(["public", "usgovernment", "china"], var.azure_cloud)
    error_message = "azure_cloud must be public, usgovernment or china."
  }
}

variable "private_dns_zone_ids" {
  description = "Existing private DNS zones for the private endpoints, by zone name => zone resource ID. The names of the public cloud: privatelink.servicebus.windows.net, privatelink.vaultcore.azure.net, privatelink.blob.core.windows.net, privatelink.queue.core.windows.net, privatelink.table.core.windows.net (azure_cloud usgovernment or china: their own names, network.tf). With private endpoints on, each zone they need must be here unless create_private_dns_zones is set."
  type        = map(string)
  default     = {}

  validation {
    condition = alltrue([
      for zone, id in var.private_dns_zone_ids :
      can(regex("^privatelink\\.(servicebus|vaultcore|blob\\.core|queue\\.core|table\\.core)\\.(windows\\.net|azure\\.net|usgovcloudapi\\.net|chinacloudapi\\.cn|azure\\.cn)$", zone)) &&
      can(regex("^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft.Network/privateDnsZones/${replace(zone, ".", "\\.")}$", id))
    ])
    error_message = "private_dns_zone_ids keys must be privatelink zone names this module uses (servicebus, vaultcore, blob, queue, table of your cloud), each mapped to that zone's resource ID (/subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Network/privateDnsZones/<zone>)."
  }
}

variable "create_private_dns_zones" {
  description = "Create the privatelink zones missing from private_dns_zone_ids in the resource group and link them to private_dns_zone_vnet_id. Off by default: Azure refuses a second link of one zone name to a network (\"cannot be linked to multiple zones with overlapping namespaces\"), so a second environment, or a VNet already linked to a hub's central zones, must pass those zones in private_dns_zone_ids."
  type        = bool
  default     = false
}

variable "private_dns_zone_vnet_id" {
  description = "Resource ID of the virtual network the private DNS zones this module creates (create_private_dns_zones) are linked to: the VNet of vnet_integration_subnet_id, so that the app resolves the private endpoints."
  type        = string
  default     = null

  validation {
    condition     = var.private_dns_zone_vnet_id == null || can(regex("^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft.Network/virtualNetworks/[^/]+$", var.private_dns_zone_vnet_id))
    error_message = "private_dns_zone_vnet_id must be null or a virtual network resource ID: /subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Network/virtualNetworks/<vnet>."
  }
}

variable "restrict_public_network_access" {
  description = "Deny public network access to the Key Vault and both storage accounts, except trusted Azure services (Event Hubs Capture writes with the namespace's identity) and network_allowed_ip_ranges, and (unless eventhubs_public_network_access_enabled says otherwise) to the namespace. Needs private endpoints (private_endpoint_subnet_id) and VNet integration (vnet_integration_subnet_id): the app then reaches them, and its package, through the VNet. Needs a deployer inside the network (deployer_inside_network) or at a fixed address in network_allowed_ip_ranges: every plan reads the Key Vault secrets through the vault's data plane."
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

variable "deployer_inside_network" {
  description = "The deployment runs inside the VNet (a self-hosted runner that resolves and reaches the private endpoints). With restrict_public_network_access, this or a fixed deployer address in network_allowed_ip_ranges is required: every plan reads the Key Vault secrets through the vault's data plane (the provider refreshes each azurerm_key_vault_secret, write-only values too) and scripts/deploy.sh uploads the package to the function storage account."
  type        = bool
  default     = false
}

variable "network_firewall_open_for_create" {
  description = "Keep the vault's and the storage accounts' firewalls open (default_action Allow) in this apply although restrict_public_network_access is on. scripts/deploy.sh sets it for the first step of a deployment that creates function apps, and closes the firewalls with a second apply before it uploads the package; not meant to be set by hand."
  type        = bool
  default     = false
}
