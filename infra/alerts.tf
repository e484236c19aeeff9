# Azure Monitor alerts on the mirror. Log alerts query the Log Analytics
# workspace behind Application Insights: AppRequests (one row per function
# execution), AppTraces (the handler's stdout, one row per line) and
# AzureMetrics (the namespace's platform metrics, exported by the diagnostic
# setting below).
#
# The handler logs one structured line per drain (log/slog text format):
#   time=… level=INFO msg=drain run=… trigger=timer|catchup records=N bytes=N
#   lag=N|-1 partitions=N errors=N gaps=N oversized=N duration_ms=N
#   budget_ms=N stopped=… throttled=N backlog_age_ms=N … paused_age_ms=N
# local.kql_drains turns those lines into rows with one column per key
# (lag -1 = unknown). Stdout lines can reach the workspace twice (console
# and invocation logs), so identical lines are counted once.
#
# With var.instances > 1 every app writes to the one Application Insights,
# and each drain line's lag, backlog age and so on are those of the
# partitions that app owns. The column app (AppRoleName: the Functions host
# reports the app's site name, lower-cased here) keeps the apps apart:
# an alert about one app's drains or runs groups by app, so that one app that
# stopped, stalls or falls behind is not hidden by the others, and
# not_running checks each app of local.function_app_names.

