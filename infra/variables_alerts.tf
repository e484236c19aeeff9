###############################################################################
# Alerts and dashboard (alerts.tf, dashboard.tf)
###############################################################################

variable "alerts_enabled" {
  description = "Create the Azure Monitor alert rules (failed runs, timer not running, gaps/oversized records, growing lag, lag without incoming messages, Event Hubs throttling)."
  type        = bool
  default     = true
}

variable "alert_email_addresses" {
  description = "E-mail addresses notified when an alert fires (an action group is created for them). Empty: no action group; the alerts still show in Azure Monitor."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for a in var.alert_email_addresses : can(regex("^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$", a))])
    error_message = "alert_email_addresses must be e-mail addresses such as \"oncall@example.com\"."
  }
}

variable "alert_action_group_ids" {
  description = "Resource IDs of existing action groups (e.g. the on-call rotation) that every alert notifies, in addition to alert_email_addresses."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for id in var.alert_action_group_ids : can(regex("^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/(?i:microsoft\\.insights)/actionGroups/[^/]+$", id))])
    error_message = "alert_action_group_ids must be action group resource IDs: /subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Insights/actionGroups/<name>."
  }
}

variable "alert_failed_runs_threshold" {
  description = "Alert when more than this many MirrorTimer executions fail within alert_failed_runs_window (0: any failure)."
  type        = number
  default     = 0

  validation {
    condition     = var.alert_failed_runs_threshold >= 0 && floor(var.alert_failed_runs_threshold) == var.alert_failed_runs_threshold
    error_message = "alert_failed_runs_threshold must be a whole number >= 0."
  }
}

variable "alert_failed_runs_window" {
  description = "Window (ISO 8601 duration) over which failed MirrorTimer executions are counted: PT5M, PT10M, PT15M, PT30M or PT1H."
  type        = string
  default     = "PT15M"

  validation {
    condition     = contains(["PT5M", "PT10M", "PT15M", "PT30M", "PT1H"], var.alert_failed_runs_window)
    error_message = "alert_failed_runs_window must be one of PT5M, PT10M, PT15M, PT30M, PT1H."
  }
}

variable "alert_not_running_window" {
  description = "Alert when no MirrorTimer execution started within this window (ISO 8601 duration): PT15M, PT30M, PT1H, PT2H, PT6H or P1D. Keep it above the MIRROR_SCHEDULE interval."
  type        = string
  default     = "PT15M"

  validation {
    condition     = contains(["PT15M", "PT30M", "PT1H", "PT2H", "PT6H", "P1D"], var.alert_not_running_window)
    error_message = "alert_not_running_window must be one of PT15M, PT30M, PT1H, PT2H, PT6H, P1D."
  }
}

variable "alert_lag_growth_drains" {
  description = "Alert when the total lag grew in each of this many consecutive drains (2-50). With the default schedule (a drain a minute) 5 means five minutes of steady growth."
  type        = number
  default     = 5

  validation {
    condition     = var.alert_lag_growth_drains >= 2 && var.alert_lag_growth_drains <= 50 && floor(var.alert_lag_growth_drains) == var.alert_lag_growth_drains
    error_message = "alert_lag_growth_drains must be a whole number between 2 and 50."
  }
}

variable "alert_lag_growth_window" {
  description = "Window (ISO 8601 duration) searched for the last alert_lag_growth_drains drains; it must hold that many drains at the timer's schedule: PT15M, PT30M, PT1H, PT2H, PT6H or P1D."
  type        = string
  default     = "PT1H"

  validation {
    condition     = contains(["PT15M", "PT30M", "PT1H", "PT2H", "PT6H", "P1D"], var.alert_lag_growth_window)
    error_message = "alert_lag_growth_window must be one of PT15M, PT30M, PT1H, PT2H, PT6H, P1D."
  }
}

variable "alert_stalled_min_lag" {
  description = "Alert when every drain in alert_stalled_window reports more lag than this while Event Hubs receives no message (0: any lag)."
  type        = number
  default     = 0

  validation {
    condition     = var.alert_stalled_min_lag >= 0 && floor(var.alert_stalled_min_lag) == var.alert_stalled_min_lag
    error_message = "alert_stalled_min_lag must be a whole number of records >= 0."
  }
}

variable "alert_stalled_window" {
  description = "Window (ISO 8601 duration) in which lag without a single incoming Event Hubs message raises the alert: PT15M, PT30M, PT1H or PT2H. Metric export to the workspace lags a few minutes, so keep it at 15 minutes or more."
  type        = string
  default     = "PT30M"

  validation {
    condition     = contains(["PT15M", "PT30M", "PT1H", "PT2H"], var.alert_stalled_window)
    error_message = "alert_stalled_window must be one of PT15M, PT30M, PT1H, PT2H."
  }
}

variable "alert_throttled_requests_threshold" {
  description = "Alert when Event Hubs throttles more than this many requests (ThrottledRequests, total over 5 minutes; 0: any throttling)."
  type        = number
  default     = 0

  validation {
    condition     = var.alert_throttled_requests_threshold >= 0
    error_message = "alert_throttled_requests_threshold must be >= 0."
  }
}

variable "alert_capture_window" {
  description = "Alert when the namespace received events (IncomingMessages) but Capture wrote none (CapturedMessages) over this window, an ISO 8601 duration: PT30M, PT1H (default), PT6H, PT12H or PT24H. It must be longer than the longest Capture time window (capture_interval_in_seconds, at most 15 minutes), so that a healthy Capture always writes within it."
  type        = string
  default     = "PT1H"

  validation {
    condition     = contains(["PT30M", "PT1H", "PT6H", "PT12H", "PT24H"], var.alert_capture_window)
    error_message = "alert_capture_window must be PT30M, PT1H, PT6H, PT12H or PT24H (longer than Capture's longest time window, 15 minutes)."
  }
}

variable "alert_backlog_age_minutes" {
  description = "Alert when every drain in 15 minutes left a record older than this many minutes unmirrored (the drain line's backlog_age_ms)."
  type        = number
  default     = 10

  validation {
    condition     = var.alert_backlog_age_minutes >= 1 && floor(var.alert_backlog_age_minutes) == var.alert_backlog_age_minutes
    error_message = "alert_backlog_age_minutes must be a whole number of minutes >= 1."
  }
}

variable "alert_paused_hours" {
  description = "Alert when a topic has been paused for longer than this many hours (the drain line's paused_age_ms; the status reports it after MIRROR_MAX_PAUSE_AGE)."
  type        = number
  default     = 24

  validation {
    condition     = var.alert_paused_hours >= 1 && floor(var.alert_paused_hours) == var.alert_paused_hours
    error_message = "alert_paused_hours must be a whole number of hours >= 1."
  }
}
