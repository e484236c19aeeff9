provider "azurerm" {
  features {}

  # azurerm v5 registers no resource providers by default. Register only the
  # ones this configuration uses (needs */register/action on the
  # subscription the first time; turn off when they are already registered
  # and the deployer lacks that right).
  resource_provider_registrations = "none"
  resource_providers_to_register  = var.register_resource_providers ? local.resource_providers : []
}
