# Issue 24, item 9: private networking as variables, off by default. Issue
# 44: zones passed in (created only when asked, item 6), the namespace
# private with restricted mode (item 9), the firewalls open while the apps
# are created and closed in a second step (item 3), restricted mode needs a
# deployer inside the network (item 4), sovereign clouds' zones (item 9).

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
  # The deployers (Key Vault, package and Capture roles), independent of
  # the caller (the mock client config's object ID ends in "de").
  deployer_object_ids = ["00000000-0000-0000-0000-0000000000de"]
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
    condition     = azurerm_storage_account.capture.shared_access_key_enabled == false && azurerm_storage_account.function.shared_access_key_enabled == false && azurerm_eventhub_namespace.this.public_network_access_enabled
    error_message = "Shared Key must be off on both accounts (identities only), and the namespace public by default."
  }

  assert {
    condition     = azurerm_storage_container.capture.storage_account_id == azurerm_storage_account.capture.id
    error_message = "The Capture container must be created through Azure Resource Manager (storage_account_id), which needs no Shared Key."
  }
}

run "private_endpoints_with_created_zones" {
  variables {
    create_private_dns_zones   = true
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
      function_queue = "${azurerm_storage_account.function.id}|queue"
      function_table = "${azurerm_storage_account.function.id}|table"
      capture_blob   = "${azurerm_storage_account.capture.id}|blob"
    }
    error_message = "Private endpoints must cover the namespace, the vault, the function storage (blob, queue, table; no file: no content share) and the Capture blob."
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
      keys(azurerm_private_dns_zone.this) == ["privatelink.blob.core.windows.net", "privatelink.queue.core.windows.net", "privatelink.servicebus.windows.net", "privatelink.table.core.windows.net", "privatelink.vaultcore.azure.net"] &&
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
    create_private_dns_zones   = true
  }

  expect_failures = [azurerm_private_dns_zone_virtual_network_link.this]
}

# Item 6: without create_private_dns_zones the module creates no zone (a
# second link of one zone name to a network fails in Azure); a zone the
# endpoints need and private_dns_zone_ids lacks stops the plan, naming it.
run "private_endpoints_need_their_zones" {
  command = plan

  variables {
    private_endpoint_subnet_id = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-net/providers/Microsoft.Network/virtualNetworks/vnet-hub/subnets/snet-pe"
    private_dns_zone_vnet_id   = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-net/providers/Microsoft.Network/virtualNetworks/vnet-hub"
    private_dns_zone_ids = {
      "privatelink.servicebus.windows.net" = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-dns/providers/Microsoft.Network/privateDnsZones/privatelink.servicebus.windows.net"
      "privatelink.vaultcore.azure.net"    = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-dns/providers/Microsoft.Network/privateDnsZones/privatelink.vaultcore.azure.net"
      "privatelink.blob.core.windows.net"  = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-dns/providers/Microsoft.Network/privateDnsZones/privatelink.blob.core.windows.net"
    }
  }

  expect_failures = [azurerm_private_endpoint.this["function_queue"], azurerm_private_endpoint.this["function_table"]]
}

# Item 9: a sovereign cloud's zone names are accepted and used, and the
# namespace's DNS suffix follows the cloud.
run "sovereign_cloud_zones" {
  variables {
    azure_cloud                = "usgovernment"
    private_endpoint_subnet_id = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-net/providers/Microsoft.Network/virtualNetworks/vnet-hub/subnets/snet-pe"
    private_dns_zone_ids = {
      "privatelink.servicebus.usgovcloudapi.net" = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-dns/providers/Microsoft.Network/privateDnsZones/privatelink.servicebus.usgovcloudapi.net"
      "privatelink.vaultcore.usgovcloudapi.net"  = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-dns/providers/Microsoft.Network/privateDnsZones/privatelink.vaultcore.usgovcloudapi.net"
      "privatelink.blob.core.usgovcloudapi.net"  = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-dns/providers/Microsoft.Network/privateDnsZones/privatelink.blob.core.usgovcloudapi.net"
      "privatelink.queue.core.usgovcloudapi.net" = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-dns/providers/Microsoft.Network/privateDnsZones/privatelink.queue.core.usgovcloudapi.net"
      "privatelink.table.core.usgovcloudapi.net" = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-dns/providers/Microsoft.Network/privateDnsZones/privatelink.table.core.usgovcloudapi.net"
    }
  }

  assert {
    condition = (
      length(azurerm_private_dns_zone.this) == 0 &&
      azurerm_private_endpoint.this["eventhubs"].private_dns_zone_group[0].private_dns_zone_ids == tolist([var.private_dns_zone_ids["privatelink.servicebus.usgovcloudapi.net"]]) &&
      azurerm_private_endpoint.this["key_vault"].private_dns_zone_group[0].private_dns_zone_ids == tolist([var.private_dns_zone_ids["privatelink.vaultcore.usgovcloudapi.net"]]) &&
      endswith(azurerm_linux_function_app.this[0].app_settings["EVENTHUBS__fullyQualifiedNamespace"], ".servicebus.usgovcloudapi.net")
    )
    error_message = "A US Government cloud deployment must use that cloud's privatelink zones and Event Hubs DNS suffix."
  }
}