locals {
  kql_drains = <<-KQL
    AppTraces
    | where Message contains "msg=drain"
    | where Message matches regex @'(^|\s)msg=drain(\s|$)'
    | summarize TimeGenerated = min(TimeGenerated), app = take_anyif(AppRoleName, isnotempty(AppRoleName)) by Message
    | extend app = tolower(app),
        run = trim(@'"', extract(@'(?:^|\s)run=("[^"]*"|\S*)', 1, Message)),
        trigger = trim(@'"', extract(@'(?:^|\s)trigger=("[^"]*"|\S*)', 1, Message)),
        stopped = trim(@'"', extract(@'(?:^|\s)stopped=("[^"]*"|\S*)', 1, Message)),
        records = tolong(extract(@'(?:^|\s)records=(-?\d+)', 1, Message)),
        bytes = tolong(extract(@'(?:^|\s)bytes=(-?\d+)', 1, Message)),
        lag = tolong(extract(@'(?:^|\s)lag=(-?\d+)', 1, Message)),
        partitions = tolong(extract(@'(?:^|\s)partitions=(-?\d+)', 1, Message)),
        errors = tolong(extract(@'(?:^|\s)errors=(-?\d+)', 1, Message)),
        gaps = tolong(extract(@'(?:^|\s)gaps=(-?\d+)', 1, Message)),
        oversized = tolong(extract(@'(?:^|\s)oversized=(-?\d+)', 1, Message)),
        duration_ms = tolong(extract(@'(?:^|\s)duration_ms=(-?\d+)', 1, Message)),
        budget_ms = tolong(extract(@'(?:^|\s)budget_ms=(-?\d+)', 1, Message)),
        throttled = tolong(extract(@'(?:^|\s)throttled=(-?\d+)', 1, Message)),
        backlog_age_ms = tolong(extract(@'(?:^|\s)backlog_age_ms=(-?\d+)', 1, Message)),
        paused_age_ms = tolong(extract(@'(?:^|\s)paused_age_ms=(-?\d+)', 1, Message))
  KQL

  # Event Hubs platform metrics in the workspace. The table appears with the
  # first export; a fuzzy union with an empty table keeps the query valid
  # before that.
  kql_namespace_metrics = <<-KQL
    union isfuzzy=true
        (datatable(TimeGenerated: datetime, _ResourceId: string, MetricName: string, Total: real)[]),
        (AzureMetrics)
    | where _ResourceId =~ "${lower(azurerm_eventhub_namespace.this.id)}"
  KQL

  # The apps that must run: a KQL table with one column, app.
  kql_function_apps = "datatable(app: string)${jsonencode([for name in local.function_app_names : lower(name)])}"

  alert_queries = {
    # Failed executions of the timer function (the handler answers non-2xx
    # when records could not be mirrored; timeouts count too).
    failed_runs = <<-KQL
      AppRequests
      | where Name == "MirrorTimer" and Success == false
      | project TimeGenerated, app = tolower(AppRoleName), Name, ResultCode, OperationId
    KQL

    # An app without any execution of the timer function: its host is down,
    # cannot start the handler, or its schedule is off. One row per such app
    # (every app of var.instances is checked, not only the first).
    not_running = <<-KQL
      let runs = AppRequests
      | where Name == "MirrorTimer"
      | summarize runs = count() by app = tolower(AppRoleName);
      ${local.kql_function_apps}
      | join kind=leftanti runs on app
    KQL

    # Drains that met a gap (records removed by retention before they were
    # mirrored) or an oversized record, and the handler's own lines about them.
    gaps_oversized = <<-KQL
      let drains = ${local.kql_drains}
      | where gaps > 0 or oversized > 0
      | project TimeGenerated, app, Message;
      let lines = AppTraces
      | where Message has_any ("gap", "oversized")
      | where Message matches regex @'(gap: |gap of |oversized record)'
      | summarize TimeGenerated = min(TimeGenerated), app = tolower(take_anyif(AppRoleName, isnotempty(AppRoleName))) by Message;
      union drains, lines
    KQL

    # An app's last N drains that knew their lag, each with more lag than the
    # one before: that app falls behind. Per app: the apps' lags are those of
    # different partitions, and interleaved they rise and fall.
    lag_growing = <<-KQL
      let n = ${var.alert_lag_growth_drains};
      ${local.kql_drains}
      | where lag >= 0
      | order by app asc, TimeGenerated desc
      | extend nth = row_number(1, app != prev(app))
      | where nth <= n
      | order by app asc, TimeGenerated asc
      | extend grew = iff(app == prev(app) and lag > prev(lag), 1, 0)
      | summarize drains = count(), increases = sum(grew), first_lag = min(lag), last_lag = max(lag) by app
      | where drains == n and increases == n - 1
    KQL

    # An app's drains report lag above the threshold for the whole window
    # while Event Hubs counts no incoming message: nothing is being mirrored.
    # (Incoming messages are the namespace's, of every app: an app that
    # stalls while another one sends shows in backlog_age.)
    stalled = <<-KQL
      let incoming = toscalar(${local.kql_namespace_metrics}
      | where MetricName == "IncomingMessages"
      | summarize sum(Total));
      ${local.kql_drains}
      | where lag >= 0
      | summarize drains = count(), min_lag = min(lag), max_lag = max(lag) by app
      | where drains > 0 and min_lag > ${var.alert_stalled_min_lag} and coalesce(incoming, 0.0) == 0
    KQL

    # Every drain of an app in the window left a record older than the
    # threshold unmirrored: records wait (the drain line's backlog_age_ms).
    backlog_age = <<-KQL
      ${local.kql_drains}
      | summarize drains = count(), min_age_ms = min(backlog_age_ms) by app
      | where drains > 0 and min_age_ms > ${var.alert_backlog_age_minutes * 60000}
    KQL

    # A topic paused for longer than the threshold (a forgotten pause: its
    # records wait in Kafka and nothing else reports it).
    paused_too_long = <<-KQL
      ${local.kql_drains}
      | where paused_age_ms > ${var.alert_paused_hours * 3600000}
      | project TimeGenerated, app, Message
    KQL
  }

  alert_action_group_ids = concat(azurerm_monitor_action_group.email[*].id, var.alert_action_group_ids)
}

resource "azurerm_monitor_action_group" "email" {
  count = length(var.alert_email_addresses) > 0 ? 1 : 0

  name                = local.names.action_group
  resource_group_name = local.resource_group.name
  short_name          = "ehmirror"

  dynamic "email_receiver" {
    for_each = var.alert_email_addresses
    content {
      name                    = "email-${email_receiver.key}"
      email_address           = email_receiver.value
      use_common_alert_schema = true
    }
  }

  tags = local.tags
}

