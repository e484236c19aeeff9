# Alerts and the dashboard (alerts.tf, dashboard.tf): each alert's query or
# metric, its threshold variables, the optional e-mail action group, and the
# workbook's charts.

mock_provider "azurerm" {
  source = "./tests/mocks"
}

mock_provider "time" {}

variables {
  # Alerts notify someone (check.alert_targets; monitoring.tftest.hcl
  # tests the warning without a target).
  alert_action_group_ids = ["/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ops/providers/Microsoft.Insights/actionGroups/ag-ops"]
  location               = "westeurope"
  name_suffix            = "t04"
  kafka_brokers          = ["broker-0.kafka.example.com:9093"]
  kafka_sasl_username    = "mirror-user"
  kafka_sasl_password    = "not-a-real-password"
  # The deployers (Key Vault, package and Capture roles), independent of
  # the caller (the mock client config's object ID ends in "de").
  deployer_object_ids = ["00000000-0000-0000-0000-0000000000de"]
}

run "log_alerts_query_the_workspace" {
  variables {
    alert_action_group_ids = []
  }

  expect_failures = [check.alert_targets]

  assert {
    condition     = sort(keys(azurerm_monitor_scheduled_query_rules_alert_v2.this)) == tolist(["backlog_age", "failed_runs", "gaps_oversized", "lag_growing", "not_running", "paused_too_long", "stalled"])
    error_message = "There must be a log alert for failed runs, a timer that does not run, gaps/oversized records, growing lag and lag without incoming messages."
  }

  assert {
    condition = alltrue([
      for a in azurerm_monitor_scheduled_query_rules_alert_v2.this :
      tolist(a.scopes) == tolist([azurerm_log_analytics_workspace.this.id]) && a.enabled && a.auto_mitigation_enabled &&
      a.criteria[0].time_aggregation_method == "Count" && a.criteria[0].operator == "GreaterThan"
    ])
    error_message = "Log alerts must query the workspace behind Application Insights and fire when the query returns more rows than the threshold."
  }

  assert {
    condition     = alltrue([for a in azurerm_monitor_scheduled_query_rules_alert_v2.this : length(a.action) == 0]) && length(azurerm_monitor_action_group.email) == 0
    error_message = "Without alert_email_addresses or alert_action_group_ids no action group is created or attached."
  }

  assert {
    condition     = azurerm_monitor_scheduled_query_rules_alert_v2.this["failed_runs"].name == "ehmirror-prod-failed-runs" && azurerm_monitor_scheduled_query_rules_alert_v2.this["failed_runs"].severity == 1
    error_message = "Alert rules must be named <prefix>-<environment>-<alert>; failures are severity 1."
  }
}

run "failed_runs_alert_counts_failed_mirror_timer_executions" {
  assert {
    condition = (
      strcontains(azurerm_monitor_scheduled_query_rules_alert_v2.this["failed_runs"].criteria[0].query, "AppRequests") &&
      strcontains(azurerm_monitor_scheduled_query_rules_alert_v2.this["failed_runs"].criteria[0].query, "Name == \"MirrorTimer\" and Success == false")
    )
    error_message = "The failed-runs alert must count failed MirrorTimer executions (AppRequests)."
  }

  assert {
    condition     = azurerm_monitor_scheduled_query_rules_alert_v2.this["failed_runs"].criteria[0].threshold == 0 && azurerm_monitor_scheduled_query_rules_alert_v2.this["failed_runs"].window_duration == "PT15M"
    error_message = "By default any failed execution in 15 minutes fires the alert."
  }
}

run "not_running_alert_fires_without_any_execution" {
  assert {
    condition = (
      strcontains(azurerm_monitor_scheduled_query_rules_alert_v2.this["not_running"].criteria[0].query, "where Name == \"MirrorTimer\"") &&
      strcontains(azurerm_monitor_scheduled_query_rules_alert_v2.this["not_running"].criteria[0].query, "summarize runs = count() by app = tolower(AppRoleName)") &&
      strcontains(azurerm_monitor_scheduled_query_rules_alert_v2.this["not_running"].criteria[0].query, "datatable(app: string)[\"func-ehmirror-prod-t04\"]\n| join kind=leftanti runs on app") &&
      azurerm_monitor_scheduled_query_rules_alert_v2.this["not_running"].window_duration == "PT15M"
    )
    error_message = "The not-running alert must fire when the app started no MirrorTimer execution in 15 minutes."
  }
}

