# The mirror's dashboard: an Application Insights workbook ("ehmirror" in the
# Application Insights resource's Workbooks, or Azure Monitor > Workbooks)
# with what operators look at instead of reading logs: every function app
# (var.instances) with its runs, failures and last drain, records and bytes
# mirrored per minute, lag (per app and per topic), drain duration against
# the drain budget and host.json's functionTimeout, failures, gaps and
# oversized records, and Event Hubs throughput and throttling. The queries
# read every app's rows (app = AppRoleName, alerts.tf); none names one app.

locals {
  # host.json's functionTimeout ("hh:mm:ss"), the hard limit of one drain.
  function_timeout_parts = [for p in split(":", jsondecode(file("${path.module}/../host.json")).functionTimeout) : tonumber(p)]
  function_timeout_ms    = floor((local.function_timeout_parts[0] * 3600 + local.function_timeout_parts[1] * 60 + local.function_timeout_parts[2]) * 1000)

  dashboard_queries = {
    # One row per app of var.instances, also for an app without any run or
    # drain in the time range (its columns are then empty).
    apps = <<-KQL
      let runs = AppRequests
      | where Name == "MirrorTimer"
      | summarize runs = count(), failed_runs = countif(Success == false), last_run = max(TimeGenerated) by app = tolower(AppRoleName);
      let drains = ${local.kql_drains}
      | summarize drains = count(), records = sum(records), last_drain = max(TimeGenerated), max_lag = max(lag) by app;
      ${local.kql_function_apps}
      | lookup kind=leftouter runs on app
      | lookup kind=leftouter drains on app
      | project app, runs, failed_runs, last_run, drains, records, max_lag, last_drain
      | order by app asc
    KQL

    throughput = <<-KQL
      ${local.kql_drains}
      | summarize records = sum(records), MiB = round(sum(bytes) / 1048576.0, 3) by bin(TimeGenerated, 1m)
      | order by TimeGenerated asc
    KQL

    # One series per app: each app's lag is that of the partitions it owns.
    lag_per_app = <<-KQL
      ${local.kql_drains}
      | where lag >= 0
      | summarize lag = max(lag) by bin(TimeGenerated, 1m), app
      | order by TimeGenerated asc
    KQL

    # Per topic from the per-partition report lines
    # ("<topic>/<partition> -> <hub>: N records (…), committed C, lag A -> B"),
    # which the handler logs for every partition that had work or a problem.
    lag_per_topic = <<-KQL
      AppTraces
      | where Message contains " records (" and Message contains ", lag "
      | extend topic = extract(@'([A-Za-z0-9._-]+)/\d+ -> [^:]+: \d+ records', 1, Message),
          partition = toint(extract(@'[A-Za-z0-9._-]+/(\d+) -> [^:]+: \d+ records', 1, Message)),
          lag = tolong(extract(@', lag -?\d+ -> (-?\d+)', 1, Message))
      | where isnotempty(topic) and isnotnull(lag) and lag >= 0
      | summarize lag = max(lag) by topic, partition, TimeGenerated = bin(TimeGenerated, 5m)
      | summarize lag = sum(lag) by topic, TimeGenerated
      | order by TimeGenerated asc
    KQL

    duration = <<-KQL
      ${local.kql_drains}
      | summarize duration_ms = max(duration_ms), budget_ms = max(budget_ms) by bin(TimeGenerated, 1m)
      | extend function_timeout_ms = ${local.function_timeout_ms}
      | order by TimeGenerated asc
    KQL

    failures = <<-KQL
      let runs = AppRequests
      | where Name == "MirrorTimer"
      | summarize failed_runs = countif(Success == false) by bin(TimeGenerated, 5m);
      let drains = ${local.kql_drains}
      | summarize drain_errors = sum(errors), gaps = sum(gaps), oversized = sum(oversized) by bin(TimeGenerated, 5m);
      runs
      | join kind=fullouter drains on TimeGenerated
      | project TimeGenerated = coalesce(TimeGenerated, TimeGenerated1), failed_runs = coalesce(failed_runs, 0), drain_errors = coalesce(drain_errors, 0), gaps = coalesce(gaps, 0), oversized = coalesce(oversized, 0)
      | order by TimeGenerated asc
    KQL

    recent_drains = <<-KQL
      ${local.kql_drains}
      | project TimeGenerated, app, run, trigger, records, bytes, lag, partitions, errors, gaps, oversized, duration_ms, budget_ms, stopped
      | order by TimeGenerated desc
      | take 50
    KQL
  }

  dashboard_items = [
    {
      type = 1
      name = "intro"
      content = {
        json = "## ehmirror: Kafka → Event Hubs mirror\nOne row per drain comes from the handler's `msg=drain` log line, from each of the ${var.instances} function app(s) (column `app`). Lag is the number of Kafka records not yet mirrored (after each drain) on the partitions that app owns. A drain must end within its budget (`MIRROR_MAX_DURATION`); host.json's `functionTimeout` (${local.function_timeout_ms / 60000} min) kills the handler. Alerts: Azure Monitor > Alerts, rules `${local.base}-*`."
      }
    },
    {
      type = 9
      name = "parameters"
      content = {
        version = "KqlParameterItem/1.0"
        style   = "pills"
        parameters = [{
          id         = uuidv5("url", "https://ehmirror/workbook/TimeRange")
          version    = "KqlParameterItem/1.0"
          name       = "TimeRange"
          label      = "Time range"
          type       = 4
          isRequired = true
          value      = { durationMs = 86400000 }
          typeSettings = {
            selectableValues = [for ms in [3600000, 14400000, 43200000, 86400000, 259200000, 604800000] : { durationMs = ms }]
          }
        }]
      }
    },
    { type = 3, name = "apps", content = merge(local.dashboard_query_defaults, { title = "Function apps: MirrorTimer runs, failed runs and drains in the time range (empty: none)", query = local.dashboard_queries.apps, visualization = "table" }) },
    { type = 3, name = "throughput", content = merge(local.dashboard_query_defaults, { title = "Records and MiB mirrored per minute", query = local.dashboard_queries.throughput, visualization = "timechart" }) },
    { type = 3, name = "lag_per_app", content = merge(local.dashboard_query_defaults, { title = "Kafka lag per function app, the partitions it owns (records)", query = local.dashboard_queries.lag_per_app, visualization = "timechart" }) },
    { type = 3, name = "lag_per_topic", content = merge(local.dashboard_query_defaults, { title = "Kafka lag per topic (records, partitions with work)", query = local.dashboard_queries.lag_per_topic, visualization = "timechart" }) },
    { type = 3, name = "duration", content = merge(local.dashboard_query_defaults, { title = "Drain duration against its budget and functionTimeout (ms)", query = local.dashboard_queries.duration, visualization = "linechart" }) },
    { type = 3, name = "failures", content = merge(local.dashboard_query_defaults, { title = "Failed MirrorTimer runs, drain errors, gaps, oversized records", query = local.dashboard_queries.failures, visualization = "barchart" }) },
    {
      type = 10
      name = "eventhubs"
      content = merge(local.dashboard_metric_defaults, {
        chartId = "workbook${uuidv5("url", "https://ehmirror/workbook/eventhubs")}"
        title   = "Event Hubs: incoming messages per hub"
        metrics = [{ namespace = "microsoft.eventhub/namespaces", metric = "microsoft.eventhub/namespaces--IncomingMessages", aggregation = 1, splitBy = ["EntityName"] }]
      })
    },
    {
      type = 10
      name = "throttling"
      content = merge(local.dashboard_metric_defaults, {
        chartId = "workbook${uuidv5("url", "https://ehmirror/workbook/throttling")}"
        title   = "Event Hubs: throttled requests and server errors"
        metrics = [
          { namespace = "microsoft.eventhub/namespaces", metric = "microsoft.eventhub/namespaces--ThrottledRequests", aggregation = 1 },
          { namespace = "microsoft.eventhub/namespaces", metric = "microsoft.eventhub/namespaces--ServerErrors", aggregation = 1 },
        ]
      })
    },
    { type = 3, name = "recent_drains", content = merge(local.dashboard_query_defaults, { title = "Last 50 drains", query = local.dashboard_queries.recent_drains, visualization = "table" }) },
  ]

  dashboard_query_defaults = {
    version                  = "KqlItem/1.0"
    size                     = 0
    queryType                = 0
    resourceType             = "microsoft.operationalinsights/workspaces"
    crossComponentResources  = [azurerm_log_analytics_workspace.this.id]
    timeContext              = { durationMs = 86400000 }
    timeContextFromParameter = "TimeRange"
  }

  dashboard_metric_defaults = {
    version                  = "MetricsItem/2.0"
    size                     = 0
    chartType                = 2
    resourceType             = "microsoft.eventhub/namespaces"
    metricScope              = 0
    resourceIds              = [azurerm_eventhub_namespace.this.id]
    timeContext              = { durationMs = 86400000 }
    timeContextFromParameter = "TimeRange"
    gridSettings             = { rowLimit = 10000 }
  }
}

resource "azurerm_application_insights_workbook" "dashboard" {
  # Workbook names are GUIDs; this one is stable per resource group and
  # environment.
  name                = uuidv5("url", "https://ehmirror/workbook/${local.resource_group_name}/${local.base}")
  display_name        = "ehmirror ${var.environment}"
  description         = "Kafka → Event Hubs mirror: throughput, lag, drain duration, failures, throttling."
  resource_group_name = local.resource_group.name
  location            = var.location
  source_id           = lower(azurerm_application_insights.this.id)
  category            = "workbook"

  data_json = jsonencode({
    version             = "Notebook/1.0"
    items               = local.dashboard_items
    fallbackResourceIds = [lower(azurerm_application_insights.this.id)]
  })

  tags = local.tags
}