# Event Hubs metrics into the workspace, for the "no incoming messages while
# lag > 0" alert and the dashboard.
resource "azurerm_monitor_diagnostic_setting" "eventhubs" {
  name                       = "ehmirror-metrics"
  target_resource_id         = azurerm_eventhub_namespace.this.id
  log_analytics_workspace_id = azurerm_log_analytics_workspace.this.id

  enabled_metric {
    category = "AllMetrics"
  }
}

resource "azurerm_monitor_scheduled_query_rules_alert_v2" "this" {
  for_each = var.alerts_enabled ? {
    failed_runs = {
      display_name = "ehmirror: MirrorTimer executions failed"
      description  = "MirrorTimer executions failed (records could not be mirrored, or the run timed out). See the drain's log lines and /api/status."
      severity     = 1
      frequency    = "PT5M"
      window       = var.alert_failed_runs_window
      threshold    = var.alert_failed_runs_threshold
    }
    not_running = {
      display_name = "ehmirror: MirrorTimer not running"
      description  = "A function app (of var.instances: each is checked) had no MirrorTimer execution in the window: it is stopped, its host cannot start the handler, or MIRROR_SCHEDULE runs less often than alert_not_running_window. The query's rows name the apps."
      severity     = 1
      frequency    = "PT5M"
      window       = var.alert_not_running_window
      threshold    = 0
    }
    gaps_oversized = {
      display_name = "ehmirror: gap or oversized record"
      description  = "A drain met a gap (records removed by Kafka retention before they were mirrored) or a record larger than Event Hubs accepts. Under the default policies the partition stops; see MIRROR_GAP_POLICY / MIRROR_OVERSIZE_POLICY."
      severity     = 1
      frequency    = "PT5M"
      window       = "PT15M"
      threshold    = 0
    }
    lag_growing = {
      display_name = "ehmirror: lag growing"
      description  = "A function app's Kafka lag (its partitions) grew in each of its last ${var.alert_lag_growth_drains} drains: the mirror falls behind (raise MIRROR_MAX_* or Event Hubs throughput units, or start a catch-up)."
      severity     = 2
      frequency    = "PT5M"
      window       = var.alert_lag_growth_window
      threshold    = 0
    }
    backlog_age = {
      display_name = "ehmirror: records wait too long"
      description  = "Every drain of a function app in the window left a record older than ${var.alert_backlog_age_minutes} minutes unmirrored (backlog_age_ms): Event Hubs or Kafka unreachable, throttling, or drains too short. See that app's /api/status."
      severity     = 2
      frequency    = "PT5M"
      window       = "PT15M"
      threshold    = 0
    }
    paused_too_long = {
      display_name = "ehmirror: topic paused too long"
      description  = "A topic has been paused for more than ${var.alert_paused_hours} hours (paused_age_ms): resume it with POST /api/resume if the pause was forgotten."
      severity     = 3
      frequency    = "PT1H"
      window       = "PT1H"
      threshold    = 0
    }
    stalled = {
      display_name = "ehmirror: lag but no incoming messages"
      description  = "A function app's drains report lag above ${var.alert_stalled_min_lag} but the Event Hubs namespace received no message in the window: nothing is being mirrored."
      severity     = 1
      frequency    = "PT5M"
      window       = var.alert_stalled_window
      threshold    = 0
    }
  } : {}

  name                = "${local.base}-${replace(each.key, "_", "-")}"
  display_name        = each.value.display_name
  description         = each.value.description
  resource_group_name = local.resource_group.name
  location            = var.location
  scopes              = [azurerm_log_analytics_workspace.this.id]
  severity            = each.value.severity

  enabled              = true
  evaluation_frequency = each.value.frequency
  # Azure validates a query against the workspace when the rule is created,
  # and a workspace created in the same apply is intermittently "not found"
  # then (azurerm issues #17145, #21281). The queries are compiled offline
  # against the tables' schemas (scripts/kqlcheck), so skip that check.
  skip_query_validation   = true
  window_duration         = each.value.window
  auto_mitigation_enabled = true

  criteria {
    query                   = local.alert_queries[each.key]
    time_aggregation_method = "Count"
    operator                = "GreaterThan"
    threshold               = each.value.threshold

    failing_periods {
      minimum_failing_periods_to_trigger_alert = 1
      number_of_evaluation_periods             = 1
    }
  }

  dynamic "action" {
    for_each = length(local.alert_action_group_ids) > 0 ? [1] : []
    content {
      action_groups = local.alert_action_group_ids
    }
  }

  tags = local.tags

  # The query reads the namespace's metrics once they are exported.
  depends_on = [azurerm_monitor_diagnostic_setting.eventhubs, azurerm_application_insights.this]
}