run "drain_line_is_parsed_for_every_contract_key" {
  assert {
    condition = alltrue([
      for k in ["run", "trigger", "stopped", "records", "bytes", "lag", "partitions", "errors", "gaps", "oversized", "duration_ms", "budget_ms"] :
      strcontains(local.kql_drains, "(?:^|\\s)${k}=")
    ])
    error_message = "The drain-line query must extract every key of the structured drain line."
  }

  assert {
    condition     = strcontains(local.kql_drains, "AppTraces") && strcontains(local.kql_drains, "msg=drain") && strcontains(local.kql_drains, "summarize TimeGenerated = min(TimeGenerated), app = take_anyif(AppRoleName, isnotempty(AppRoleName)) by Message")
    error_message = "Drain lines come from AppTraces, selected by msg=drain, each line counted once."
  }
}

run "gaps_oversized_alert_reads_drain_counts_and_handler_lines" {
  assert {
    condition = (
      strcontains(azurerm_monitor_scheduled_query_rules_alert_v2.this["gaps_oversized"].criteria[0].query, "where gaps > 0 or oversized > 0") &&
      strcontains(azurerm_monitor_scheduled_query_rules_alert_v2.this["gaps_oversized"].criteria[0].query, "gap: |gap of |oversized record") &&
      azurerm_monitor_scheduled_query_rules_alert_v2.this["gaps_oversized"].criteria[0].threshold == 0
    )
    error_message = "The gap/oversized alert must fire on any drain with gaps or oversized records, or a handler line about one."
  }
}

run "lag_growing_alert_uses_the_last_n_drains" {
  assert {
    condition = (
      strcontains(azurerm_monitor_scheduled_query_rules_alert_v2.this["lag_growing"].criteria[0].query, "let n = 5;") &&
      strcontains(azurerm_monitor_scheduled_query_rules_alert_v2.this["lag_growing"].criteria[0].query, "where lag >= 0") &&
      strcontains(azurerm_monitor_scheduled_query_rules_alert_v2.this["lag_growing"].criteria[0].query, "| where nth <= n") &&
      strcontains(azurerm_monitor_scheduled_query_rules_alert_v2.this["lag_growing"].criteria[0].query, "where drains == n and increases == n - 1") &&
      azurerm_monitor_scheduled_query_rules_alert_v2.this["lag_growing"].window_duration == "PT1H"
    )
    error_message = "The lag alert must fire when lag (known, >= 0) grew in each of the last 5 drains within an hour."
  }
}

run "backlog_age_and_forgotten_pause_alerts_read_the_drain_line" {
  assert {
    condition = (
      strcontains(azurerm_monitor_scheduled_query_rules_alert_v2.this["backlog_age"].criteria[0].query, "min_age_ms = min(backlog_age_ms)") &&
      strcontains(azurerm_monitor_scheduled_query_rules_alert_v2.this["backlog_age"].criteria[0].query, "min_age_ms > 600000") &&
      strcontains(azurerm_monitor_scheduled_query_rules_alert_v2.this["paused_too_long"].criteria[0].query, "where paused_age_ms > 86400000") &&
      azurerm_monitor_scheduled_query_rules_alert_v2.this["paused_too_long"].severity == 3
    )
    error_message = "The backlog-age alert must fire when every drain's backlog_age_ms exceeds 10 minutes, and the pause alert when paused_age_ms exceeds 24 hours."
  }
}

