resource "azurerm_resource_group" "this" {
  count = var.existing_resource_group_name == null ? 1 : 0

  name     = local.resource_group_name
  location = var.location
  tags     = local.tags
}

data "azurerm_resource_group" "existing" {
  count = var.existing_resource_group_name == null ? 0 : 1

  name = var.existing_resource_group_name
}

locals {
  # Every resource below goes into this group; depending on the resource
  # (not just the name) orders creation after the group exists.
  resource_group = {
    name = var.existing_resource_group_name == null ? azurerm_resource_group.this[0].name : data.azurerm_resource_group.existing[0].name
    id   = var.existing_resource_group_name == null ? azurerm_resource_group.this[0].id : data.azurerm_resource_group.existing[0].id
  }
}
