output "resource_group_name" {
  description = "Resource group that holds every resource of the mirror."
  value       = local.resource_group.name
}

output "eventhubs_namespace_name" {
  description = "Name of the Event Hubs namespace."
  value       = azurerm_eventhub_namespace.this.name
}

output "eventhubs_namespace_fqdn" {
  description = "Fully qualified namespace the mirror sends to (EVENTHUBS__fullyQualifiedNamespace)."
  value       = local.eventhubs_fqdn
}

output "event_hub_names" {
  description = "Names of the event hubs, one per mirrored topic (or route target)."
  value       = sort([for hub in azurerm_eventhub.this : hub.name])
}

output "function_app_name" {
  description = "Name of the first function app (with instances = 1 the only one; function_apps lists all)."
  value       = azurerm_linux_function_app.this[0].name
}

output "function_app_default_hostname" {
  description = "Default host name of the first function app (https://<this>/api/status; function_apps lists all)."
  value       = azurerm_linux_function_app.this[0].default_hostname
}

output "function_apps" {
  description = "Every function app of var.instances, in order: name and default host name (scripts/deploy.sh deploys the package to each and enables each timer once its /api/status is ready)."
  value = [
    for app in azurerm_linux_function_app.this : {
      name             = app.name
      default_hostname = app.default_hostname
    }
  ]
}

output "function_app_principal_id" {
  description = "Object ID of the function app's user-assigned identity (holds Azure Event Hubs Data Sender on the namespace, Key Vault Secrets User on the vault and the Functions host's storage roles on its own storage account)."
  value       = azurerm_user_assigned_identity.function_app.principal_id
}

output "function_app_identity_client_id" {
  description = "Client ID of the function app's user-assigned identity (EVENTHUBS__clientId)."
  value       = azurerm_user_assigned_identity.function_app.client_id
}

output "capture_storage_account_name" {
  description = "Storage account that receives Event Hubs Capture files."
  value       = azurerm_storage_account.capture.name
}

output "capture_container_name" {
  description = "Blob container that receives the Capture (Avro) files of every hub."
  value       = azurerm_storage_container.capture.name
}

output "key_vault_name" {
  description = "Key Vault holding the Kafka credentials referenced by the app settings."
  value       = azurerm_key_vault.this.name
}

output "function_app_possible_outbound_ip_addresses" {
  description = "Every IP address the function apps may connect from (its plan's whole outbound pool, not only the current ones): allow these on a Kafka firewall. With VNet integration, vnet_route_all_enabled and a NAT gateway on the subnet, the app connects from the NAT gateway's IP instead."
  value       = sort(distinct(flatten(azurerm_linux_function_app.this[*].possible_outbound_ip_address_list)))
}

# scripts/deploy.sh uploads the package here (storage.tf); every app runs it
# from url.
output "function_package" {
  description = "Where the function apps' package lives: storage account, container, blob name and URL (WEBSITE_RUN_FROM_PACKAGE)."
  value = {
    storage_account_name = azurerm_storage_account.function.name
    container_name       = azurerm_storage_container.packages.name
    blob_name            = local.function_package_blob
    url                  = local.function_package_url
  }
}

# scripts/deploy.sh closes the firewalls in a second apply when this is
# true and the first apply kept them open to create the apps.
output "restrict_public_network_access" {
  description = "Whether the vault's and the storage accounts' firewalls are meant to be closed (restrict_public_network_access)."
  value       = var.restrict_public_network_access
}
