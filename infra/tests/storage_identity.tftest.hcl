# Issue 24, item 7: no app setting carries the function storage account's
# key. AzureWebJobsStorage is identity-based (the host's roles on the app's
# own account, waited for like the others). Issue 44, item 1: no Azure Files
# content share at all; the app runs its package from a blob read with its
# identity, so a first deploy cannot lose it on an unmounted share, the
# create resolves no Key Vault reference (error 04603), and no key exists.

mock_provider "azurerm" {
  source = "./tests/mocks"
}

mock_provider "time" {}

override_resource {
  target = azurerm_storage_account.function
  values = {
    id                        = "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ehmirror-test/providers/Microsoft.Storage/storageAccounts/stfunction"
    primary_access_key        = "ZnVuY3Rpb24ta2V5"
    primary_connection_string = "DefaultEndpointsProtocol=https;AccountName=stfunction;AccountKey=ZnVuY3Rpb24ta2V5;EndpointSuffix=core.windows.net"
    primary_blob_endpoint     = "https://stfunction.blob.core.windows.net/"
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
  name_suffix            = "t07"
  kafka_brokers          = ["10.0.0.4:9092"]
  kafka_sasl_username    = "mirror-user"
  kafka_sasl_password    = "a-secret"
  # The deployers (Key Vault, package and Capture roles), independent of
  # the caller (the mock client config's object ID ends in "de").
  deployer_object_ids = ["00000000-0000-0000-0000-0000000000de"]
}

run "no_app_setting_carries_an_account_key" {
  assert {
    condition = alltrue([
      for k, v in azurerm_linux_function_app.this[0].app_settings :
      !strcontains(v, "AccountKey=") && !strcontains(v, "ZnVuY3Rpb24ta2V5")
    ])
    error_message = "An app setting holds the function storage account's key or connection string."
  }

  assert {
    condition     = azurerm_linux_function_app.this[0].storage_account_access_key == null && azurerm_linux_function_app.this[0].storage_key_vault_secret_id == null
    error_message = "The app must not pass the storage account key to the provider (it writes it into AzureWebJobsStorage)."
  }

  assert {
    condition = (
      azurerm_linux_function_app.this[0].storage_uses_managed_identity &&
      azurerm_linux_function_app.this[0].storage_account_name == azurerm_storage_account.function.name &&
      !contains(keys(azurerm_linux_function_app.this[0].app_settings), "AzureWebJobsStorage") &&
      azurerm_linux_function_app.this[0].app_settings["AzureWebJobsStorage__credential"] == "managedidentity" &&
      azurerm_linux_function_app.this[0].app_settings["AzureWebJobsStorage__clientId"] == azurerm_user_assigned_identity.function_app.client_id
    )
    error_message = "AzureWebJobsStorage must be identity-based (storage_uses_managed_identity -> __accountName) with the app's user-assigned identity (__credential, __clientId)."
  }

  assert {
    condition = (
      azurerm_linux_function_app.this[0].content_share_force_disabled &&
      length([for k in keys(azurerm_linux_function_app.this[0].app_settings) : k if startswith(k, "WEBSITE_CONTENT") || k == "WEBSITE_SKIP_CONTENTSHARE_VALIDATION"]) == 0 &&
      length([for s in azurerm_key_vault_secret.kafka : s if strcontains(s.name, "content")]) == 0
    )
    error_message = "The app must have no Azure Files content share (no WEBSITE_CONTENT* setting, content_share_force_disabled) and no Key Vault secret for one."
  }

  assert {
    condition = (
      azurerm_linux_function_app.this[0].app_settings["WEBSITE_RUN_FROM_PACKAGE"] == "https://stfunction.blob.core.windows.net/function-packages/ehmirror-functionapp.zip" &&
      azurerm_linux_function_app.this[0].app_settings["WEBSITE_RUN_FROM_PACKAGE_BLOB_MI_RESOURCE_ID"] == azurerm_user_assigned_identity.function_app.id &&
      azurerm_storage_container.packages.storage_account_id == azurerm_storage_account.function.id &&
      azurerm_storage_container.packages.container_access_type == "private" &&
      output.function_package.url == azurerm_linux_function_app.this[0].app_settings["WEBSITE_RUN_FROM_PACKAGE"] &&
      output.function_package.container_name == "function-packages" &&
      output.function_package.blob_name == "ehmirror-functionapp.zip"
    )
    error_message = "The app must run its package from the private blob function-packages/ehmirror-functionapp.zip (output function_package, which deploy.sh uploads), read with its user-assigned identity."
  }

  assert {
    condition     = !azurerm_storage_account.function.shared_access_key_enabled
    error_message = "Nothing uses the function storage account's key: Shared Key must be off."
  }
}

run "host_storage_roles_on_the_app_account" {
  assert {
    condition = toset([
      for ra in values(azurerm_role_assignment.function_app) : ra.role_definition_name
      if ra.scope == azurerm_storage_account.function.id && ra.principal_id == azurerm_user_assigned_identity.function_app.principal_id && ra.principal_type == "ServicePrincipal"
    ]) == toset(["Storage Blob Data Owner", "Storage Queue Data Contributor", "Storage Table Data Contributor"])
    error_message = "The app's identity must hold Storage Blob Data Owner, Storage Queue Data Contributor and Storage Table Data Contributor on the function storage account."
  }

  assert {
    condition = alltrue([
      for ra in values(azurerm_role_assignment.function_app) :
      ra.scope != azurerm_storage_account.capture.id && !endswith(ra.scope, "/resourceGroups/rg-ehmirror-test")
    ])
    error_message = "The host's storage roles must be scoped to the function storage account only."
  }

  # The app starts after the wait that follows its storage roles too.
  assert {
    condition = alltrue([
      for name in ["host_storage_blob", "host_storage_queue", "host_storage_table"] :
      time_sleep.function_app_roles.triggers[name] == azurerm_role_assignment.function_app[name].id
    ])
    error_message = "time_sleep.function_app_roles must follow the host's storage role assignments."
  }
}

run "additional_settings_cannot_bring_back_the_key" {
  command = plan

  variables {
    additional_app_settings = { AzureWebJobsStorage = "DefaultEndpointsProtocol=https;AccountName=x;AccountKey=eA==" }
  }

  expect_failures = [var.additional_app_settings]
}

# A content share (or another package) through additional_app_settings
# would bring back the first deploy's lost package and the key.
run "additional_settings_cannot_bring_back_a_content_share" {
  command = plan

  variables {
    additional_app_settings = { WEBSITE_CONTENTAZUREFILECONNECTIONSTRING = "@Microsoft.KeyVault(SecretUri=https://kv/secrets/content/)", WEBSITE_RUN_FROM_PACKAGE = "1" }
  }

  expect_failures = [var.additional_app_settings]
}