run "stalled_alert_joins_lag_and_incoming_messages" {
  assert {
    condition = (
      strcontains(azurerm_monitor_scheduled_query_rules_alert_v2.this["stalled"].criteria[0].query, "AzureMetrics") &&
      strcontains(azurerm_monitor_scheduled_query_rules_alert_v2.this["stalled"].criteria[0].query, "MetricName == \"IncomingMessages\"") &&
      strcontains(azurerm_monitor_scheduled_query_rules_alert_v2.this["stalled"].criteria[0].query, lower(azurerm_eventhub_namespace.this.id)) &&
      strcontains(azurerm_monitor_scheduled_query_rules_alert_v2.this["stalled"].criteria[0].query, "min_lag > 0 and coalesce(incoming, 0.0) == 0") &&
      azurerm_monitor_scheduled_query_rules_alert_v2.this["stalled"].window_duration == "PT30M"
    )
    error_message = "The stalled alert must fire when every drain in 30 minutes reports lag > 0 while the namespace counts no IncomingMessages."
  }

  assert {
    condition = (
      azurerm_monitor_diagnostic_setting.eventhubs.target_resource_id == azurerm_eventhub_namespace.this.id &&
      azurerm_monitor_diagnostic_setting.eventhubs.log_analytics_workspace_id == azurerm_log_analytics_workspace.this.id &&
      [for m in azurerm_monitor_diagnostic_setting.eventhubs.enabled_metric : m.category] == ["AllMetrics"]
    )
    error_message = "The namespace's metrics must be exported to the workspace the stalled alert queries."
  }
}

run "throttling_alert_watches_the_namespace_metric" {
  assert {
    condition = (
      length(azurerm_monitor_metric_alert.throttled) == 1 &&
      tolist(azurerm_monitor_metric_alert.throttled[0].scopes) == tolist([azurerm_eventhub_namespace.this.id]) &&
      azurerm_monitor_metric_alert.throttled[0].criteria[0].metric_namespace == "Microsoft.EventHub/namespaces" &&
      azurerm_monitor_metric_alert.throttled[0].criteria[0].metric_name == "ThrottledRequests" &&
      azurerm_monitor_metric_alert.throttled[0].criteria[0].aggregation == "Total" &&
      azurerm_monitor_metric_alert.throttled[0].criteria[0].operator == "GreaterThan" &&
      azurerm_monitor_metric_alert.throttled[0].criteria[0].threshold == 0
    )
    error_message = "The throttling alert must fire on any Event Hubs ThrottledRequests of the namespace."
  }
}

# Issue 24, item 2: a rule created in the same apply as its workspace is
# intermittently refused ("The workspace could not be found") while Azure
# validates the query; the queries are compiled offline instead.
run "log_alerts_skip_query_validation_at_creation" {
  assert {
    condition     = alltrue([for a in azurerm_monitor_scheduled_query_rules_alert_v2.this : a.skip_query_validation == true])
    error_message = "Every log alert must set skip_query_validation (the workspace may not be queryable yet when the rule is created)."
  }
}

# Issue 24, item 6: Capture metrics never reach the workspace, so Capture
# is watched by a metric alert. Issue 44, item 8: it fires only when events
# arrived and nothing was captured over the window, both criteria at once
# (a backlog alone is normal on a busy namespace between Capture windows).
run "capture_alert_fires_when_nothing_is_captured_while_events_arrive" {
  assert {
    condition = (
      length(azurerm_monitor_metric_alert.capture_stopped) == 1 &&
      tolist(azurerm_monitor_metric_alert.capture_stopped[0].scopes) == tolist([azurerm_eventhub_namespace.this.id]) &&
      azurerm_monitor_metric_alert.capture_stopped[0].window_size == "PT1H" &&
      [for c in azurerm_monitor_metric_alert.capture_stopped[0].criteria : "${c.metric_namespace}/${c.metric_name} ${c.aggregation} ${c.operator} ${c.threshold}"] == [
        "Microsoft.EventHub/namespaces/IncomingMessages Total GreaterThan 0",
        "Microsoft.EventHub/namespaces/CapturedMessages Total LessThanOrEqual 0",
      ]
    )
    error_message = "The Capture alert must fire when IncomingMessages > 0 and CapturedMessages = 0 over an hour, and on nothing else."
  }

  assert {
    condition     = !anytrue([for c in azurerm_monitor_metric_alert.capture_stopped[0].criteria : c.metric_name == "CaptureBacklog"])
    error_message = "CaptureBacklog is above 0 between Capture windows on every busy namespace: it must not be alerted on."
  }
}

