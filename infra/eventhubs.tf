resource "azurerm_eventhub_namespace" "this" {
  name                = local.names.eventhub_namespace
  resource_group_name = local.resource_group.name
  location            = var.location
  sku                 = var.eventhubs_sku
  capacity            = var.eventhubs_capacity

  auto_inflate_enabled     = var.eventhubs_auto_inflate_enabled
  maximum_throughput_units = var.eventhubs_auto_inflate_enabled ? var.eventhubs_maximum_throughput_units : null

  minimum_tls_version           = "1.2"
  local_authentication_enabled  = var.eventhubs_local_authentication_enabled
  public_network_access_enabled = local.eventhubs_public_network_access_enabled

  # Capture writes to Blob storage with this identity (see capture.tf).
  identity {
    type = "SystemAssigned"
  }

  tags = local.tags

  lifecycle {
    precondition {
      condition     = var.eventhubs_sku != "Premium" || contains([1, 2, 4, 8, 16], var.eventhubs_capacity)
      error_message = "On Premium, eventhubs_capacity is processing units and must be 1, 2, 4, 8 or 16."
    }
    precondition {
      condition     = !var.eventhubs_auto_inflate_enabled || var.eventhubs_sku == "Standard"
      error_message = "eventhubs_auto_inflate_enabled is only available on the Standard tier."
    }
    precondition {
      condition     = !var.eventhubs_auto_inflate_enabled || var.eventhubs_maximum_throughput_units >= var.eventhubs_capacity
      error_message = "eventhubs_maximum_throughput_units must be at least eventhubs_capacity when auto-inflate is enabled."
    }
    precondition {
      condition     = var.eventhubs_sku != "Standard" || length(var.event_hubs) <= 10
      error_message = "A Standard namespace holds at most 10 event hubs; route several topics into one hub (MIRROR_ROUTES) or use Premium."
    }
  }
}

resource "azurerm_eventhub" "this" {
  for_each = var.event_hubs

  name              = each.key
  namespace_id      = azurerm_eventhub_namespace.this.id
  partition_count   = each.value.partition_count
  message_retention = each.value.message_retention

  capture_description {
    enabled             = true
    encoding            = "Avro"
    interval_in_seconds = var.capture_interval_in_seconds
    size_limit_in_bytes = var.capture_size_limit_in_bytes
    skip_empty_archives = var.capture_skip_empty_archives

    destination {
      name                        = "EventHubArchive.AzureBlockBlob"
      archive_name_format         = var.capture_archive_name_format
      blob_container_name         = azurerm_storage_container.capture.name
      storage_account_id          = azurerm_storage_account.capture.id
      storage_authentication_type = "SystemAssigned"
    }
  }

  # Capture validates its access to the container when it is enabled: wait
  # for the roles to propagate (capture.tf).
  depends_on = [time_sleep.capture_roles]

  lifecycle {
    precondition {
      condition     = var.eventhubs_sku != "Standard" || each.value.message_retention <= 7
      error_message = "Event hub ${each.key}: message_retention is at most 7 days on the Standard tier."
    }
  }
}

resource "azurerm_eventhub_consumer_group" "this" {
  for_each = local.consumer_groups

  name                = each.value.name
  namespace_name      = azurerm_eventhub_namespace.this.name
  eventhub_name       = azurerm_eventhub.this[each.value.eventhub_name].name
  resource_group_name = local.resource_group.name
}
