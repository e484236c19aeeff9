# MIRROR_DEDUPLICATE: the Data Receiver role exists only when it is on.

mock_provider "azurerm" {
  source = "./tests/mocks"
}

mock_provider "time" {}

variables {
  # Alerts notify someone (check.alert_targets; monitoring.tftest.hcl
  # tests the warning without a target).
  alert_action_group_ids = ["/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ops/providers/Microsoft.Insights/actionGroups/ag-ops"]
  location               = "westeurope"
  name_suffix            = "t05"
  kafka_brokers          = ["10.0.0.4:9092"]
  kafka_sasl_username    = "mirror-user"
  kafka_sasl_password    = "a-secret"
  # The deployers (Key Vault, package and Capture roles), independent of
  # the caller (the mock client config's object ID ends in "de").
  deployer_object_ids = ["00000000-0000-0000-0000-0000000000de"]
}

run "deduplication_off_grants_no_listen" {
  assert {
    condition     = length(azurerm_role_assignment.function_app_receiver) == 0 && azurerm_linux_function_app.this[0].app_settings["MIRROR_DEDUPLICATE"] == "false"
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
      azurerm_linux_function_app.this[0].app_settings["MIRROR_DEDUPLICATE"] == "true"
    )
    error_message = "With mirror_deduplicate the app's identity must hold Data Receiver and MIRROR_DEDUPLICATE must be true."
  }
}

# Issue 24, item 3: the app starts only after the wait that follows every
# role of its identity, the Data Receiver role included.
run "deduplication_role_is_waited_for" {
  variables {
    mirror_deduplicate = true
  }

  assert {
    condition     = time_sleep.function_app_roles.triggers["eventhubs_receiver"] == azurerm_role_assignment.function_app_receiver[0].id
    error_message = "With mirror_deduplicate the app's role wait must follow the Data Receiver assignment too."
  }
}