run "capture_alert_follows_its_window_and_action_groups" {
  variables {
    alert_capture_window   = "PT6H"
    alert_email_addresses  = ["oncall@example.com"]
    alert_action_group_ids = []
  }

  assert {
    condition = (
      azurerm_monitor_metric_alert.capture_stopped[0].window_size == "PT6H" &&
      [for a in azurerm_monitor_metric_alert.capture_stopped[0].action : a.action_group_id] == [azurerm_monitor_action_group.email[0].id]
    )
    error_message = "The Capture alert must follow alert_capture_window and notify the action groups."
  }
}

# A window no longer than Capture's longest time window (15 minutes) would
# fire between two healthy captures.
run "capture_alert_window_longer_than_capture" {
  command = plan

  variables {
    alert_capture_window = "PT15M"
  }

  expect_failures = [var.alert_capture_window]
}

# Issue 24, item 10: without an e-mail address or action group, every alert
# (several of severity 1) notifies nobody; every plan says so.
run "alerts_without_targets_warn_in_the_plan" {
  command = plan

  variables {
    alert_action_group_ids = []
  }

  expect_failures = [check.alert_targets]
}

run "alerts_with_a_target_do_not_warn" {
  command = plan

  variables {
    alert_action_group_ids = ["/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ops/providers/Microsoft.Insights/actionGroups/ag-ops"]
  }
}

run "thresholds_and_action_groups_follow_variables" {
  variables {
    alert_email_addresses              = ["oncall@example.com", "mirror-team@example.org"]
    alert_action_group_ids             = ["/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ops/providers/Microsoft.Insights/actionGroups/ag-oncall"]
    alert_failed_runs_threshold        = 2
    alert_failed_runs_window           = "PT30M"
    alert_lag_growth_drains            = 7
    alert_lag_growth_window            = "PT2H"
    alert_not_running_window           = "PT2H"
    alert_stalled_min_lag              = 1000
    alert_stalled_window               = "PT1H"
    alert_throttled_requests_threshold = 10
  }

  assert {
    condition = (
      length(azurerm_monitor_action_group.email) == 1 &&
      [for r in azurerm_monitor_action_group.email[0].email_receiver : r.email_address] == ["oncall@example.com", "mirror-team@example.org"]
    )
    error_message = "alert_email_addresses must create one action group with an e-mail receiver per address."
  }

  assert {
    condition = alltrue([
      for a in azurerm_monitor_scheduled_query_rules_alert_v2.this :
      toset(a.action[0].action_groups) == toset([azurerm_monitor_action_group.email[0].id, "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ops/providers/Microsoft.Insights/actionGroups/ag-oncall"])
    ])
    error_message = "Every log alert must notify the e-mail action group and the given action groups."
  }

  assert {
    condition     = toset([for a in azurerm_monitor_metric_alert.throttled[0].action : a.action_group_id]) == toset([azurerm_monitor_action_group.email[0].id, "/subscriptions/00000000-0000-0000-0000-000000000005/resourceGroups/rg-ops/providers/Microsoft.Insights/actionGroups/ag-oncall"])
    error_message = "The throttling alert must notify the same action groups."
  }

  assert {
    condition     = azurerm_monitor_scheduled_query_rules_alert_v2.this["failed_runs"].criteria[0].threshold == 2 && azurerm_monitor_scheduled_query_rules_alert_v2.this["failed_runs"].window_duration == "PT30M"
    error_message = "The failed-runs threshold and window must follow the variables."
  }

  assert {
    condition     = strcontains(azurerm_monitor_scheduled_query_rules_alert_v2.this["lag_growing"].criteria[0].query, "let n = 7;") && azurerm_monitor_scheduled_query_rules_alert_v2.this["lag_growing"].window_duration == "PT2H"
    error_message = "The lag alert's number of drains and window must follow the variables."
  }

  assert {
    condition     = strcontains(azurerm_monitor_scheduled_query_rules_alert_v2.this["stalled"].criteria[0].query, "min_lag > 1000 and") && azurerm_monitor_scheduled_query_rules_alert_v2.this["stalled"].window_duration == "PT1H"
    error_message = "The stalled alert's lag threshold and window must follow the variables."
  }

  assert {
    condition     = azurerm_monitor_scheduled_query_rules_alert_v2.this["not_running"].window_duration == "PT2H"
    error_message = "The not-running window must follow alert_not_running_window."
  }

  assert {
    condition     = azurerm_monitor_metric_alert.throttled[0].criteria[0].threshold == 10
    error_message = "The throttling threshold must follow alert_throttled_requests_threshold."
  }
}

