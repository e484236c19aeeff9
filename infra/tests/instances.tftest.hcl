# Issue 25, item 4: var.instances function apps on one Kafka consumer group.

mock_provider "azurerm" {
  source = "./tests/mocks"
}

mock_provider "time" {}

variables {
  alert_action_group_ids = ["/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ops/providers/Microsoft.Insights/actionGroups/ag-ops"]
  location               = "westeurope"
  name_suffix            = "t25"
  kafka_brokers          = ["10.0.0.4:9092"]
  kafka_sasl_username    = "mirror-user"
  kafka_sasl_password    = "a-secret"
  # The deployers (Key Vault, package and Capture roles), independent of
  # the caller (the mock client config's object ID ends in "de").
  deployer_object_ids = ["00000000-0000-0000-0000-0000000000de"]
}

# The default is one app with the name it had before var.instances (the
# moved block in instances.tf keeps an existing app in the state).
run "one_app_by_default_keeps_its_name" {
  assert {
    condition = (
      length(azurerm_linux_function_app.this) == 1 &&
      azurerm_linux_function_app.this[0].name == "func-ehmirror-prod-t25" &&
      !contains(keys(azurerm_linux_function_app.this[0].app_settings), "AzureFunctionsWebHost__hostid") &&
      length(output.function_apps) == 1 && output.function_apps[0].name == output.function_app_name
    )
    error_message = "One app by default, named func-<prefix>-<environment>-<suffix>, with the host's default ID, listed in function_apps."
  }
}

run "three_apps_share_one_consumer_group" {
  variables {
    instances   = 3
    kafka_group = "mirror-prod"
  }

  assert {
    condition     = [for app in azurerm_linux_function_app.this : app.name] == ["func-ehmirror-prod-t25", "func-ehmirror-prod-t25-2", "func-ehmirror-prod-t25-3"]
    error_message = "instances = 3 must deploy three apps: <name>, <name>-2, <name>-3."
  }

  assert {
    condition     = alltrue([for app in azurerm_linux_function_app.this : app.app_settings["KAFKA_GROUP"] == "mirror-prod" && app.service_plan_id == azurerm_service_plan.this.id])
    error_message = "Every app must join the same Kafka consumer group on the one plan."
  }

  assert {
    condition = alltrue([
      for app in azurerm_linux_function_app.this :
      tolist(app.identity[0].identity_ids) == tolist([azurerm_user_assigned_identity.function_app.id]) &&
      app.key_vault_reference_identity_id == azurerm_user_assigned_identity.function_app.id &&
      app.app_settings["EVENTHUBS__clientId"] == azurerm_user_assigned_identity.function_app.client_id &&
      app.app_settings["AzureWebJobsStorage__clientId"] == azurerm_user_assigned_identity.function_app.client_id &&
      app.app_settings["AzureWebJobs.MirrorTimer.Disabled"] == "true"
    ])
    error_message = "Every app must use the one identity (roles granted once) and start with its timer disabled."
  }

  assert {
    condition = (
      length(distinct([for app in azurerm_linux_function_app.this : app.app_settings["WEBSITE_RUN_FROM_PACKAGE"]])) == 1 &&
      alltrue([for app in azurerm_linux_function_app.this : app.app_settings["WEBSITE_RUN_FROM_PACKAGE"] == output.function_package.url && app.content_share_force_disabled])
    )
    error_message = "Every app must run the one package from its blob (output function_package), without a content share."
  }

  assert {
    condition = (
      length(distinct(local.function_host_ids)) == 3 &&
      !contains(keys(azurerm_linux_function_app.this[0].app_settings), "AzureFunctionsWebHost__hostid") &&
      azurerm_linux_function_app.this[1].app_settings["AzureFunctionsWebHost__hostid"] == "func-ehmirror-prod-t25-2" &&
      azurerm_linux_function_app.this[2].app_settings["AzureFunctionsWebHost__hostid"] == "func-ehmirror-prod-t25-3"
    )
    error_message = "Every app must have a Functions host ID of its own (timer locks, keys), the first keeping its default."
  }

  assert {
    condition     = [for app in output.function_apps : app.name] == [for app in azurerm_linux_function_app.this : app.name] && length(azurerm_role_assignment.function_app) == 5
    error_message = "function_apps must list every app; the roles are granted once to the shared identity."
  }
}

