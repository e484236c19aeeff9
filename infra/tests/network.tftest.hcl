# Issue 24, item 9: private networking as variables, off by default.

mock_provider "azurerm" {
  source = "./tests/mocks"
}

mock_provider "time" {}

override_resource {
  target = azurerm_storage_account.function
  values = {
    id = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ehmirror-test/providers/Microsoft.Storage/storageAccounts/stfunction"
  }
}

override_resource {
  target = azurerm_storage_account.capture
  values = {
    id = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ehmirror-test/providers/Microsoft.Storage/storageAccounts/stcapture"
  }
}

variables {
  alert_action_group_ids = ["/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ops/providers/Microsoft.Insights/actionGroups/ag-ops"]
  location               = "westeurope"
  name_suffix            = "t09"
  kafka_brokers          = ["10.0.0.4:9092"]
  kafka_sasl_username    = "mirror-user"
  kafka_sasl_password    = "a-secret"
}

run "public_by_default_capture_without_shared_key" {
  assert {
    condition = (
      length(azurerm_private_endpoint.this) == 0 && length(azurerm_private_dns_zone.this) == 0 &&
      length(azurerm_storage_account.function.network_rules) == 0 &&
      length(azurerm_storage_account.capture.network_rules) == 0 &&
      length(azurerm_key_vault.this.network_acls) == 0
    )
    error_message = "Private networking must be off by default."
  }

  assert {
    condition     = azurerm_storage_account.capture.shared_access_key_enabled == false && azurerm_storage_account.function.shared_access_key_enabled
    error_message = "Shared Key must be off on the Capture account (Capture uses the namespace's identity) and on for the function account (content share)."
  }

  assert {
    condition     = azurerm_storage_container.capture.storage_account_id == azurerm_storage_account.capture.id
    error_message = "The Capture container must be created through Azure Resource Manager (storage_account_id), which needs no Shared Key."
  }
}

run "private_endpoints_with_created_zones" {
  variables {
    private_endpoint_subnet_id = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-net/providers/Microsoft.Network/virtualNetworks/vnet-hub/subnets/snet-pe"
    private_dns_zone_vnet_id   = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-net/providers/Microsoft.Network/virtualNetworks/vnet-hub"
  }

  assert {
    condition = {
      for k, pe in azurerm_private_endpoint.this : k => "${pe.private_service_connection[0].private_connection_resource_id}|${pe.private_service_connection[0].subresource_names[0]}"
      } == {
      eventhubs      = "${azurerm_eventhub_namespace.this.id}|namespace"
      key_vault      = "${azurerm_key_vault.this.id}|vault"
      function_blob  = "${azurerm_storage_account.function.id}|blob"
      function_file  = "${azurerm_storage_account.function.id}|file"
      function_queue = "${azurerm_storage_account.function.id}|queue"
      function_table = "${azurerm_storage_account.function.id}|table"
      capture_blob   = "${azurerm_storage_account.capture.id}|blob"
    }
    error_message = "Private endpoints must cover the namespace, the vault, the function storage (blob, file, queue, table) and the Capture blob."
  }

  assert {
    condition = alltrue([
      for pe in azurerm_private_endpoint.this :
      pe.subnet_id == var.private_endpoint_subnet_id && !pe.private_service_connection[0].is_manual_connection
    ])
    error_message = "Every private endpoint must be in private_endpoint_subnet_id and approved automatically."
  }

  assert {
    condition = (
      keys(azurerm_private_dns_zone.this) == ["privatelink.blob.core.windows.net", "privatelink.file.core.windows.net", "privatelink.queue.core.windows.net", "privatelink.servicebus.windows.net", "privatelink.table.core.windows.net", "privatelink.vaultcore.azure.net"] &&
      alltrue([for zone, link in azurerm_private_dns_zone_virtual_network_link.this : link.virtual_network_id == var.private_dns_zone_vnet_id && link.private_dns_zone_id == azurerm_private_dns_zone.this[zone].id])
    )
    error_message = "Every privatelink zone must be created and linked to private_dns_zone_vnet_id."
  }

  assert {
    condition = alltrue([
      for k, pe in azurerm_private_endpoint.this :
      pe.private_dns_zone_group[0].private_dns_zone_ids == tolist([azurerm_private_dns_zone.this[local.private_endpoints[k].zone].id])
    ])
    error_message = "Every private endpoint must register in the zone of its sub-resource."
  }
}

