resource "azurerm_log_analytics_workspace" "this" {
  name                = local.names.log_analytics_workspace
  resource_group_name = local.resource_group.name
  location            = var.location
  sku                 = "PerGB2018"
  retention_in_days   = var.log_analytics_retention_in_days

  tags = local.tags
}

# Workspace-based Application Insights; the function app gets its connection
# string through site_config.application_insights_connection_string.
resource "azurerm_application_insights" "this" {
  name                = local.names.application_insights
  resource_group_name = local.resource_group.name
  location            = var.location
  application_type    = "other"
  workspace_id        = azurerm_log_analytics_workspace.this.id

  tags = local.tags
}