# Every app writes to the one Application Insights. The alerts and the
# workbook must see each app: not_running checks every app by name, the
# alerts about drains group by app (one app's lag or backlog is not hidden
# by another's), and no query names one app without naming them all.
run "alerts_and_workbook_cover_every_app" {
  variables {
    instances = 3
  }

  assert {
    condition = alltrue([
      for app in azurerm_linux_function_app.this :
      strcontains(azurerm_monitor_scheduled_query_rules_alert_v2.this["not_running"].criteria[0].query, "\"${app.name}\"")
    ]) && strcontains(azurerm_monitor_scheduled_query_rules_alert_v2.this["not_running"].criteria[0].query, "| join kind=leftanti runs on app")
    error_message = "not_running must check each of the three apps for MirrorTimer runs (one row per app without any), not all runs together."
  }

  assert {
    condition = (
      strcontains(local.kql_drains, "app = take_anyif(AppRoleName, isnotempty(AppRoleName)) by Message") &&
      alltrue([
        for k in ["lag_growing", "stalled", "backlog_age"] :
        can(regex("\\| summarize [^\\n]* by app\\n", azurerm_monitor_scheduled_query_rules_alert_v2.this[k].criteria[0].query))
      ]) &&
      strcontains(azurerm_monitor_scheduled_query_rules_alert_v2.this["lag_growing"].criteria[0].query, "row_number(1, app != prev(app))")
    )
    error_message = "Drain lines must keep their app (AppRoleName), and lag_growing (each app's last N drains), stalled and backlog_age must summarize per app."
  }

  assert {
    condition = alltrue([
      for k, a in azurerm_monitor_scheduled_query_rules_alert_v2.this :
      !strcontains(a.criteria[0].query, "\"${azurerm_linux_function_app.this[0].name}\"") || alltrue([for app in azurerm_linux_function_app.this : strcontains(a.criteria[0].query, "\"${app.name}\"")])
    ])
    error_message = "An alert query that names the first app must name every app."
  }

  assert {
    condition = (
      alltrue([for app in azurerm_linux_function_app.this : strcontains(local.dashboard_queries.apps, "\"${app.name}\"")]) &&
      strcontains(local.dashboard_queries.lag_per_app, "by bin(TimeGenerated, 1m), app") &&
      strcontains(local.dashboard_queries.recent_drains, "| project TimeGenerated, app,") &&
      alltrue([
        for i in jsondecode(azurerm_application_insights_workbook.dashboard.data_json).items :
        !strcontains(i.content.query, "\"${azurerm_linux_function_app.this[0].name}\"") || alltrue([for app in azurerm_linux_function_app.this : strcontains(i.content.query, "\"${app.name}\"")])
        if i.type == 3
      ]) &&
      contains([for i in jsondecode(azurerm_application_insights_workbook.dashboard.data_json).items : i.name if i.type == 3], "apps")
    )
    error_message = "The workbook must list every app (runs, failures, drains), chart lag per app, show each drain's app, and name no single app."
  }
}

# Names longer than 32 characters: the default host IDs of <name> and
# <name>-2 would be the same; the explicit IDs differ and fit in 32.
run "long_names_get_distinct_host_ids" {
  variables {
    instances   = 2
    name_prefix = "mirrorprefix"
    environment = "staging1"
    name_suffix = "abcdefgh"
  }

  assert {
    condition = (
      substr(azurerm_linux_function_app.this[0].name, 0, 32) == substr(azurerm_linux_function_app.this[1].name, 0, 32) &&
      length(distinct(local.function_host_ids)) == 2 &&
      alltrue([for id in local.function_host_ids : length(id) <= 32 && !endswith(id, "-")])
    )
    error_message = "Apps whose names share their first 32 characters must still get distinct host IDs of at most 32 characters."
  }
}

run "instances_out_of_range" {
  command = plan

  variables {
    instances = 0
  }

  expect_failures = [var.instances]
}

run "instances_above_ten" {
  command = plan

  variables {
    instances = 11
  }

  expect_failures = [var.instances]
}

run "instances_not_whole" {
  command = plan

  variables {
    instances = 1.5
  }

  expect_failures = [var.instances]
}