run "private_endpoints_with_existing_zones" {
  variables {
    private_endpoint_subnet_id = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-net/providers/Microsoft.Network/virtualNetworks/vnet-hub/subnets/snet-pe"
    private_dns_zone_ids = {
      "privatelink.servicebus.windows.net" = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-dns/providers/Microsoft.Network/privateDnsZones/privatelink.servicebus.windows.net"
      "privatelink.vaultcore.azure.net"    = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-dns/providers/Microsoft.Network/privateDnsZones/privatelink.vaultcore.azure.net"
      "privatelink.blob.core.windows.net"  = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-dns/providers/Microsoft.Network/privateDnsZones/privatelink.blob.core.windows.net"
      "privatelink.file.core.windows.net"  = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-dns/providers/Microsoft.Network/privateDnsZones/privatelink.file.core.windows.net"
      "privatelink.queue.core.windows.net" = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-dns/providers/Microsoft.Network/privateDnsZones/privatelink.queue.core.windows.net"
      "privatelink.table.core.windows.net" = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-dns/providers/Microsoft.Network/privateDnsZones/privatelink.table.core.windows.net"
    }
  }

  assert {
    condition = (
      length(azurerm_private_dns_zone.this) == 0 && length(azurerm_private_dns_zone_virtual_network_link.this) == 0 &&
      azurerm_private_endpoint.this["key_vault"].private_dns_zone_group[0].private_dns_zone_ids == tolist([var.private_dns_zone_ids["privatelink.vaultcore.azure.net"]]) &&
      azurerm_private_endpoint.this["capture_blob"].private_dns_zone_group[0].private_dns_zone_ids == tolist([var.private_dns_zone_ids["privatelink.blob.core.windows.net"]])
    )
    error_message = "Zones passed in private_dns_zone_ids must be used, not created."
  }

  # Each endpoint registers in the zone of its own sub-resource (a literal
  # map: the zones' ids differ here, unlike the mock's).
  assert {
    condition = alltrue([
      for k, zone in {
        eventhubs      = "privatelink.servicebus.windows.net"
        key_vault      = "privatelink.vaultcore.azure.net"
        function_blob  = "privatelink.blob.core.windows.net"
        function_file  = "privatelink.file.core.windows.net"
        function_queue = "privatelink.queue.core.windows.net"
        function_table = "privatelink.table.core.windows.net"
        capture_blob   = "privatelink.blob.core.windows.net"
      } : azurerm_private_endpoint.this[k].private_dns_zone_group[0].private_dns_zone_ids == tolist([var.private_dns_zone_ids[zone]])
    ])
    error_message = "Every private endpoint must register in its own sub-resource's zone."
  }
}

run "zones_need_a_vnet_to_link" {
  command = plan

  variables {
    private_endpoint_subnet_id = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-net/providers/Microsoft.Network/virtualNetworks/vnet-hub/subnets/snet-pe"
  }

  expect_failures = [azurerm_private_dns_zone_virtual_network_link.this]
}

run "restricted_public_access_keeps_trusted_services" {
  variables {
    vnet_integration_subnet_id     = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-net/providers/Microsoft.Network/virtualNetworks/vnet-hub/subnets/snet-app"
    private_endpoint_subnet_id     = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-net/providers/Microsoft.Network/virtualNetworks/vnet-hub/subnets/snet-pe"
    private_dns_zone_vnet_id       = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-net/providers/Microsoft.Network/virtualNetworks/vnet-hub"
    restrict_public_network_access = true
    network_allowed_ip_ranges      = ["203.0.113.7", "198.51.100.0/24"]
  }

  assert {
    condition = alltrue([
      for rules in [azurerm_storage_account.function.network_rules, azurerm_storage_account.capture.network_rules] :
      length(rules) == 1 && rules[0].default_action == "Deny" && contains(rules[0].bypass, "AzureServices") && rules[0].ip_rules == toset(["203.0.113.7", "198.51.100.0/24"])
    ])
    error_message = "Both storage accounts must deny public access except trusted Azure services (Capture) and the allowed ranges."
  }

  assert {
    condition = (
      length(azurerm_key_vault.this.network_acls) == 1 &&
      azurerm_key_vault.this.network_acls[0].default_action == "Deny" &&
      azurerm_key_vault.this.network_acls[0].bypass == "AzureServices" &&
      azurerm_key_vault.this.network_acls[0].ip_rules == toset(["203.0.113.7", "198.51.100.0/24"])
    )
    error_message = "The vault must deny public access except trusted services and the allowed ranges (the deployer writes secrets)."
  }

  assert {
    condition     = azurerm_linux_function_app.this[0].app_settings["WEBSITE_CONTENTOVERVNET"] == "1" && azurerm_linux_function_app.this[0].site_config[0].vnet_route_all_enabled
    error_message = "Without public storage access the content share must be mounted through the VNet."
  }
}

run "restricted_public_access_needs_the_vnet" {
  command = plan

  variables {
    restrict_public_network_access = true
  }

  expect_failures = [azurerm_key_vault.this]
}

run "bad_zone_id" {
  command = plan

  variables {
    private_dns_zone_ids = { "privatelink.vaultcore.azure.net" = "/subscriptions/x/resourceGroups/rg/providers/Microsoft.Network/privateDnsZones/privatelink.blob.core.windows.net" }
  }

  expect_failures = [var.private_dns_zone_ids]
}

run "bad_allowed_range" {
  command = plan

  variables {
    network_allowed_ip_ranges = ["not-an-ip"]
  }

  expect_failures = [var.network_allowed_ip_ranges]
}