run "restricted_public_access_keeps_trusted_services" {
  variables {
    vnet_integration_subnet_id     = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-net/providers/Microsoft.Network/virtualNetworks/vnet-hub/subnets/snet-app"
    private_endpoint_subnet_id     = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-net/providers/Microsoft.Network/virtualNetworks/vnet-hub/subnets/snet-pe"
    private_dns_zone_vnet_id       = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-net/providers/Microsoft.Network/virtualNetworks/vnet-hub"
    create_private_dns_zones       = true
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
    condition     = azurerm_linux_function_app.this[0].site_config[0].vnet_route_all_enabled && !contains(keys(azurerm_linux_function_app.this[0].app_settings), "WEBSITE_CONTENTOVERVNET")
    error_message = "Without public storage access the app must route all traffic through the VNet (its package and references), with no content share."
  }

  assert {
    condition     = !azurerm_eventhub_namespace.this.public_network_access_enabled && output.restrict_public_network_access
    error_message = "Restricted mode must make the namespace private too (eventhubs_public_network_access_enabled unset), and say so to deploy.sh."
  }
}

# Item 3, first step: deploy.sh creates the apps with the firewalls open
# (network_firewall_open_for_create), then closes them with a second apply
# (the run above). The namespace stays private in both steps.
run "firewalls_open_while_the_apps_are_created" {
  variables {
    vnet_integration_subnet_id       = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-net/providers/Microsoft.Network/virtualNetworks/vnet-hub/subnets/snet-app"
    private_endpoint_subnet_id       = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-net/providers/Microsoft.Network/virtualNetworks/vnet-hub/subnets/snet-pe"
    private_dns_zone_vnet_id         = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-net/providers/Microsoft.Network/virtualNetworks/vnet-hub"
    create_private_dns_zones         = true
    restrict_public_network_access   = true
    network_firewall_open_for_create = true
    deployer_inside_network          = true
  }

  assert {
    condition = (
      azurerm_key_vault.this.network_acls[0].default_action == "Allow" &&
      azurerm_storage_account.function.network_rules[0].default_action == "Allow" &&
      azurerm_storage_account.capture.network_rules[0].default_action == "Allow" &&
      !azurerm_eventhub_namespace.this.public_network_access_enabled
    )
    error_message = "With network_firewall_open_for_create the vault's and storage accounts' firewalls must be open (default Allow) for the apps' creation."
  }
}

# Item 4: restricted mode without a deployer that reaches the vault fails
# the plan early, saying why (every plan reads the secrets).
run "restricted_public_access_needs_a_deployer_in_the_network" {
  command = plan

  variables {
    vnet_integration_subnet_id     = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-net/providers/Microsoft.Network/virtualNetworks/vnet-hub/subnets/snet-app"
    private_endpoint_subnet_id     = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-net/providers/Microsoft.Network/virtualNetworks/vnet-hub/subnets/snet-pe"
    private_dns_zone_vnet_id       = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-net/providers/Microsoft.Network/virtualNetworks/vnet-hub"
    create_private_dns_zones       = true
    restrict_public_network_access = true
  }

  expect_failures = [azurerm_key_vault.this]
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