# Capture metrics cannot be exported to the workspace, so no log alert sees
# a Capture that stopped writing (lost access to the storage account, the
# container deleted): a metric alert on the namespace. It fires only when
# events arrived and nothing was captured over the window. A backlog alone
# (CaptureBacklog) is normal on a busy namespace: Capture writes each time
# window (up to 15 minutes), and in between the backlog is never 0.
resource "azurerm_monitor_metric_alert" "capture_stopped" {
  count = var.alerts_enabled ? 1 : 0

  name                = "${local.base}-capture-stopped"
  description         = "Event Hubs received events but Capture wrote none for ${var.alert_capture_window} (IncomingMessages > 0 and CapturedMessages = 0): Capture is not writing. Check the namespace identity's access to the capture storage account (Storage Blob Data Contributor), the container, and the account's firewall (trusted services)."
  resource_group_name = local.resource_group.name
  scopes              = [azurerm_eventhub_namespace.this.id]
  severity            = 2
  frequency           = "PT15M"
  window_size         = var.alert_capture_window
  auto_mitigate       = true

  # Both criteria must hold (a metric alert ANDs its criteria).
  criteria {
    metric_namespace = "Microsoft.EventHub/namespaces"
    metric_name      = "IncomingMessages"
    aggregation      = "Total"
    operator         = "GreaterThan"
    threshold        = 0
  }
  criteria {
    metric_namespace = "Microsoft.EventHub/namespaces"
    metric_name      = "CapturedMessages"
    aggregation      = "Total"
    operator         = "LessThanOrEqual"
    threshold        = 0
  }

  dynamic "action" {
    for_each = local.alert_action_group_ids
    content {
      action_group_id = action.value
    }
  }

  tags = local.tags
}

# The alert that fired on every busy hour is replaced, not kept.
moved {
  from = azurerm_monitor_metric_alert.capture_backlog
  to   = azurerm_monitor_metric_alert.capture_stopped
}

# Alerts that notify nobody are easy to miss: say so in every plan.
check "alert_targets" {
  assert {
    condition     = !var.alerts_enabled || length(local.alert_action_group_ids) > 0
    error_message = "The alerts (severity 1: failed runs, timer not running, gaps, stalled) notify NOBODY: set alert_email_addresses or alert_action_group_ids, or alerts_enabled = false."
  }
}

resource "azurerm_monitor_metric_alert" "throttled" {
  count = var.alerts_enabled ? 1 : 0

  name                = "${local.base}-eventhubs-throttled"
  description         = "Event Hubs throttled requests (ServerBusy): the namespace's throughput units are exhausted. Raise eventhubs_capacity or enable auto-inflate."
  resource_group_name = local.resource_group.name
  scopes              = [azurerm_eventhub_namespace.this.id]
  severity            = 2
  frequency           = "PT1M"
  window_size         = "PT5M"
  auto_mitigate       = true

  criteria {
    metric_namespace = "Microsoft.EventHub/namespaces"
    metric_name      = "ThrottledRequests"
    aggregation      = "Total"
    operator         = "GreaterThan"
    threshold        = var.alert_throttled_requests_threshold
  }

  dynamic "action" {
    for_each = local.alert_action_group_ids
    content {
      action_group_id = action.value
    }
  }

  tags = local.tags
}
