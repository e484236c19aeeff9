# MIRROR_DEDUPLICATE: the Data Receiver role exists only when it is on.

mock_provider "azurerm" {
  source = "./tests/mocks"
}

mock_provider "time" {}

variables {
  location            = "westeurope"
  name_suffix         = "t05"
  kafka_brokers       = ["10.0.0.4:9092"]
  kafka_sasl_username = "mirror-user"
  kafka_sasl_password = "a-secret"
}

run "deduplication_off_grants_no_listen" {
  assert {
    condition     = length(azurerm_role_assignment.function_app_receiver) == 0 && azurerm_linux_function_app.this.app_settings["MIRROR_DEDUPLICATE"] == "false"
    error_message = "Without mirror_deduplicate the app must not hold Data Receiver and MIRROR_DEDUPLICATE must be false."
  }
}

run "deduplication_on_grants_data_receiver" {
  variables {
    mirror_deduplicate = true
  }

  assert {
    condition = (
      length(azurerm_role_assignment.function_app_receiver) == 1 &&
      azurerm_role_assignment.function_app_receiver[0].role_definition_name == "Azure Event Hubs Data Receiver" &&
      azurerm_role_assignment.function_app_receiver[0].principal_type == "ServicePrincipal" &&
      azurerm_linux_function_app.this.app_settings["MIRROR_DEDUPLICATE"] == "true"
    )
    error_message = "With mirror_deduplicate the app's identity must hold Data Receiver and MIRROR_DEDUPLICATE must be true."
  }
}