run "alerts_can_be_turned_off" {
  variables {
    alerts_enabled = false
  }

  assert {
    condition     = length(azurerm_monitor_scheduled_query_rules_alert_v2.this) == 0 && length(azurerm_monitor_metric_alert.throttled) == 0 && length(azurerm_monitor_metric_alert.capture_stopped) == 0
    error_message = "alerts_enabled = false must create no alert rule."
  }
}

run "dashboard_charts_what_operators_watch" {
  assert {
    condition     = azurerm_application_insights_workbook.dashboard.source_id == lower(azurerm_application_insights.this.id) && azurerm_application_insights_workbook.dashboard.category == "workbook"
    error_message = "The dashboard must be a workbook of the mirror's Application Insights."
  }

  assert {
    condition     = can(regex("^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$", azurerm_application_insights_workbook.dashboard.name))
    error_message = "The workbook's name must be a stable GUID."
  }

  assert {
    condition = toset([for i in jsondecode(azurerm_application_insights_workbook.dashboard.data_json).items : i.name]) == toset([
      "intro", "parameters", "apps", "throughput", "lag_per_app", "lag_per_topic", "duration", "failures", "eventhubs", "throttling", "recent_drains",
    ])
    error_message = "The dashboard must list the apps, chart throughput, lag (per app and per topic), drain duration, failures, Event Hubs traffic and throttling, and list recent drains."
  }

  assert {
    condition = alltrue([
      for i in jsondecode(azurerm_application_insights_workbook.dashboard.data_json).items :
      i.content.crossComponentResources == [azurerm_log_analytics_workspace.this.id] && i.content.timeContextFromParameter == "TimeRange" if i.type == 3
    ])
    error_message = "Every dashboard query must read the workspace and follow the time range parameter."
  }

  assert {
    condition = (
      strcontains(local.dashboard_queries.throughput, "records = sum(records)") && strcontains(local.dashboard_queries.throughput, "sum(bytes)") && strcontains(local.dashboard_queries.throughput, "bin(TimeGenerated, 1m)") &&
      strcontains(local.dashboard_queries.lag_per_app, "lag = max(lag) by bin(TimeGenerated, 1m), app") &&
      strcontains(local.dashboard_queries.lag_per_topic, "summarize lag = sum(lag) by topic") &&
      strcontains(local.dashboard_queries.failures, "countif(Success == false)") && strcontains(local.dashboard_queries.failures, "sum(errors)")
    )
    error_message = "The charts must show records/bytes per minute, lag per app and per topic, and failures."
  }

  assert {
    condition     = local.function_timeout_ms == 600000 && strcontains(local.dashboard_queries.duration, "function_timeout_ms = 600000") && strcontains(local.dashboard_queries.duration, "budget_ms = max(budget_ms)")
    error_message = "Drain duration must be charted against the drain budget and host.json's functionTimeout (10 minutes)."
  }

  assert {
    condition = (
      [for i in jsondecode(azurerm_application_insights_workbook.dashboard.data_json).items : i.content.metrics[0].metric if i.name == "throttling"] == ["microsoft.eventhub/namespaces--ThrottledRequests"] &&
      [for i in jsondecode(azurerm_application_insights_workbook.dashboard.data_json).items : i.content.resourceIds if i.type == 10] == [[azurerm_eventhub_namespace.this.id], [azurerm_eventhub_namespace.this.id]]
    )
    error_message = "Throttling must be charted from the namespace's ThrottledRequests metric."
  }
}

run "alert_variables_reject_bad_input" {
  command = plan

  variables {
    alert_email_addresses   = ["not-an-address"]
    alert_action_group_ids  = ["ag-oncall"]
    alert_lag_growth_drains = 1
    alert_stalled_window    = "PT5M"
  }

  expect_failures = [
    var.alert_email_addresses,
    var.alert_action_group_ids,
    var.alert_lag_growth_drains,
    var.alert_stalled_window,
  ]
}
